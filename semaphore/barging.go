package semaphore

// Bounded barging (WithBarging): the running goroutine may take free
// permits ahead of the queue, as sync.Mutex lets it in its normal mode,
// until a waiter has waited the bound; then the semaphore hands off in
// strict FIFO order, as sync.Mutex does in its starvation mode, until no
// waiter that old is left.
//
// # Design
//
// Why. Strict FIFO hands each freed permit to a parked waiter: under
// contention every operation is a wake-up and a context switch, while the
// goroutines that are running wait for it. Barging lets a running
// goroutine (a new Acquire, or the releaser acquiring again) go on with
// free permits; a parked waiter is woken to compete, not handed the
// permits, so that most operations never park.
//
// State. A barging semaphore has a barger (nil for every other
// semaphore) with one word of flags, apart from the state word:
//
//	bit 0      woken: a waiter has been woken to compete and has not
//	           finished looking; releases leave the waking to it
//	bit 1      closed: Close was called (the barging fast path cannot
//	           see mu's closed)
//	bits 2..   old: the number of waiters that have waited the bound
//	           and are not served yet; while it is not zero, nobody
//	           barges (strict mode)
//
// The state word keeps its meaning: its slow flag says that waiters are
// queued (or the semaphore is closed), and sends every release to
// WakeAfterRelease.
//
// The fast path. Acquire's fast path is FIFO's, unchanged: it claims
// when the slow flag is clear. With the slow flag set it fails, and
// acquireSlow, whose first line is the one branch a FIFO semaphore pays
// (on the barger pointer, which sits beside mu, whose line acquireSlow
// loads next), goes to acquireBarging: it may claim free permits with a
// free inline token by one compare-and-swap while the flags have neither
// closed nor old set, trying again only when its compare-and-swap lost;
// otherwise it queues, without spinning (a spin measured no gain:
// docs/internals.md). TryAcquire barges by the same rule.
//
// The release. Permit.Release adds the permits to the state word; with
// the slow flag set it calls WakeAfterRelease, whose barging branch
// returns at once when the flags are exactly woken: a woken waiter is on
// its way and will look at these permits. Otherwise it takes mu and
// serves (bargeServeLocked): in strict mode, grantLocked, FIFO's hand-off;
// in normal mode, if the head fits the free permits and nobody is woken,
// it sets woken and nudges the head (waitq.Queue.Nudge: off the queue,
// woken, not granted). The woken waiter tries once for free permits by
// compare-and-swap; if it wins, it clears woken and, if waiters are
// queued and permits are left, serves again; if it loses, it rejoins the
// queue at its old place, the head, clears woken and serves again (which
// may wake it at once). Whoever clears woken looks at the state word after the
// clear, and a release looks at the flags after its add: with Go's
// sequentially consistent atomics one of the two sees the other, so no
// freed permit goes unnoticed while a waiter that fits them is queued.
//
// The bound. Every waiter arms a timer for the bound when it queues
// (pooled with the system clock, so a wait allocates nothing): the clock
// is read only then, and when the timer decides. When it fires, the
// waiter, if still queued, counts itself old and hands off under mu what
// fits (grantLocked); from then on nobody barges, releases hand off in
// order, and a nudged waiter that rejoins while old counts itself too.
// An old waiter stops counting when its wait ends (served, failed or
// left). Waiters are in arrival order and their timers run the same
// length, so the old ones are the head of the queue: strict mode lasts
// until the head is younger than the bound again, or nobody waits.
//
// What it guarantees. Once the oldest waiter has waited the bound (and
// its goroutine has run, to count itself old: scheduling slack), no
// caller takes permits ahead of it: it is served as soon as the holders
// of that moment have released enough permits for it (and for the old
// waiters ahead of it). A heavy waiter is protected the same way: the
// lighter callers that overtake it do so only for the bound. Before the
// bound, the order of service is not FIFO: a newcomer may take free
// permits ahead of every waiter, a woken waiter may lose to it and
// rejoin at the head. Every other guarantee stays: no permit lost or
// counted twice (available + held == capacity); a context that ended
// before the permits came free wins (the barging paths load the state
// word before they look at the context, as the fast path does, and the
// woken waiter looks at its context before it claims); Close fails every
// waiter, also a woken one (when it rejoins); a shrink fails the waiters
// too heavy for it, a woken one when it rejoins; Stats keep their
// meanings, except that a woken waiter, off the queue while it competes,
// is not counted in Waiters for that moment.
//
// Combinations. Barging orders nothing: it is refused together with an
// ordering policy ([WithPriorities], [WithFairShare]) with
// ErrInvalidConfig. WithMaxWait, WithMaxWaiters and WithMaxWaitingWeight
// apply as they do to a FIFO semaphore (a woken waiter that rejoins takes
// its place back even if the queue has filled up meanwhile).

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// defaultBargingBound is sync.Mutex's starvation threshold.
const defaultBargingBound = time.Millisecond

