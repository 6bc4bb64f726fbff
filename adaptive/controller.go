package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/semaphore"
)

// Target is what a [Controller] drives: a budget whose capacity it reads
// at [New] and at each decision, and sets. A [Shared] target's Capacity is
// also read at each report while a cut the controller set has not shown
// there yet (see [Shared]), outside the controller's lock: it must be safe
// for concurrent use, as the targets here are. [semaphore.Weighted] satisfies
// it (the semaphore given to lanequeue's NewGlobalLane),
// and so does a budget shared through Redis (redislane.Fleet, a [Shared]
// target).
//
// At each decision the controller reads Capacity first (a [Shared] target:
// see there): if it is not the value the controller last set (someone else
// called SetCapacity), the controller takes it as its limit and moves from
// there, so that it never undoes a change made behind its back by jumping
// back to its own value. A capacity set out of [floor, ceiling] is set
// back to the nearer bound.
//
// SetCapacity must never take permits from their holders: a shrink below
// what is held lets the holders drain, as semaphore.Weighted.SetCapacity
// does. It is called with the controller's lock held, by the goroutine
// whose report closed a round trip or was its first fresh overload, with
// a value in [floor, ceiling]; no report waits for it (a report that
// finds the lock taken leaves its decision to the goroutine holding it,
// which decides again once it is done: a report, Limit or Stats), but
// Limit and Stats do.
//
// A target's method that panics (they are the caller's code) makes the
// report that was deciding, or reading a Shared target's Capacity while a
// cut waits, panic with it (Report, Observe, Do, and so a lanequeue
// ticket's Finish, which gives the permits back first; or Limit or Stats,
// taking a decision a report left them); the
// controller's lock is released on the way. The value the failed call
// was passed stays the controller's limit until the next decision, which
// (but for a Shared target's leader, which moves from its own limit) finds
// the target's capacity different and takes it, as after a change made
// behind its back.
type Target interface {
	Capacity() int64
	SetCapacity(n int64)
}

// Shared is a [Target] that several instances drive at once, each with a
// controller of its own, of which one at a time, the leader, has its
// SetCapacity calls take effect (the others' are dropped), and whose
// Capacity may lag behind the leader's SetCapacity (a write to Redis in
// flight). redislane.Fleet is one.
//
// Over a Shared target only the leader's controller moves the limit. At
// each decision a controller asks Leader: a follower's controller takes
// the target's Capacity (the fleet's limit as its instance last read it)
// as its limit and moves nothing (its round trips are counted, and Vegas
// keeps learning its baseline, but Stats counts no move); a controller
// whose instance has just been elected first takes the target's Capacity
// too, so that the new leader continues from the fleet's limit and not
// from a value of its own that went stale while it followed. While it
// leads, the controller moves from its own limit, since its own writes
// may still be in flight.
//
// An instance sees only its own share of a shared budget's use, so the
// controller cannot tell a fleet that uses its limit from one that idles:
// over a Shared target every round trip without an overload counts as
// used (AIMD and Vegas may grow it), and the limit rises while the
// provider accepts the work, up to the ceiling, unless the target also
// reports the fleet's use ([UseSharer]). Choose the ceiling for the whole
// fleet.
//
// Term tells elections apart: it must change whenever the fleet elects a
// leader (redislane's terms increase with each one). A controller whose
// instance leads again after another led in between (a failover and back,
// all between two of its decisions) sees Leader true both times; the new
// term makes it take the fleet's limit first, as after any election,
// rather than move from its own stale one.
type Shared interface {
	Target
	Leader() bool
	Term() int64
}

// OverloadSharer is a [Shared] target whose instances share their
// overloads (redislane's Fleet): a follower's controller passes each fresh
// overload it counts on with ShareOverload, at once, and the leader's
// controller counts the rise of FleetOverloads (the count the fleet's
// followers shared, as last read) as an overload of its own, one cut per
// decision, checked at each report. Without it the limit would answer only
// the leader's refusals, and the followers would meet the provider's for
// good. The target may drop an overload it can tell came from work
// granted before the fleet's last cut, which that cut answered, as the
// controller drops its own; ShareOverload is called before the refused
// work's permit is released (see Report), which a target may rely on to
// tell. FleetOverloads may start over from 0 (a store that lost it); a
// fall is not an overload.
type OverloadSharer interface {
	Shared
	ShareOverload()
	FleetOverloads() int64
}

