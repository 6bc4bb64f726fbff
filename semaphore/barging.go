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
// The protocol is the engine's, written once for this package and
// keyedsem (internal/waitq/barge.go: the wait loop, the bound, the wake-up
// that is not a grant, the woken waiter's try and its way back, strict
// mode and its end). This file holds what is the semaphore's: its flags,
// its fast path, and its claims and counts (owner's waitq.Barger methods).
//
// State. A barging semaphore has a barger (nil for every other
// semaphore) with one word of flags, apart from the state word:
//
//	bit 0      woken: a waiter has been woken to compete and has not
//	           finished looking; releases leave the waking to it
//	bit 1      closed: Close was called (the barging fast path cannot
//	           see mu's closed)
//	bit 2      strict: a waiter has waited the bound; nobody barges
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
// closed nor strict set, trying again only when its compare-and-swap
// lost; otherwise it queues, without spinning (a spin measured no gain:
// docs/internals.md). TryAcquire barges by the same rule.
//
// The release. Permit.Release adds the permits to the state word (a
// barging release grants nothing, so it never hands its token to the
// head: see handsOffAt); with the slow flag set it calls
// WakeAfterRelease, whose barging branch
// returns at once when the flags are exactly woken: a woken waiter is on
// its way and will look at these permits (after it clears woken, it looks
// at the state word: waitq.Barger's Compete). Otherwise it takes mu and
// serves (waitq.BargeServe).
//
// What it guarantees. Once the oldest waiter has waited the bound (and
// its goroutine has run, to set strict: scheduling slack), no caller
// takes permits ahead of it: it is served as soon as the holders of that
// moment have released enough permits for it (and for the old waiters
// ahead of it). A heavy waiter is protected the same way: the lighter
// callers that overtake it do so only for the bound. Before the bound,
// the order of service is not FIFO: a newcomer may take free permits
// ahead of every waiter, a woken waiter may lose to it and rejoin at the
// head. Every other guarantee stays: no permit lost or counted twice
// (available + held == capacity); a context that ended before the
// permits came free wins (the barging paths load the state word before
// they look at the context, as the fast path does, and the woken waiter
// looks at its context before it claims); Close fails every waiter, also
// a woken one (when it rejoins); a shrink fails the waiters too heavy for
// it, a woken one when it rejoins; Stats keep their meanings, except that
// a woken waiter, off the queue while it competes, is not counted in
// Waiters for that moment.
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
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/call"
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
	bWoken  = 1 << 0
	bClosed = 1 << 1
	bStrict = 1 << 2
)

// barger is what WithBarging adds to a semaphore; see the design above.
type barger struct {
	// flags: woken, closed and strict. Read by every barging acquire and
	// every release while waiters are queued; written when a waiter is
	// woken or done looking, and when strict mode begins or ends.
	flags atomic.Uint64
	_     [cacheLine - 8]byte
	// waited counts grants taken by woken waiters without mu (the
	// others are in Weighted.grantedWait).
	waited atomic.Uint64
	bound  waitq.Bound
}

func newBarger(c *config) *barger {
	b := &barger{}
	d := c.bargeBound
	if d == 0 {
		d = defaultBargingBound
	}
	b.bound.Init(d, c.clock)
	return b
}

// mayBarge reports whether, with waiters queued, a caller may take free
// permits ahead of them: the semaphore is open and not strict.
func (b *barger) mayBarge() bool { return b.flags.Load()&^bWoken == 0 }

// bargeWaited returns the grants that woken waiters took without mu, for
// Stats' Waited.
func (s *Weighted) bargeWaited() uint64 {
	if s.barge == nil {
		return 0
	}
	return s.barge.waited.Load()
}

// acquireBarging is acquireSlow on a barging semaphore: take free permits
// ahead of the queue if it is not strict (again only if the
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
	return s.queueBarging(ctx, n)
}

// tryBarging is TryAcquire's way on a barging semaphore when the fast
// path failed: free permits are taken ahead of the queue while it is not
// strict.
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
// caller (admit stamps its arrival) and waits by the engine's barging
// protocol.
func (s *Weighted) queueBarging(ctx context.Context, n int64) (Permit, error) {
	w, p, err := s.admit(ctx, n, &call.Turn{})
	if w == nil {
		return p, err
	}
	since, timed := w.Since, w.Timed
	got, err := waitq.BargeWait(ctx, &s.q, (*owner)(s), &s.wcache, w, s.mw)
	s.waited(since, timed, err)
	return Permit(got), err
}

