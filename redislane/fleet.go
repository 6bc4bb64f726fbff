package redislane

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/semaphore"
)

// DefaultLimitRefresh is how often the instances of a [Fleet] read the
// fleet's limit, and its leader renews its leadership, when no
// [WithLimitRefresh] is given.
const DefaultLimitRefresh = time.Second

// minLimitRefresh keeps the leader's lease, three refresh intervals, at
// whole milliseconds with room for its margin.
const minLimitRefresh = 10 * time.Millisecond

// WithLimitRefresh sets the refresh interval of a [Fleet] (default
// [DefaultLimitRefresh]): how often each instance reads the fleet's limit
// from Redis and its leader renews its leadership. The leader's lease is
// three intervals, so a leader that stops renewing is replaced within
// three intervals plus one (the next call of another candidate). It is
// ignored by [NewWeighted] and [NewKeyed]. It must be at least 10 ms.
// Use the same interval on every instance.
func WithLimitRefresh(d time.Duration) Option {
	return func(c *config) { c.limitRefresh, c.limitSet = d, true }
}

// Fleet is a global lane whose capacity, the fleet's limit, can be changed
// at run time: by [Fleet.SetCapacity] on the one instance that Redis has
// elected as the leader. It is a [Weighted] (Acquire, TryAcquire, Do,
// Stats, Close, and [AsLane] of its Weighted field work as for any global
// lane) whose capacity is the limit stored in Redis, and it satisfies the
// interface through which a limit controller drives a budget:
//
//	type Target interface { Capacity() int64; SetCapacity(n int64) }
//
// Run the same controller on every instance: the leader's calls change the
// limit, the others' are dropped, so that whichever instance is elected
// next takes over at once. A Fleet also has Leader, which makes it an
// adaptive.Shared target: adaptive.Controller then moves the limit only on
// the leader, has each follower's controller take the fleet's limit at
// each of its decisions, and has a newly elected leader's controller
// continue from the fleet's limit rather than from a value of its own that
// went stale while it followed. A controller made with adaptive.New calls
// SetCapacity at once, so every instance that runs one is a candidate.
// Controller.Do takes permits through [AsBudget]; a lanequeue lane over
// the Fleet ([AsLane], with the controller given to Queue.ObserveLane)
// reports through Queue.Do.
//
// # The guarantee
//
// Every grant is decided in Redis, in the same script that reads the limit,
// so at any instant exactly one limit is in force for the whole fleet: the
// one stored in Redis. It is written only by the leader: each instance
// that has called SetCapacity stands for election, and the first to find
// the leader key {lanes:<name>}:leader absent takes it (in a Lua script,
// for three refresh intervals, renewed every interval) and begins a new
// term, a number larger than every term before, also after Redis lost its
// state or restored an older one (see the package doc: the term is then
// moved past every term seen, and a restored leadership is void). A write
// carries the term in
// which its value was proposed and is applied only if its sender still
// holds the leadership in that term, so a leader that was replaced, or
// that was paused and woke up, cannot write. A leader counts itself the
// leader until the send time of its last successful renewal plus its lease
// minus a fifth (as a permit does), so, while the clocks of the server and
// the instances run at the same rate, two instances never both count
// themselves the leader.
//
// A write that Redis loses is made again by the leader at its next call,
// while its term lasts; until then the limit before it is the one in
// force. A failover or a restart, which lose writes too, end the term
// (the lane sees another server process: see the package doc); the lane
// then keeps the limit that Redis brought back, unless the first instance
// to call after it last read a newer one (written in a later term): the
// lost write once that instance had read it.
//
// Each instance reads the limit once per refresh interval (and from the
// replies of its own writes and refused acquires), so its [Fleet.Capacity]
// is the limit in force, or the one before it for at most one refresh
// interval plus one call after a change, while Redis answers. Capacity
// only decides which weights the instance refuses at once (above it:
// [ErrTooHeavy]); a grant never relies on it.
//
// Shrinking never preempts a holder: permits granted before a shrink stay
// valid (their contexts are not cancelled) and are released as usual;
// nothing is granted until the weight held fits under the new limit (the
// holders over it drain). A waiter whose weight is above the new limit
// fails with [ErrTooHeavy], as in [semaphore.Weighted.SetCapacity], and
// the waiters behind it go on. Raising the limit grants the waiters it
// lets in, in the same script.
//
// # While Redis is unreachable
//
// The limit in force does not change: nobody can write it, so no instance
// raises it, and nothing is granted anyway. Each instance's Capacity stays
// at the last limit it read. A value that the leader's controller sets is
// held (the latest one wins) and written when Redis answers again if the
// instance then still holds the leadership in the same term (nobody led in
// between); it is dropped if another term began, whoever leads it, this
// instance included. At the leader's local deadline (three intervals minus
// a fifth after its last successful renewal) the instance stops counting
// itself the leader, and its later SetCapacity calls are dropped like a
// follower's. Once Redis answers, the first candidate to call after the
// leader key expired becomes the leader. After Redis lost its state, or
// restarted from an older one (a snapshot, an append-only file), the lane
// keeps the limit that came back, or takes the limit of the instance
// that calls first (the last limit it read) if that one is newer or
// nothing came back, gets a new term, and is quarantined as any lane (see
// [WithQuarantine] and the package doc).
//
// Every instance of a fleet lane must be a Fleet: a [NewWeighted] or a
// [NewKeyed] instance of the same name fails with [ErrCapacityMismatch],
// and so does a Fleet on the name of a lane of another kind.
type Fleet struct {
	*Weighted
}