// UseSharer is a [Shared] target that knows the whole fleet's use
// (redislane's Fleet): FleetInUse returns the most permits the fleet held
// at once among the samples it took since the last call (its lane's holders,
// read at each of its calls to the store), or -1 before it has one. The
// leader's controller then counts a round trip as used, and may grow the
// limit, only if that peak was at least half the limit, as a controller of
// one instance does with its own use; so a fleet that idles below half its
// limit keeps it. The peak of samples is looser than one instance's mean
// over the round trip: a fleet that reaches half its limit once in a
// round trip counts as using it.
type UseSharer interface {
	Shared
	FleetInUse() int64
}

// Acquirer is a Target that [Controller.Do] can take permits from;
// [semaphore.Weighted] is one.
type Acquirer interface {
	Acquire(ctx context.Context, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, error)
}

// A semaphore is an Acquirer: checked here, so that a change of its
// Acquire stops the build rather than Do.
var _ Acquirer = (*semaphore.Weighted)(nil)

// Outcome is what a caller tells a [Controller] about one piece of work
// that its target admitted.
type Outcome uint8

const (
	// Ignore is an outcome that says nothing about the provider's limit
	// (a bad request, a cancelled call): it is not counted.
	Ignore Outcome = iota
	// Success is work that the provider accepted and served; its latency
	// counts.
	Success
	// Overload is work that the provider refused for being over its limit:
	// a 429 Too Many Requests or a 503 Service Unavailable. Its latency does
	// not count (a refusal comes back fast).
	Overload
)

// String returns "ignore", "success" or "overload".
func (o Outcome) String() string {
	switch o {
	case Ignore:
		return "ignore"
	case Success:
		return "success"
	case Overload:
		return "overload"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// ErrOverload marks an error as the provider's refusal for being over its
// limit. The default classifier maps an error that wraps it to [Overload]:
// wrap it into the error your client returns for a 429 or a 503, as
// fmt.Errorf("%w: HTTP 429", adaptive.ErrOverload), or give [New] your own
// classifier with [WithClassifier].
var ErrOverload = errors.New("lanes: provider overloaded")

// Classify is the default classifier of [Controller.Do] and
// [Controller.Observe]: nil is [Success], an error wrapping [ErrOverload]
// is [Overload], any other error (a context's end included) is [Ignore].
//
// A 429 or 503 whose error does not wrap ErrOverload is ignored, and the
// controller then sees only the successes: the limit rises while most
// calls are refused. If the limit only rises, look at [Controller.Stats]:
// Ignored growing while Overloads stays at 0 means the refusals are not
// classified; wrap ErrOverload into them or pass [WithClassifier].
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, ErrOverload):
		return Overload
	}
	return Ignore
}