// counted counts a waiter of n permits in the queue. It must be called
// with mu held.
func (s *Weighted) counted(n int64) {
	s.waiters++
	var carry uint64
	s.waitWeight, carry = bits.Add64(s.waitWeight, uint64(n), 0)
	s.waitHi += carry
}

// wakeBarging is WakeAfterRelease on a barging semaphore.
func (s *Weighted) wakeBarging(b *barger) {
	if b.flags.Load() == bWoken {
		return // the woken waiter looks at the state word after it is done
	}
	var wake waitq.Chain
	s.mu.Lock()
	waitq.BargeServe(&s.q, (*owner)(s), &wake)
	s.mu.Unlock()
	wake.Wake()
}

// The methods of waitq.Barger, beside waitq.Owner's: the flags are the
// barger's, the claims the state word's.

// Bound returns the barging bound.
func (o *owner) Bound() *waitq.Bound { return &o.barge.bound }

// Wake sets woken if neither woken nor strict is set and n permits are
// available.
func (o *owner) Wake(n int64) (woke, strict bool) {
	b := o.barge
	for {
		f := b.flags.Load()
		if f&bStrict != 0 {
			return false, true
		}
		if f&bWoken != 0 || avail(o.state.Load()) < n {
			return false, false
		}
		// The flags change without mu only when a woken waiter clears
		// woken: look again if they did.
		if b.flags.CompareAndSwap(f, f|bWoken) {
			return true, false
		}
	}
}

// SetStrict sets strict.
func (o *owner) SetStrict() { o.barge.flags.Or(bStrict) }

// Relax clears strict.
func (o *owner) Relax() {
	if b := o.barge; b.flags.Load()&bStrict != 0 {
		b.flags.And(^uint64(bStrict))
	}
}

// ClearWoken clears woken.
func (o *owner) ClearWoken() { o.barge.flags.And(^uint64(bWoken)) }

// Compete takes n free permits with a free inline token, by one
// compare-and-swap, then clears woken and looks at the state word after
// the clear (a release that saw woken set left these permits to it).
func (o *owner) Compete(ctx context.Context, n int64) (p permit.Permit, more, ok bool) {
	s, b := (*Weighted)(o), o.barge
	st := s.state.Load()
	if ctxEnded(ctx) || b.flags.Load()&bClosed != 0 {
		return permit.Permit{}, false, false // Reclaim sees to it, under mu
	}
	if avail(st) < n || st&tokenMask == 0 {
		return permit.Permit{}, false, false // not free, or a spare token: under mu
	}
	got, ok := s.claimInline(st, n)
	if !ok {
		return permit.Permit{}, false, false
	}
	b.waited.Add(1)
	b.flags.And(^uint64(bWoken))
	st = s.state.Load()
	return permit.Permit(s.stamp(got)), st&flagSlow != 0 && avail(st) > 0, true
}

// Reclaim takes n permits under mu if they are free now (a spare token
// too), refuses them after Close, a shrink below n or the end of ctx, or
// sets the slow flag and counts the waiter back in: the engine's
// admission, for a waiter that was the head.
func (o *owner) Reclaim(ctx context.Context, n int64, aged bool) (p permit.Permit, queued bool, how waitq.Ending, err error) {
	g := (*Weighted)(o).gate(n)
	g.Head, g.Full = true, nil // it was the head, and was admitted once
	t, got, err := waitq.Admit(ctx, o, &o.state, n, &g)
	switch got {
	case waitq.Taken:
		o.grantedWait++
		return permit.Make(t, t.Gen(), n), false, 0, nil
	case waitq.CtxEnded:
		return permit.Permit{}, false, waitq.Cancelled, err
	case waitq.Refused:
		return permit.Permit{}, false, waitq.Failed, err
	}
	if aged {
		o.barge.flags.Or(bStrict)
	}
	(*Weighted)(o).counted(n)
	o.barge.flags.And(^uint64(bWoken))
	return permit.Permit{}, true, 0, nil
}