// NewFleet returns the instance of the fleet lane name on client. capacity
// is the limit the lane starts with when this instance creates it in
// Redis; an existing lane keeps its stored limit, which the instance reads
// in its first call (made at once, in the background). Capacity returns
// capacity until then. It fails as [NewWeighted] does (also for a
// [WithLimitRefresh] below 10 ms). Close
// it (its Weighted's Close) to stop its goroutines; a leader resigns at
// Close, so that another instance takes over within one refresh interval.
func NewFleet(client redis.UniversalClient, name string, capacity int64, opts ...Option) (*Fleet, error) {
	c, err := newCoreFleet(client, name, false, true, capacity, opts)
	if err != nil {
		return nil, err
	}
	return &Fleet{Weighted: &Weighted{c: c}}, nil
}

// SetCapacity proposes n as the fleet's limit. On the leader, the value is
// written to Redis by the instance's background loop, at once (a later
// call before the write replaces it); Capacity changes once the write went
// through. On any other instance it is dropped (counted in
// [Stats].LimitsDropped). The first call makes the instance a candidate in
// the leader's election. SetCapacity never blocks and makes no call
// itself. It panics, as [semaphore.Weighted.SetCapacity] does, if n is
// negative or above [semaphore.MaxCapacity] (with an error wrapping
// [ErrInvalidConfig]). After Close it does nothing.
func (f *Fleet) SetCapacity(n int64) {
	if n < 0 || n > semaphore.MaxCapacity {
		panic(fmt.Errorf("%w: capacity %d out of range [0, %d] (semaphore.MaxCapacity)", ErrInvalidConfig, n, int64(semaphore.MaxCapacity)))
	}
	f.c.fleet.propose(n)
}

// Leader reports whether this instance is the fleet's leader now: its last
// successful renewal is recent enough (see [Fleet]).
func (f *Fleet) Leader() bool {
	fl := f.c.fleet
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.leaderLocked(time.Now())
}

// Term returns the highest term of a leadership this instance saw (its own
// or another instance's); terms increase with each new leader, and Term
// never goes back, whatever Redis lost or restored.
func (f *Fleet) Term() int64 { return f.c.fleet.term.Load() }

// ShareOverload passes on an overload that this instance's controller
// counted while it follows, for the leader's controller to hear: the
// instance's fleet call sends it at once, and the leader's next call (within
// a limit refresh) reads it. It is not counted if a permit this instance
// holds was granted before the fleet's limit was last cut: the refused
// work's permit is one of them (the controller passes the overload on
// before it is released), and may be a leftover of the old limit, which
// the cut answered. So after a cut a follower's overloads reach the
// leader only once its calls granted before the cut have ended (with
// calls held for minutes, minutes); the leader's own overloads count from
// when the cut is in force. With Leader and Term it makes a Fleet an
// adaptive.OverloadSharer, whose controller calls it.
func (f *Fleet) ShareOverload() {
	fl := f.c.fleet
	if fl.pend(1, f.c.oldestFence()) {
		fl.kickLoop() // one call carries all the overloads shared meanwhile
	}
}

// pend adds n shared overloads, at which this instance held fence as its
// oldest (0: none held, which tells nothing), to those the next call
// sends, with the lowest such fence; it says whether none was pending.
func (f *fleet) pend(n, fence int64) bool {
	f.ovMu.Lock()
	defer f.ovMu.Unlock()
	if fence > 0 && (f.ovFence == 0 || fence < f.ovFence) {
		f.ovFence = fence
	}
	f.ovPending += n
	return f.ovPending == n
}