// Controller drives a [Target]'s capacity between a floor and a ceiling
// from the outcomes of the work the target admits (see the package docs
// for the algorithms and their bounds).
//
// Make it with [New]; the zero Controller is not usable and a Controller
// must not be copied. All methods are safe for concurrent use.
type Controller struct {
	// The window being filled, written by every report with atomic adds
	// (no lock: a report costs a few atomic operations). A report whose
	// count reaches window closes the round trip under mu.
	samples   atomic.Int64 // Success and Overload outcomes counted
	overloads atomic.Int64 // of which Overload
	rttSum    atomic.Int64 // total latency of the successes, in nanoseconds
	window    atomic.Int64 // samples that close the window: max(limit, minWindow)
	// lastCut is when the last cut came in force (nanoseconds since
	// epoch): an overload of work admitted before it is a leftover of the
	// higher limit, already acted on, and is not counted.
	lastCut atomic.Int64
	// overAt is the latest grant time of the overloads counted since the
	// last decision, noOverload if none: the decision checks it against
	// lastCut again, since a cut may have come between an overload's
	// report and the decision it waits for.
	overAt atomic.Int64
	// quick says that a fresh overload decides at once: the controller
	// leads its target and the limit is above the floor (at the floor an
	// overload can lower nothing; it stops the round trip's growth).
	quick   atomic.Bool
	ignored atomic.Uint64 // Ignore outcomes reported

	t   Target
	acq Acquirer       // t, if it is one; nil otherwise
	sh  Shared         // t, if it is one; nil otherwise
	os  OverloadSharer // t, if it is one; nil otherwise
	us  UseSharer      // t, if it is one; nil otherwise
	// fleetOv is os's FleetOverloads as last seen by a decision, -1
	// before the first: a rise since is the followers' overloads;
	// fleetLed (under mu) whether the target led then.
	fleetOv  atomic.Int64
	fleetLed bool
	// cutPending is the capacity of a cut set on a Shared target that did
	// not show it at once, made in the target's term cutTerm, until a
	// report finds it in force or the term over (see cutWaits); 0 when
	// none waits. cutOld is the last report that found it not in force.
	// Away from the reports' counters above: read by every report, written
	// only by cuts.
	cutPending, cutTerm, cutOld atomic.Int64
	cfg                         config // immutable after New
	epoch                       time.Time
	// coarse stamps the overloads when the clock is the system's: a
	// system clock read costs up to 100 ns on some virtual machines (an
	// overload report took 138 ns with one, 14 ns with coarse), and the
	// stale check needs the time only to about a millisecond. Unused with
	// another clock.
	coarse    coarse.Clock
	realClock bool

	mu sync.Mutex // protects everything below; held while a window closes
	// The limit is capNow+frac. The integer part is kept apart so
	// that AIMD's growth adds increase to it exactly: as one float64, a
	// limit just under an integer grows past it (3.9999999999999996+4
	// rounds to 8), a capacity one above the band of the package docs.
	capNow   int64   // the capacity last set on the target
	frac     float64 // the limit's fraction, in [0, 1), that decreases leave
	winStart int64   // when the window began, nanoseconds since epoch
	baseline float64 // vegas: latency without queueing, nanoseconds; 0 until measured
	lastRTT  float64 // mean latency of the last window's successes
	st       Stats   // counters and the last move
	// probing says that an overload has cut the limit: the controller has
	// found the provider's limit and probes it from now on (windowFor).
	probing bool
	led     bool  // Shared: the target was the leader at the last decision
	term    int64 // Shared: the target's term at the last decision
}

// New returns a controller that drives t between floor and ceiling. It sets
// t's capacity at once to t's current capacity brought into [floor,
// ceiling], or to the value of [WithInitial].
//
// The algorithm is AIMD (additive increase by 1 per round trip,
// multiplicative decrease by 0.9 on overload) unless an option chooses
// another. New returns an error wrapping [semaphore.ErrInvalidConfig] for a
// nil target, floor < 1, ceiling < floor or ceiling above
// [semaphore.MaxCapacity], or an option out of range (see each option).
func New(t Target, floor, ceiling int64, opts ...Option) (*Controller, error) {
	cfg := config{alg: algAIMD, increase: 1, backoff: 0.9, alpha: 0.1, beta: 0.25, classify: Classify}
	if err := cfg.configure(t, floor, ceiling, opts); err != nil {
		return nil, err
	}
	c := &Controller{t: t, cfg: cfg}
	c.acq, _ = t.(Acquirer)
	c.sh, _ = t.(Shared)
	c.os, _ = t.(OverloadSharer)
	c.us, _ = t.(UseSharer)
	c.fleetOv.Store(-1)
	if c.cfg.clock == nil {
		c.cfg.clock = clock.Real{}
	}
	c.epoch = c.cfg.clock.Now()
	_, c.realClock = c.cfg.clock.(clock.Real)
	c.coarse.Init(c.epoch)
	start := c.cfg.initial
	if !c.cfg.initialSet {
		start = min(max(t.Capacity(), floor), ceiling)
	}
	c.mu.Lock()
	c.capNow = start
	c.st.Limit, c.st.Floor, c.st.Ceiling, c.st.Algorithm = start, floor, ceiling, cfg.alg.String()
	c.window.Store(c.windowFor(start))
	c.lastCut.Store(-1 << 62)
	c.overAt.Store(noOverload)
	c.quick.Store(c.sh == nil && start > floor || c.os != nil)
	t.SetCapacity(start)
	c.mu.Unlock()
	return c, nil
}