// WithBarging lets callers take free permits ahead of the line, for
// throughput, while no waiter has waited bound (1ms, sync.Mutex's threshold, if
// 0): an old waiter waits at most bound plus the holders' time.
func WithBarging(bound time.Duration) Option {
	return func(c *config) {
		c.bargeSet = true
		c.bargeBound = bound
	}
}

// checkBarging checks WithBarging's setting (configure has refused an
// order beside it already); configure calls it last.
func (c *config) checkBarging() error {
	if c.bargeSet && c.bargeBound < 0 {
		return fmt.Errorf("semaphore: WithBarging(%v): must not be negative: %w", c.bargeBound, ErrInvalidConfig)
	}
	return nil
}

// errBargingJoin is Join's refusal on a barging semaphore: static, so
// that refusing allocates nothing. A line that newcomers overtake has no
// place worth taking, and a place that nobody waits for yet could not
// compete for the permits a release wakes it for.
var errBargingJoin = fmt.Errorf("semaphore: Join on a semaphore made WithBarging, which keeps no places in line: %w", ErrInvalidConfig)

// The flags of barger.flags.
const (
	bWoken   = 1 << 0
	bClosed  = 1 << 1
	oldShift = 2
	oldOne   = 1 << oldShift
)

// barger is what WithBarging adds to a semaphore; see the design above.
type barger struct {
	// flags: woken, closed and the count of old waiters. Read by every
	// barging acquire and every release while waiters are queued;
	// written when a waiter is woken or done looking, and when one gets
	// old.
	flags atomic.Uint64
	_     [cacheLine - 8]byte
	// waited counts grants taken by woken waiters without mu (the
	// others are in Weighted.grantedWait).
	waited atomic.Uint64
	bound  time.Duration
	real   bool      // the clock is the system clock: timers are pooled
	timers sync.Pool // *time.Timer, stopped
}

func newBarger(c *config) *barger {
	b := &barger{bound: c.bargeBound}
	if b.bound == 0 {
		b.bound = defaultBargingBound
	}
	_, b.real = c.clock.(clock.Real)
	return b
}

// mayBarge reports whether, with waiters queued, a caller may take free
// permits ahead of them: the semaphore is open and no waiter is old.
func (b *barger) mayBarge() bool { return b.flags.Load()&^bWoken == 0 }

// boundTimer is one waiting call's timer for the bound.
type boundTimer struct {
	rt *time.Timer // the system clock's, pooled
	ft Timer       // another clock's
}

func (b *barger) arm(clk Clock) (boundTimer, <-chan time.Time) {
	if b.real {
		if rt, _ := b.timers.Get().(*time.Timer); rt != nil {
			rt.Reset(b.bound)
			return boundTimer{rt: rt}, rt.C
		}
		rt := time.NewTimer(b.bound)
		return boundTimer{rt: rt}, rt.C
	}
	ft := clk.NewTimer(b.bound)
	return boundTimer{ft: ft}, ft.C()
}