// FleetOverloads returns the overloads the fleet's followers have shared,
// as this instance's last fleet call read them; -1 before its first. It
// starts over from 0 if Redis loses the lane's state. The overloads that a
// call of this instance which wrote a lower limit read are not counted:
// they came while the old limit was in force, and the cut answered them.
func (f *Fleet) FleetOverloads() int64 { return f.c.fleet.ovTotal.Load() }

// FleetInUse returns the most weight the whole fleet held at once among
// the samples this instance's fleet calls read since the last FleetInUse
// (at least the latest sample), or -1 before its first call; see
// adaptive.UseSharer, which the leader's controller reads it through.
func (f *Fleet) FleetInUse() int64 {
	fl := f.c.fleet
	return fl.usePeak.Swap(fl.useLast.Load())
}

// sampleUse records held, the fleet's weight held as a fleet call read it.
func (f *fleet) sampleUse(held int64) {
	f.useLast.Store(held)
	for {
		p := f.usePeak.Load()
		if held <= p || f.usePeak.CompareAndSwap(p, held) {
			return
		}
	}
}

// fleet is the state of a Fleet's lane that Weighted does not have.
type fleet struct {
	c        *core
	id       string // this instance in the election
	interval time.Duration
	lttl     time.Duration // the leader's lease: three intervals

	read      atomic.Pointer[limitRead] // the limit as last read from Redis (see store)
	fell      news                      // told when the limit read falls (see store)
	term      atomic.Int64              // the last term seen
	kick      chan struct{}
	loopDone  chan struct{}
	candidate atomic.Bool

	mu       sync.Mutex // protects the fields below
	leader   bool       // the last call found this instance the leader
	deadline time.Time  // until when it counts as the leader
	myTerm   int64      // the term it leads
	pending  bool       // a proposal waits to be written
	want     int64
	wantTerm int64
	// The last value this instance's term put in force (written, or found
	// in force): if Redis loses it (a failover to a replica that missed
	// the write), the leader writes it again while its term lasts.
	kept     int64
	keptTerm int64

	reads, writes, dropped, calls atomic.Uint64
	// ovPending are the overloads this instance's controller shared that
	// the next call adds to the fleet's count, and ovFence the oldest fence
	// this instance held at one of them (0: none held), under ovMu.
	ovMu               sync.Mutex
	ovPending, ovFence int64
	// ovTotal is the count as the last call read it, less the rises that
	// came with a cut (see countShared), -1 before the first; ovRaw is the
	// count as Redis returned it (Fleet.ShareOverload, FleetOverloads).
	ovTotal, ovRaw atomic.Int64
	// usePeak is the most weight held fleet-wide among the samples since
	// FleetInUse last read it, useLast the latest (-1: none yet).
	usePeak, useLast atomic.Int64
}

func newFleet(c *core) *fleet {
	f := &fleet{
		c:        c,
		id:       newID(),
		interval: c.cfg.limitRefresh,
		lttl:     3 * c.cfg.limitRefresh,
		kick:     make(chan struct{}, 1),
		loopDone: make(chan struct{}),
	}
	f.read.Store(&limitRead{limit: c.capacity})
	f.ovTotal.Store(-1)
	f.ovRaw.Store(-1)
	f.usePeak.Store(-1)
	f.useLast.Store(-1)
	return f
}

// countShared takes raw, the followers' shared overloads as a fleet call
// read them. A rise read by the call that wrote a lower limit (cut) landed
// while the old, higher limit was in force: those refusals asked for the
// cut this call made, as the leader's own refusals of work granted before
// a cut do, and do not count again (without this, a follower's refusal and
// the leader's, of one overshoot, cut the limit twice). A count that fell
// (Redis lost it) is a new start, never a rise: the count goes on from
// the lower of the two.
func (f *fleet) countShared(raw int64, cut bool) {
	prev := f.ovRaw.Swap(raw)
	switch {
	case prev < 0:
		f.ovTotal.Store(raw)
	case raw < prev:
		f.ovTotal.Store(min(f.ovTotal.Load(), raw))
	case !cut:
		f.ovTotal.Add(raw - prev)
	}
}

func (f *fleet) leaderLocked(now time.Time) bool { return f.leader && now.Before(f.deadline) }

// seeTerm records a term read from a reply. The fleet script never returns
// a term below the highest one the caller saw (it is passed the caller's
// Term), and the instance never takes one either.
func (f *fleet) seeTerm(term int64) {
	for {
		old := f.term.Load()
		if term <= old || f.term.CompareAndSwap(old, term) {
			return
		}
	}
}