// Report tells the controller the outcome of one piece of work that its
// target admitted, and how long the work held its permit (from the grant
// to now). [Ignore] is not counted (Stats.Ignored counts it). A negative
// rtt counts as 0.
//
// Call it before releasing the permit, so that a decrease it causes is in
// force before the permit admits the next caller (Do and lanequeue do).
//
// Cost: a few atomic adds, no lock and no allocation; the report that
// completes a round trip also decides the new limit, under the
// controller's lock, and may call the target's SetCapacity. An [Overload]
// also reads the clock (with the system clock, a coarse one: an atomic
// load), to tell whether the work was admitted before the last decrease,
// and the first one that was not decides at once, as the end of a round
// trip does. While a cut waits to show on a [Shared] target (a few
// milliseconds on a redislane.Fleet), a report also reads the target's
// Capacity, Leader and Term.
func (c *Controller) Report(o Outcome, rtt time.Duration) {
	rtt = min(max(rtt, 0), maxRTT)
	switch o {
	case Success:
		if c.cutPending.Load() != 0 {
			c.cutWaits()
		}
		c.rttSum.Add(int64(rtt))
		if c.samples.Add(1) >= c.window.Load() {
			c.closeWindow()
		}
	case Overload:
		c.overload(c.stamp() - int64(rtt))
	default:
		c.ignored.Add(1)
	}
	if c.os != nil && c.fleetDue() {
		c.closeWindow()
	}
}

// fleetDue says that the fleet's followers shared overloads since the last
// decision (or that no decision has read their count yet).
func (c *Controller) fleetDue() bool { return c.os.FleetOverloads() > c.fleetOv.Load() }

// fleetHeard takes the followers' shared overloads into the decision: it
// records their count and says whether it rose since the last one read,
// both read while the target led. A count unknown (-1) or read while
// following is a new start: a newly elected leader read a count that rose
// while it followed, which its predecessor acted on. It runs under c.mu.
func (c *Controller) fleetHeard() bool {
	if c.os == nil {
		return false
	}
	n, lead := c.os.FleetOverloads(), c.os.Leader()
	old, led := c.fleetOv.Swap(n), c.fleetLed
	c.fleetLed = lead
	return lead && led && old >= 0 && n > old
}

// cutWaits says whether the cut in cutPending is not in force yet. A
// Shared target puts a cut in force later than the decision (its store's
// write): until then all its work is admitted above the cut, which answers
// their refusals. The cut counts (lastCut) from the last report that found
// it not in force, once one finds it in force: work admitted after that
// report may have been admitted at the cut limit, and its refusal counts.
// A cut whose term is over, or whose instance no longer leads, will not
// show (the target drops it): it waits no more, and the refusals count
// (the decision then takes the target's limit).
func (c *Controller) cutWaits() bool {
	p := c.cutPending.Load()
	if p == 0 {
		return false
	}
	if c.t.Capacity() > p {
		if c.sh.Leader() && c.sh.Term() == c.cutTerm.Load() {
			c.cutOld.Store(c.stamp())
			return true
		}
		c.cutPending.CompareAndSwap(p, 0)
		return false
	}
	if c.cutPending.CompareAndSwap(p, 0) {
		for at, old := c.lastCut.Load(), c.cutOld.Load(); old > at && !c.lastCut.CompareAndSwap(at, old); at = c.lastCut.Load() {
		}
	}
	return false
}