// disarm stops t; a pooled timer goes back (since Go 1.23 a stopped
// timer's channel holds no stale value).
func (b *barger) disarm(t boundTimer) {
	if t.rt != nil {
		t.rt.Stop()
		b.timers.Put(t.rt)
		return
	}
	t.ft.Stop()
}

// bargeWaited returns the grants that woken waiters took without mu, for
// Stats' Waited.
func (s *Weighted) bargeWaited() uint64 {
	if s.barge == nil {
		return 0
	}
	return s.barge.waited.Load()
}

// acquireBarging is acquireSlow on a barging semaphore: take free permits
// ahead of the queue if no waiter is old (again only if the
// compare-and-swap lost), else queue.
func (s *Weighted) acquireBarging(ctx context.Context, n int64, b *barger) (Permit, error) {
	if n <= 0 {
		s.reject()
		return Permit{}, ErrInvalidWeight
	}
	if n <= s.capacity.Load() {
		for {
			st := s.state.Load()
			// After the load, as in Acquire: a context that ended before
			// the permits came free must win.
			if ctxEnded(ctx) {
				return Permit{}, s.failFast(ctx)
			}
			if st&flagSlow != 0 && !b.mayBarge() {
				break // strict mode, or closed: queue (or fail) in order
			}
			if avail(st) < n || st&tokenMask == 0 {
				break // not free, or out of inline tokens
			}
			if p, ok := s.claimInline(st, n); ok {
				return s.stamp(p), nil
			}
		}
	}
	return s.queueBarging(ctx, n, b)
}