// limitRead is a limit read from Redis and the term in which it was
// written (0: unknown, older than any term). The scripts keep the stored
// limit after a loss unless the caller's was written in a later term, so
// the term must never be newer than the limit's.
type limitRead struct{ limit, term int64 }

// seen records a limit read from a reply that does not say in which term
// it was written: it is sent as unknown (0) until the next fleet call.
func (f *fleet) seen(limit int64) { f.store(&limitRead{limit: limit}) }

// store keeps r as the limit read, and if it fell, tells the waiters that
// wait on shrinkNews: a waiter whose weight is now above it fails at once.
func (f *fleet) store(r *limitRead) {
	if old := f.read.Swap(r); old != nil && r.limit < old.limit {
		f.fell.tell()
	}
}

// shrinkNews returns a channel closed when the limit read next falls.
func (f *fleet) shrinkNews() <-chan struct{} { return f.fell.ch() }

func (f *fleet) kickLoop() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fleet) propose(n int64) {
	if f.c.isClosed() {
		return
	}
	first := f.candidate.CompareAndSwap(false, true)
	f.mu.Lock()
	lead := f.leaderLocked(time.Now())
	if lead {
		f.pending, f.want, f.wantTerm = true, n, f.myTerm
	}
	f.mu.Unlock()
	if !lead {
		f.dropped.Add(1)
	}
	if lead || first {
		f.kickLoop()
	}
}

// fleetLoop is the instance's call of the fleet script: once per refresh
// interval, and at once when a proposal waits. After a failed call it
// tries again after a backoff (5-250 ms, jittered, at most one interval).
// At Close, a leader resigns.
func (c *core) fleetLoop() {
	f := c.fleet
	defer close(f.loopDone)
	t := time.NewTimer(0) // the first call at once
	defer t.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-t.C:
		case <-f.kick:
			t.Stop()
		case <-c.done:
			f.resign()
			return
		}
		sent := time.Now()
		if f.call(false) {
			backoff = 0
			t.Reset(time.Until(sent.Add(f.interval)))
		} else {
			backoff = nextBackoff(backoff)
			t.Reset(min(jitter(backoff), f.interval))
		}
	}
}

// resign gives the leadership up at Close, so that another candidate takes
// it at its next call rather than when the lease runs out. It is one call,
// bounded by Close's bound.
func (f *fleet) resign() {
	f.mu.Lock()
	lead := f.leader
	f.leader, f.pending, f.keptTerm = false, false, 0
	f.mu.Unlock()
	if lead {
		f.call(true)
	}
}