// overload counts the refusal of work granted at since (nanoseconds since
// epoch) and, unless the round trip can only end at its count (quick is
// off), decides at once.
func (c *Controller) overload(since int64) {
	if c.cutPending.Load() != 0 && c.cutWaits() {
		return
	}
	// Work admitted before the last cut saw the old, higher limit: its
	// refusal was already acted on.
	if since < c.lastCut.Load() {
		return
	}
	c.overloads.Add(1)
	for at := c.overAt.Load(); since > at && !c.overAt.CompareAndSwap(at, since); at = c.overAt.Load() {
	}
	// overAt is set before closeWindow tries the lock: a holder that makes
	// this report's TryLock fail sees it when it looks again (due).
	if c.samples.Add(1) >= c.window.Load() || c.quick.Load() {
		c.closeWindow()
	}
}

// Observe reports the outcome of work that ended with err after holding
// its permit for held, classified by the controller's classifier ([Classify]
// unless [WithClassifier] gave another). It is the method through which
// a lanequeue lane reports: Queue.ObserveLane(name, c) makes every ticket
// of the lane that ends through Queue.Do or Ticket.Finish call it.
func (c *Controller) Observe(err error, held time.Duration) {
	c.Report(c.cfg.classify(err), held)
}

// Do acquires n permits from the controller's target, runs fn with ctx,
// reports fn's outcome (fn's error classified by the controller's
// classifier, the latency measured from the grant to fn's return), and
// releases the permits. It returns the acquire error, or fn's error.
//
// Cancellation: as the target's Acquire, for example
// [semaphore.Weighted.Acquire]: if ctx ends while Do waits, Do returns
// ctx.Err() without calling fn, and reports nothing. Once fn runs, the
// permits are held until it returns. If fn panics, the permits are released
// and nothing is reported.
//
// Do panics if the target is not an [Acquirer] (semaphore.Weighted is).
func (c *Controller) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	if c.acq == nil {
		panic("adaptive: Do needs a target with an Acquire method, such as *semaphore.Weighted")
	}
	p, err := c.acq.Acquire(ctx, n)
	if err != nil {
		return err
	}
	defer p.Release() // after the report below: see Report
	start := c.cfg.clock.Now()
	err = fn(ctx)
	c.Report(c.cfg.classify(err), c.cfg.clock.Now().Sub(start))
	return err
}

// Target returns the target the controller drives, as given to [New].
// lanequeue's Queue.ObserveLane uses it to refuse a controller that drives
// another budget than the lane's.
func (c *Controller) Target() Target { return c.t }

// Limit returns the controller's limit: the capacity it last set on its
// target, or, when another set the target's capacity (a [Shared] target's
// leader), the one it took from the target at its last decision. A
// decision that is due (a report left it to the lock's holder) is taken
// first, so the limit is the one after it; so Limit may call the target,
// and panic with it (see Target).
func (c *Controller) Limit() int64 {
	var n int64
	c.read(func() { n = c.capNow })
	return n
}

// read is Limit's and Stats' way to the controller's state: under c.mu,
// it first takes a decision that is due (one that a report left to the
// lock's holder, or that no report has taken yet), so that the snapshot is
// of the limit after it, then runs snap. After unlocking it takes a
// decision that a report left to it while it held the lock, as any holder
// does (see closeWindow), so that an overload reported during a scrape
// cuts at once, not at the next report.
func (c *Controller) read(snap func()) {
	func() {
		c.mu.Lock()
		defer c.mu.Unlock() // also when the target panics: see decideAndUnlock
		if c.due() {
			c.decideLocked()
		}
		snap()
	}()
	if c.due() {
		c.closeWindow()
	}
}

// now returns the controller's clock as nanoseconds since New.
func (c *Controller) now() int64 { return int64(c.cfg.clock.Now().Sub(c.epoch)) }

// stamp is now, to about a millisecond (a little earlier) when the clock
// is the system's: an overload's grant looks up to that much older, so a
// refusal of work admitted within it after a cut is not counted.
func (c *Controller) stamp() int64 {
	if c.realClock {
		return c.coarse.Read()
	}
	return c.now()
}

// maxRTT bounds a report's latency, and maxWindow a round trip's reports,
// so that a round trip's total latency fits its int64 (2^42 ns * 2^20 =
// 2^62): a call held over 73 minutes counts as 73 minutes, and a lane of
// over a million permits decides every million reports, more often than
// once per round trip.
const (
	maxRTT    = 1 << 42
	maxWindow = 1 << 20
)

