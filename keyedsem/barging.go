package keyedsem

// Bounded barging per key (WithBarging): the design of package semaphore's
// (see semaphore/barging.go), on an entry. What differs:
//
//   - The flags live in the entry's state word (woken, strict: two bits
//     taken from the reference count, which keeps 31 bits), so an entry
//     stays six words, and a release and a woken waiter's claim see each
//     other in the one word they both change: a release that finds woken
//     set (and strict clear) gives its permits back by the plain
//     compare-and-swap, without the entry's mutex; the woken waiter clears
//     woken in the compare-and-swap that takes its permits.
//   - Lookups (Acquire and TryAcquire alike) take free permits of a queued
//     entry while strict is clear (lookup's next), so the barging fast path
//     is the ordinary one.
//   - Strict is set by a waiter whose bound's timer fired while it was
//     queued (or, woken meanwhile, when it rejoins), and cleared under the
//     entry's mutex when the queue's head has waited less than the bound
//     (the waiters' keys are their arrival times, read from the clock when
//     they queue) or nobody waits. The clock is read when queueing, and in
//     strict mode when deciding whether it ends.
//   - A waiter holds its reference on the entry throughout, also while it
//     is woken and off the queue, so the entry is never idle, evicted or
//     reused under it.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// WithBarging lets each key's callers take its free permits ahead of its
// line, as [semaphore.WithBarging] does, for a keyed mutex where order does
// not matter. A barging Keyed keeps no places ([Keyed.Join]).
func WithBarging(bound time.Duration) Option {
	return func(c *config) { c.barging, c.bargeBound = true, bound }
}

// errBargingJoin is Join's refusal on a barging keyed semaphore.
var errBargingJoin = fmt.Errorf("keyedsem: Join on a keyed semaphore made WithBarging, which keeps no places in line: %w", semaphore.ErrInvalidConfig)

// bargeState is what WithBarging adds to a keyed semaphore.
type bargeState struct {
	bound  time.Duration
	timers sync.Pool // *time.Timer, stopped, with the system clock
}

type bargeTimer struct {
	rt *time.Timer
	ft semaphore.Timer
}

func (s *Keyed[K]) armBound() (bargeTimer, <-chan time.Time) {
	if s.realClock {
		if rt, _ := s.barge.timers.Get().(*time.Timer); rt != nil {
			rt.Reset(s.barge.bound)
			return bargeTimer{rt: rt}, rt.C
		}
		rt := time.NewTimer(s.barge.bound)
		return bargeTimer{rt: rt}, rt.C
	}
	ft := s.clock.NewTimer(s.barge.bound)
	return bargeTimer{ft: ft}, ft.C()
}

func (s *Keyed[K]) disarmBound(t bargeTimer) {
	if t.rt != nil {
		t.rt.Stop()
		s.barge.timers.Put(t.rt)
		return
	}
	t.ft.Stop()
}

// setBits and clearBits change flags of e's state (busy, referenced).
func setBits[K comparable](e *entry[K], b uint64) {
	for {
		st := e.state.Load()
		if st&b == b || e.state.CompareAndSwap(st, st|b) {
			return
		}
	}
}

func clearBits[K comparable](e *entry[K], b uint64) {
	for {
		st := e.state.Load()
		if st&b == 0 || e.state.CompareAndSwap(st, st&^b) {
			return
		}
	}
}

// waitBarging is wait on a barging semaphore: the caller holds a reference
// on e but no permits. Its admission is enqueue's, which takes the key's
// lock at once: a spin for free permits before it measured no gain
// (docs/internals.md).
func (s *Keyed[K]) waitBarging(ctx context.Context, e *entry[K], n int64) (semaphore.Permit, error) {
	w, p, err := s.enqueue(ctx, e, n, nil)
	if w == nil {
		return p, err
	}
	since, timed := w.Since, w.Timed // WithHistograms: when the wait began, if timed
	bt, aged := s.armBound()
	p, err = s.bargeLoop(ctx, e, w, aged)
	s.disarmBound(bt)
	if err != nil {
		// Left, failed, or a grant given back: the reference goes, and
		// with it the entry if it was the last.
		s.release(e, 0)
		return semaphore.Permit{}, err
	}
	permit.OwnerOf(permit.TokenOf(permit.Permit(p))).(*stripe[K]).waited.Add(1)
	if timed {
		s.tm.Wait.Observe(s.hc.Precise() - since)
	}
	return p, nil
}

func (s *Keyed[K]) bargeLoop(ctx context.Context, e *entry[K], w *waitq.Waiter, aged <-chan time.Time) (semaphore.Permit, error) {
	done := ctx.Done()
	agedOff := false // the bound ran out while w was woken, off the queue
	for {
		end := waitq.Ended{How: waitq.Cancelled}
		select {
		case <-w.Ready():
			end.Woken = true
			select { // an ending that is there to see wins
			case <-done:
				end.Err = ctx.Err()
			default:
			}
		case <-done:
			end.Err = ctx.Err()
		case <-aged:
			aged = nil
			agedOff = s.bargeAged(e, w)
			continue
		}
		if !end.Woken {
			if waitq.Leave(&e.q, line[K]{s, e}, &s.wcache, w, waitq.Cancelled) {
				return semaphore.Permit{}, end.Err
			}
			<-w.Ready() // served meanwhile: sent just after the waker unlocked
			end.Woken = true
		}
		if !w.Nudged() {
			if end.Err != nil {
				return semaphore.Permit{}, waitq.End(&e.q, line[K]{s, e}, &s.wcache, w, end)
			}
			p, err := waitq.Outcome(&s.wcache, w)
			return semaphore.Permit(p), err
		}
		if end.Err != nil {
			s.bargeGiveUp(e, w, waitq.Cancelled)
			return semaphore.Permit{}, end.Err
		}
		if p, ok := s.bargeCompete(ctx, e, w); ok {
			return p, nil
		}
		if !agedOff && aged != nil {
			select {
			case <-aged:
				aged, agedOff = nil, true
			default:
			}
		}
		if p, finished, err := s.bargeRejoin(ctx, e, w, agedOff); finished {
			return p, err
		}
	}
}