// tryBarging is TryAcquire's way on a barging semaphore when the fast
// path failed: free permits are taken ahead of the queue while no waiter
// is old.
func (s *Weighted) tryBarging(n int64, b *barger) (Permit, bool) {
	for {
		st := s.state.Load()
		if avail(st) < n || (st&flagSlow != 0 && !b.mayBarge()) {
			return Permit{}, false
		}
		if st&tokenMask == 0 {
			break // a spare token: under mu
		}
		if p, ok := s.claimInline(st, n); ok {
			return s.stamp(p), true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || n > s.capacity.Load() {
		return Permit{}, false
	}
	for {
		st := s.state.Load()
		if avail(st) < n || !(s.q.Empty() || b.mayBarge()) {
			return Permit{}, false
		}
		if t, ok := s.claimLocked(st, n); ok {
			return Permit(permit.Make(t, t.Gen(), n)), true
		}
	}
}

// queueBarging takes the permits under mu if it still may, or queues the
// caller and waits.
func (s *Weighted) queueBarging(ctx context.Context, n int64, b *barger) (Permit, error) {
	w, p, err := s.admit(ctx, n, &call.Turn{})
	if w == nil {
		return p, err
	}
	since, timed := w.Since, w.Timed
	p, err = s.waitBarging(ctx, w, b)
	s.waited(since, timed, err)
	return p, err
}

// counted counts a waiter of n permits in the queue. It must be called
// with mu held.
func (s *Weighted) counted(n int64) {
	s.waiters++
	var carry uint64
	s.waitWeight, carry = bits.Add64(s.waitWeight, uint64(n), 0)
	s.waitHi += carry
}

// waitState is what one waiting call of a barging semaphore keeps between
// its looks.
type waitState struct {
	aged <-chan time.Time // the bound's timer; nil once it fired
	old  bool             // counted in the barger's old waiters
	// agedOff: the bound's timer fired while the waiter was off the
	// queue; it counts itself old when it rejoins.
	agedOff bool
}

// waitBarging waits for w, queued, to be granted, failed, or woken to
// compete, until its wait ends.
func (s *Weighted) waitBarging(ctx context.Context, w *waitq.Waiter, b *barger) (Permit, error) {
	var mt Timer
	var expired <-chan time.Time
	if s.maxWait > 0 {
		mt = s.clock.NewTimer(s.maxWait)
		expired = mt.C()
	}
	bt, aged := b.arm(s.clock)
	ws := waitState{aged: aged}
	done := ctx.Done()
	p, err := s.waitLoop(ctx, done, expired, w, b, &ws)
	if mt != nil {
		mt.Stop()
	}
	b.disarm(bt)
	if ws.old {
		b.flags.Add(^uint64(oldOne - 1)) // minus oldOne
	}
	return p, err
}

func (s *Weighted) waitLoop(ctx context.Context, done <-chan struct{}, expired <-chan time.Time, w *waitq.Waiter, b *barger, ws *waitState) (Permit, error) {
	for {
		end := waitq.Ended{}
		select {
		case <-w.Ready():
			end.Woken = true
			// An ending that is there to see wins (go.dev/issue/63615).
			select {
			case <-done:
				end.Err, end.How = ctx.Err(), waitq.Cancelled
			default:
				select {
				case <-expired:
					end.Err, end.How = ErrWaitTooLong, waitq.TimedOut
				default:
				}
			}
		case <-done:
			end.Err, end.How = ctx.Err(), waitq.Cancelled
		case <-expired:
			end.Err, end.How = ErrWaitTooLong, waitq.TimedOut
		case <-ws.aged:
			ws.aged = nil
			s.markOld(w, b, ws)
			continue
		}
		if !end.Woken {
			if waitq.Leave(&s.q, (*owner)(s), &s.wcache, w, end.How) {
				return Permit{}, end.Err
			}
			<-w.Ready() // served meanwhile: sent just after the waker unlocked
			end.Woken = true
		}
		if !w.Nudged() {
			// Granted (in strict mode, or by SetCapacity or a leaving
			// head's hand-off) or failed: the engine's outcome.
			if end.Err != nil {
				return Permit{}, waitq.End(&s.q, (*owner)(s), &s.wcache, w, end)
			}
			p, err := waitq.Outcome(&s.wcache, w)
			return Permit(p), err
		}
		// Woken to compete: w is off the queue and holds the woken flag.
		if end.Err != nil {
			s.giveUpWoken(w, b, end.How)
			return Permit{}, end.Err
		}
		if p, ok := s.compete(ctx, w, b); ok {
			return p, nil
		}
		if p, finished, err := s.rejoin(ctx, w, b, ws); finished {
			return p, err
		}
	}
}

// markOld counts w old when its bound's timer fires, if it is still
// queued, and hands off what fits: nobody barges from now on.
func (s *Weighted) markOld(w *waitq.Waiter, b *barger, ws *waitState) {
	var wake waitq.Chain
	s.mu.Lock()
	if w.Served() {
		// Served or woken meanwhile: a woken waiter counts itself when
		// it rejoins; a served one is done.
		ws.agedOff = true
		s.mu.Unlock()
		return
	}
	b.flags.Add(oldOne)
	ws.old = true
	s.grantLocked(&wake)
	s.mu.Unlock()
	wake.Wake()
}

// compete is a woken waiter's one try for free permits; a lost
// compare-and-swap, like permits not free, sends it back to rejoin. On
// success w goes back to the cache.
func (s *Weighted) compete(ctx context.Context, w *waitq.Waiter, b *barger) (Permit, bool) {
	n := w.N
	st := s.state.Load()
	if ctxEnded(ctx) || b.flags.Load()&bClosed != 0 {
		return Permit{}, false // rejoin sees to it, under mu
	}
	if avail(st) < n || st&tokenMask == 0 {
		return Permit{}, false // not free, or a spare token: under mu
	}
	p, ok := s.claimInline(st, n)
	if !ok {
		return Permit{}, false
	}
	b.waited.Add(1)
	s.wcache.Put(w)
	s.doneWoken(b)
	return s.stamp(p), true
}

// doneWoken ends a woken waiter's look after it took its permits: the
// woken flag goes, and if waiters are queued and permits are left, the
// next one may fit them.
func (s *Weighted) doneWoken(b *barger) {
	b.flags.And(^uint64(bWoken))
	// After the clear: a release that saw the flag set left these
	// permits to us.
	if st := s.state.Load(); st&flagSlow != 0 && avail(st) > 0 {
		var wake waitq.Chain
		s.mu.Lock()
		s.bargeServeLocked(b, &wake)
		s.mu.Unlock()
		wake.Wake()
	}
}

// giveUpWoken ends the wait of w, woken, whose wait ended (how): it is
// counted, the woken flag goes and the queue is served again.
func (s *Weighted) giveUpWoken(w *waitq.Waiter, b *barger, how waitq.Ending) {
	var wake waitq.Chain
	s.mu.Lock()
	(*owner)(s).Count(how)
	b.flags.And(^uint64(bWoken))
	s.bargeServeLocked(b, &wake)
	s.mu.Unlock()
	s.wcache.Put(w)
	wake.Wake()
}

// rejoin is a woken waiter's way back after it lost: under mu it takes
// the permits if they are free now (a spare token), fails if Close or a
// shrink came meanwhile, or leaves if its context ended; otherwise it
// takes its place back at the head of the queue, counting itself old if
// its bound ran out. finished reports that the call is over.
func (s *Weighted) rejoin(ctx context.Context, w *waitq.Waiter, b *barger, ws *waitState) (p Permit, finished bool, err error) {
	if ws.aged != nil {
		select {
		case <-ws.aged:
			ws.aged, ws.agedOff = nil, true
		default:
		}
	}
	o := (*owner)(s)
	n := w.N
	var wake waitq.Chain
	s.mu.Lock()
	how := waitq.Failed
	for {
		if s.closed {
			err = ErrClosed
			break
		}
		if n > s.capacity.Load() {
			err = ErrTooHeavy
			break
		}
		st := s.state.Load()
		if ctxEnded(ctx) { // after the load: see Acquire
			err, how = ctx.Err(), waitq.Cancelled
			break
		}
		if avail(st) >= n {
			if t, ok := s.claimLocked(st, n); ok {
				s.grantedWait++
				p = Permit(permit.Make(t, t.Gen(), n))
				break
			}
			continue
		}
		if st&flagSlow != 0 || s.state.CompareAndSwap(st, st|flagSlow) {
			// Back in the queue, at the head (the oldest key).
			if ws.agedOff && !ws.old {
				b.flags.Add(oldOne)
				ws.old = true
			}
			s.q.Rejoin(w)
			s.counted(n)
			b.flags.And(^uint64(bWoken))
			s.bargeServeLocked(b, &wake) // may wake or grant w itself at once
			s.mu.Unlock()
			wake.Wake()
			return Permit{}, false, nil
		}
	}
	if err != nil {
		o.Count(how)
	}
	b.flags.And(^uint64(bWoken))
	s.bargeServeLocked(b, &wake)
	s.mu.Unlock()
	s.wcache.Put(w)
	wake.Wake()
	return p, true, err
}

// bargeServeLocked serves the queue of a barging semaphore after permits
// may have come free: in strict mode it hands off in FIFO order; in
// normal mode it wakes the head to compete, if the head fits the free
// permits and nobody is woken yet. It must be called with mu held.
func (s *Weighted) bargeServeLocked(b *barger, c *waitq.Chain) {
	o := (*owner)(s)
	for {
		f := b.flags.Load()
		if f>>oldShift != 0 {
			s.grantLocked(c)
			return
		}
		h := s.q.Head()
		if h == nil || f&bWoken != 0 || avail(s.state.Load()) < h.N {
			return
		}
		// The flags change without mu only when a woken waiter clears
		// woken or an old one's wait ends: look again if they did.
		if b.flags.CompareAndSwap(f, f|bWoken) {
			s.q.Nudge(h, c)
			o.Dequeued(h.N)
			if s.q.Empty() {
				o.Emptied()
			}
			return
		}
	}
}

// wakeBarging is WakeAfterRelease on a barging semaphore.
func (s *Weighted) wakeBarging(b *barger) {
	if b.flags.Load() == bWoken {
		return // the woken waiter looks at the state word after it is done
	}
	var wake waitq.Chain
	s.mu.Lock()
	s.bargeServeLocked(b, &wake)
	s.mu.Unlock()
	wake.Wake()
}