// probeReports is the fewest reports between two probes into the
// provider's limit, once an overload has shown where it is: a probe costs
// about one refusal, so this bounds the refusals of a steady state near
// 1/probeReports (0.3%) whatever the limit. Without it a round trip of
// limit reports makes the refusal rate about increase/((1-backoff)·limit²):
// lanesim -provider measured 7% at a true limit near 10, and 0.3% near 60,
// at every latency from 20 ms to 2 s.
const probeReports = 300

// windowFor returns the reports that make a round trip at a capacity:
// max(capacity, minWindow), and, once an overload has cut the limit, enough
// that the growth from a cut back up to the provider's limit, max(1,
// (1-backoff)·capacity/increase) round trips, spans probeReports reports.
// Above (1-backoff)·probeReports/increase permits (30 by default) the term
// is below the capacity and changes nothing. It runs under c.mu, or in New.
func (c *Controller) windowFor(capacity int64) int64 {
	w := max(capacity, c.cfg.minWindow)
	if c.probing {
		step := c.cfg.increase
		if c.cfg.alg == algVegas {
			// its least growth: against a flat latency it grows up to
			// alpha·limit a round trip, so between 10 and 30 permits it
			// probes up to alpha·limit times as often (0.67% at 20)
			step = 1
		}
		trips := max((1-c.cfg.backoff)*float64(capacity)/step, 1)
		w = max(w, int64(math.Ceil(probeReports/trips)))
	}
	return min(w, maxWindow)
}

// noOverload is overAt when no overload was counted since the last
// decision.
const noOverload = math.MinInt64

// closeWindow decides, if a decision is due (see due), under c.mu. A report
// that finds the lock taken leaves the decision to the holder, which looks
// again after unlocking: whatever a report counted before its TryLock
// failed is then seen by the holder, or by the next one, so no round trip's
// end and no overload is lost, and no report waits for another's decision.
func (c *Controller) closeWindow() {
	for c.mu.TryLock() {
		c.decideAndUnlock()
		// Looked at after unlocking: a report whose TryLock failed while
		// the lock was held counted before it failed.
		if !c.due() {
			return
		}
	}
}

// decideAndUnlock decides under c.mu, which the caller took, and unlocks
// it, also when the target panics (its methods are the user's code): the
// panic goes on to the reporting goroutine, and the controller stays
// usable (see Target).
func (c *Controller) decideAndUnlock() {
	defer c.mu.Unlock()
	c.decideLocked()
}

// due says a decision is due: a round trip's worth of reports, or, when
// quick, an overload counted since the last decision.
func (c *Controller) due() bool {
	return c.samples.Load() >= c.window.Load() || (c.quick.Load() && c.overAt.Load() != noOverload) ||
		(c.os != nil && c.fleetDue())
}