// call makes one fleet script call; it reports whether it went through.
func (f *fleet) call(resign bool) bool {
	c := f.c
	f.mu.Lock()
	set, want, wantTerm := f.pending, f.want, f.wantTerm
	f.mu.Unlock()
	// Up to two intervals: a reply that late still renews the leadership
	// (it lasts three intervals minus a fifth from the send time), and the
	// next call waits for it anyway.
	ctx, cancel := c.callCtx(context.Background(), min(2*f.interval, c.cfg.margin()))
	defer cancel()
	pub, err := c.pubCmd(ctx)
	if err != nil {
		c.st.redisErrs.Add(1)
		return false
	}
	rk := c.bucketKeys("")
	sent := time.Now()
	f.calls.Add(1)
	lr := f.read.Load()
	f.ovMu.Lock()
	ov, fence := f.ovPending, f.ovFence
	f.ovPending, f.ovFence = 0, 0
	f.ovMu.Unlock()
	script := fleetScript
	if c.ord != nil {
		script = c.ord.fleet
	}
	v, err := script.Run(ctx, c.client, c.scriptKeys(rk, c.metaKey, c.prefix+":leader"),
		f.id, lr.limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), c.channel, pub,
		flag(f.candidate.Load()), ms(f.lttl), flag(set), want, wantTerm, flag(resign), f.term.Load(), lr.term, ov, fence,
	).Int64Slice()
	if err == nil && len(v) != 7 {
		err = fmt.Errorf("%w: fleet script returned %v", errBadReply, v)
	}
	if err != nil {
		// The next call sends them again (if this one ran after all, they
		// count twice: one more cut, never a missed one).
		f.pend(ov, fence)
		c.st.redisErrs.Add(1)
		return false
	}
	status, term, limit, written := v[0], v[1], v[2], v[3] == 1
	if status == flMismatch {
		// The name is a lane of another kind: Acquire says so; the limit
		// and the leadership stay as they were.
		return true
	}
	f.reads.Add(1)
	f.countShared(v[5], written && limit < lr.limit)
	f.sampleUse(v[6])
	f.store(&limitRead{limit: limit, term: v[4]})
	f.seeTerm(term)
	if written {
		f.writes.Add(1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if resign {
		return true
	}
	was := f.leader
	f.leader = status == flLeader
	if f.leader && !was {
		// A peak sampled while it followed is not the use of the round
		// trip its controller will decide first as the leader.
		f.usePeak.Store(f.useLast.Load())
	}
	if f.leader {
		f.myTerm = term
		if dl := sent.Add(f.lttl - f.lttl/5); dl.After(f.deadline) {
			f.deadline = dl
		}
	}
	if f.pending {
		switch {
		case !f.leader || f.wantTerm != term:
			// Proposed in a term that is over: never written.
			f.dropped.Add(1)
			f.pending = false
		case set && f.want == want && f.wantTerm == wantTerm:
			// Applied: written, or already the limit in force. A proposal
			// made while the call was in flight stays for the next call
			// (its kick is waiting).
			f.pending = false
			f.kept, f.keptTerm = want, wantTerm
		}
	}
	if f.leader && !f.pending && f.keptTerm == term && limit != f.kept {
		// The limit this term put in force is gone: Redis lost the write.
		f.pending, f.want, f.wantTerm = true, f.kept, term
		f.kickLoop()
	}
	return true
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Budget is a [Fleet] seen as a budget that a limit controller both drives
// and takes permits from: its Acquire returns a semaphore.Permit, as the
// Acquire that adaptive.Controller.Do takes permits through must, where
// the Fleet's own returns a *[Permit]. Make it with [AsBudget]:
//
//	ctl, err := adaptive.New(redislane.AsBudget(fleet), 1, 64)
//	...
//	err = ctl.Do(ctx, 1, callModel)
//
// Its Capacity, SetCapacity and Leader are the Fleet's, so the controller
// moves the fleet's limit only on the leader (adaptive.Shared). The work
// run by Do gets Do's context, not the permit's (which also ends when the
// permit's lease is lost): work that must stop then takes the permit
// itself (Fleet.Acquire, Permit.Context) and reports by hand
// (Controller.Report, before Release), or runs in a lanequeue lane over
// the Fleet ([AsLane] of its Weighted, with the controller given to
// Queue.ObserveLane), whose Queue.Do reports with no code at the call site.
type Budget struct{ f *Fleet }

// AsBudget returns f as a [Budget]. Closing f ends it. It panics if f is
// nil, rather than at the Budget's first use.
func AsBudget(f *Fleet) *Budget {
	if f == nil {
		panic("redislane: AsBudget of a nil Fleet")
	}
	return &Budget{f: f}
}

// Capacity returns the fleet's limit as this instance last read it
// ([Fleet]).
func (b *Budget) Capacity() int64 { return b.f.Capacity() }

// SetCapacity proposes n as the fleet's limit, as [Fleet.SetCapacity].
func (b *Budget) SetCapacity(n int64) { b.f.SetCapacity(n) }

// Leader reports whether this instance leads the fleet, as [Fleet.Leader].
func (b *Budget) Leader() bool { return b.f.Leader() }

// Cooldown closes the fleet's lane until d from now, as [Weighted.Cooldown].
func (b *Budget) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	return b.f.Cooldown(ctx, d)
}

// Term returns the last leadership term this instance saw, as [Fleet.Term].
func (b *Budget) Term() int64 { return b.f.Term() }

// ShareOverload is the Fleet's (see [Fleet.ShareOverload]).
func (b *Budget) ShareOverload() { b.f.ShareOverload() }

// FleetOverloads is the Fleet's (see [Fleet.FleetOverloads]).
func (b *Budget) FleetOverloads() int64 { return b.f.FleetOverloads() }

// FleetInUse is the Fleet's [Fleet.FleetInUse].
func (b *Budget) FleetInUse() int64 { return b.f.FleetInUse() }

// Acquire takes n permits of the fleet as [Weighted.Acquire] does (with
// its options: a fleet made [WithPriorities] or [WithFairShare] orders by
// them, a FIFO one refuses any that sets something), and returns them as
// a semaphore.Permit whose Release runs the Redis release ([PermitOf]
// gives the *Permit: its fencing token and context). The options are
// there so that a Budget is an adaptive.Acquirer, as a semaphore.Weighted
// is.
func (b *Budget) Acquire(ctx context.Context, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, error) {
	p, err := b.f.Acquire(ctx, n, opts...)
	if err != nil {
		return semaphore.Permit{}, err
	}
	return p.handle(), nil
}