// bargeAged makes e strict when w's bound ran out while it is queued, and
// hands off what fits. It reports true if w was woken or served meanwhile
// (a woken waiter makes e strict when it rejoins).
func (s *Keyed[K]) bargeAged(e *entry[K], w *waitq.Waiter) bool {
	var wake waitq.Chain
	e.mu.Lock()
	if w.Served() {
		e.mu.Unlock()
		return true
	}
	setBits(e, kStrict)
	s.grantLocked(e, &wake)
	e.mu.Unlock()
	wake.Wake()
	return false
}

// bargeGiveUp ends the wait of w, woken, whose context ended: counted,
// woken cleared, the queue served again.
func (s *Keyed[K]) bargeGiveUp(e *entry[K], w *waitq.Waiter, how waitq.Ending) {
	var wake waitq.Chain
	e.mu.Lock()
	line[K]{s, e}.Count(how)
	clearBits(e, kWoken)
	s.bargeServeLocked(e, &wake)
	e.mu.Unlock()
	s.wcache.Put(w)
	wake.Wake()
}

// bargeCompete is a woken waiter's one try for e's free permits, with no
// spin (as package semaphore's compete): a lost compare-and-swap, like
// permits not free, sends it to bargeRejoin. It clears woken in the
// compare-and-swap that takes them; on success w goes back to the cache.
func (s *Keyed[K]) bargeCompete(ctx context.Context, e *entry[K], w *waitq.Waiter) (semaphore.Permit, bool) {
	n := w.N
	st := e.state.Load()
	if ended(ctx) != nil || s.closed.Load() {
		return semaphore.Permit{}, false // bargeRejoin sees to it, under the lock
	}
	if avail(st) < n || !e.state.CompareAndSwap(st, (st-uint64(n))&^kWoken) {
		return semaphore.Permit{}, false
	}
	s.wcache.Put(w)
	if st&queuedBit != 0 && avail(st) > n {
		// Permits are left: the next waiter may fit them.
		var wake waitq.Chain
		e.mu.Lock()
		s.bargeServeLocked(e, &wake)
		e.mu.Unlock()
		wake.Wake()
	}
	return s.grant(e, n), true
}

// bargeRejoin is a woken waiter's way back after it lost: under the lock
// it takes the permits if they are free now, fails after Close, leaves if
// its context ended, or takes its place back at the head of the queue
// (making e strict if its bound ran out).
func (s *Keyed[K]) bargeRejoin(ctx context.Context, e *entry[K], w *waitq.Waiter, aged bool) (p semaphore.Permit, finished bool, err error) {
	n := w.N
	var wake waitq.Chain
	e.mu.Lock()
	for {
		if s.closed.Load() {
			err = semaphore.ErrClosed
			s.failed.Add(1)
			break
		}
		st := e.state.Load()
		if err = ended(ctx); err != nil { // after the load: see ended
			s.cancelled.Add(1)
			break
		}
		if avail(st) >= n {
			if e.state.CompareAndSwap(st, (st-uint64(n))&^kWoken) {
				p = s.grant(e, n)
				break
			}
			continue
		}
		nst := (st | queuedBit) &^ kWoken
		if aged {
			nst |= kStrict
		}
		if e.state.CompareAndSwap(st, nst) {
			e.q.Rejoin(w)
			s.waiters.Add(1)
			s.bargeServeLocked(e, &wake) // may wake or grant w itself at once
			e.mu.Unlock()
			wake.Wake()
			return semaphore.Permit{}, false, nil
		}
	}
	clearBits(e, kWoken)
	s.bargeServeLocked(e, &wake)
	e.mu.Unlock()
	s.wcache.Put(w)
	wake.Wake()
	return p, true, err
}

// bargeServeLocked serves e's queue after permits may have come free: in
// strict mode it hands off in FIFO order, and ends strict mode once the
// head has waited less than the bound (or nobody waits); otherwise it
// wakes the head to compete, if it fits and nobody is woken. It must be
// called with e.mu held, by a holder of a reference.
func (s *Keyed[K]) bargeServeLocked(e *entry[K], c *waitq.Chain) {
	for {
		st := e.state.Load()
		if st&kStrict != 0 {
			s.grantLocked(e, c)
			if h := e.q.Head(); h == nil || s.freshNow()-h.Arrival < int64(s.barge.bound) {
				clearBits(e, kStrict)
			}
			return
		}
		h := e.q.Head()
		if h == nil || st&kWoken != 0 || avail(st) < h.N {
			return
		}
		if e.state.CompareAndSwap(st, st|kWoken) {
			e.q.Nudge(h, c)
			line[K]{s, e}.Dequeued(h.N)
			if e.q.Empty() {
				clearBits(e, queuedBit)
			}
			return
		}
	}
}