// decideLocked ends the round trip: at its count of reports, or early at a
// fresh overload. It takes the round trip's counts out, decides the new
// limit and sets it. It runs under c.mu.
func (c *Controller) decideLocked() {
	n := c.samples.Load()
	full := n >= c.window.Load()
	fleet := c.fleetHeard()
	if !full && !fleet && !(c.quick.Load() && c.overAt.Load() != noOverload) {
		return // decided by another report in between
	}
	now := c.now()
	// Moves from the target's capacity when another set it (see Target
	// and Shared).
	lead := true
	if c.sh != nil {
		lead = c.sh.Leader()
		term := c.sh.Term()
		if !lead || !c.led || term != c.term {
			c.follow(now, lead)
		}
		c.led, c.term = lead, term
	} else if c.t.Capacity() != c.capNow {
		c.follow(now, true)
	}
	// An overload counts if its work was granted at or after the last cut,
	// checked again here: a cut (or a lower capacity taken by follow) may
	// have come since it was reported.
	at := c.overAt.Swap(noOverload)
	overloaded := at != noOverload && at >= c.lastCut.Load()
	if !lead && overloaded && c.os != nil {
		c.os.ShareOverload() // for the leader's controller
	}
	// A rise of the fleet's count while a cut waits to show came from work
	// admitted above it, which the cut answers.
	overloaded = overloaded || (lead && fleet && !c.cutWaits())
	if !full && !overloaded {
		c.quick.Store(lead && c.exact() > float64(c.cfg.floor) || c.os != nil)
		return // the round trip goes on
	}
	// Reports that land between these loads and the subtractions stay in
	// the next window. An overload counts itself before its sample, so
	// one that lands between the loads of n and ov can be in ov and not in
	// n: at most n are taken, and the rest stay with their samples, in the
	// next window (Overloads never passes Samples).
	ov := min(c.overloads.Load(), n)
	sum := c.rttSum.Load()
	c.samples.Add(-n)
	c.overloads.Add(-ov)
	c.rttSum.Add(-sum)

	dur := now - c.winStart
	c.winStart = now
	c.st.Windows++
	c.st.Samples += uint64(n)
	c.st.Overloads += uint64(ov)
	ok := n - ov
	if ok > 0 {
		c.lastRTT = float64(sum) / float64(ok)
	}

	// Little's law: the mean number of permits out during the window is
	// the time they were held over the window's length. An instance of a
	// Shared target sees only its own share: see Shared; the fleet's use,
	// if the target knows it, is the leader's to read (UseSharer).
	limit := c.exact()
	used := c.sh != nil || dur <= 0 || 2*float64(sum) >= float64(dur)*limit
	if c.us != nil && lead {
		if peak := c.us.FleetInUse(); peak >= 0 {
			used = 2*float64(peak) >= limit
		}
	}

	capNext, frac, why := c.cfg.decide(c, overloaded, ok > 0, used)
	if !lead {
		// A follower's move would be dropped: it only learns (vegas's
		// baseline, above), and shares its overloads (above), at once.
		c.quick.Store(c.os != nil)
		return
	}
	switch {
	case capNext < c.cfg.floor:
		capNext, frac = c.cfg.floor, 0
	case capNext >= c.cfg.ceiling:
		capNext, frac = c.cfg.ceiling, 0
	}
	c.frac = frac
	c.quick.Store(capNext > c.cfg.floor || frac > 0 || c.os != nil)
	if capNext != c.capNow {
		c.cutPending.Store(0)
		if capNext < c.capNow {
			c.lastCut.Store(now)
		}
		switch why {
		case ReasonGrowth:
			c.st.Increases++
		case ReasonOverload:
			c.st.OverloadDecreases++
			c.probing = true
		case ReasonLatency:
			c.st.LatencyDecreases++
		}
		c.st.LastReason = why
		c.st.LastChange = c.epoch.Add(time.Duration(now))
		cut := capNext < c.capNow
		c.capNow = capNext
		c.t.SetCapacity(capNext)
		if cut && c.sh != nil && c.t.Capacity() > capNext {
			c.cutTerm.Store(c.term)
			c.cutOld.Store(now)
			c.cutPending.Store(max(capNext, 1)) // see cutWaits
		}
	}
	c.window.Store(c.windowFor(capNext))
}

// follow takes the target's capacity, brought into [floor, ceiling], as
// the limit; one out of that range is set back to the nearer bound when
// the controller's calls take effect (set: not a Shared target's
// follower). A lower one counts as a cut for the stale check of overloads:
// work admitted before it saw the higher limit. It runs under c.mu.
func (c *Controller) follow(now int64, set bool) {
	raw := c.t.Capacity()
	got := min(max(raw, c.cfg.floor), c.cfg.ceiling)
	if got != raw && set {
		c.t.SetCapacity(got)
	}
	c.cutPending.Store(0)
	if got == c.capNow {
		return // keeps the fraction of the exact limit
	}
	if got < c.capNow {
		c.lastCut.Store(now)
	}
	c.capNow, c.frac = got, 0
	c.window.Store(c.windowFor(got))
}

// exact returns the limit as one float64, capNow+frac. It runs under c.mu.
func (c *Controller) exact() float64 { return float64(c.capNow) + c.frac }
