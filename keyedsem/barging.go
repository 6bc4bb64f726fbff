package keyedsem

// Bounded barging per key (WithBarging): the engine's protocol
// (internal/waitq/barge.go), which package semaphore's barging runs too,
// on an entry. What is the entry's:
//
//   - The flags live in the entry's state word (woken, strict: two bits
//     taken from the reference count, which keeps 30 bits), so an entry
//     stays six words, and a release and a woken waiter's claim see each
//     other in the one word they both change: a release that finds woken
//     set (and strict clear) gives its permits back by the plain
//     compare-and-swap, without the entry's mutex; the woken waiter clears
//     woken in the compare-and-swap that takes its permits.
//   - Lookups (Acquire and TryAcquire alike) take free permits of a queued
//     entry while strict is clear (lookup's next), so the barging fast path
//     is the ordinary one.
//   - A waiter holds its reference on the entry throughout, also while it
//     is woken and off the queue, so the entry is never idle, evicted or
//     reused under it.

import (
	"context"
	"fmt"
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
	got, err := waitq.BargeWait(ctx, &e.q, line[K]{s, e}, &s.wcache, w, nil)
	if err != nil {
		// Left, failed, or a grant given back: the reference goes, and
		// with it the entry if it was the last.
		s.release(e, 0)
		return semaphore.Permit{}, err
	}
	permit.OwnerOf(permit.TokenOf(got)).(*stripe[K]).waited.Add(1)
	if timed {
		s.tm.Wait.Observe(s.hc.Precise() - since)
	}
	return semaphore.Permit(got), nil
}

// The methods of waitq.Barger, beside waitq.Owner's: the flags are bits
// of the entry's state word, taken with the permits where they can be.

// Bound returns the barging bound.
func (l line[K]) Bound() *waitq.Bound { return &l.s.barge }

// Wake sets woken if neither woken nor strict is set and n permits are
// free.
func (l line[K]) Wake(n int64) (woke, strict bool) {
	for {
		st := l.e.state.Load()
		if st&kStrict != 0 {
			return false, true
		}
		if st&kWoken != 0 || avail(st) < n {
			return false, false
		}
		if l.e.state.CompareAndSwap(st, st|kWoken) {
			return true, false
		}
	}
}

// SetStrict sets strict.
func (l line[K]) SetStrict() { setBits(l.e, kStrict) }

// Relax clears strict.
func (l line[K]) Relax() { clearBits(l.e, kStrict) }

// ClearWoken clears woken.
func (l line[K]) ClearWoken() { clearBits(l.e, kWoken) }

// Compete takes n free permits and clears woken in one compare-and-swap.
func (l line[K]) Compete(ctx context.Context, n int64) (p permit.Permit, more, ok bool) {
	e := l.e
	st := e.state.Load()
	if ended(ctx) != nil || l.s.closed.Load() {
		return permit.Permit{}, false, false // Reclaim sees to it, under the lock
	}
	if avail(st) < n || !e.state.CompareAndSwap(st, (st-uint64(n))&^kWoken) {
		return permit.Permit{}, false, false
	}
	return permit.Permit(l.s.grant(e, n)), st&queuedBit != 0 && avail(st) > n, true
}

// Reclaim takes n free permits under the lock (the engine then clears
// woken); refuses them after Close or the end of ctx; or sets the queued
// bit (and strict if aged) and clears woken in one compare-and-swap, and
// counts the waiter back in: the engine's admission, for a waiter that was
// the head.
func (l line[K]) Reclaim(ctx context.Context, n int64, aged bool) (p permit.Permit, queued bool, how waitq.Ending, err error) {
	g := l.s.gate()
	g.Head = true // it was the head, and was admitted once: no Full
	g.Clear = kWoken
	if aged {
		g.Set |= kStrict
	}
	_, got, err := waitq.Admit(ctx, l, &l.e.state, n, &g)
	switch got {
	case waitq.Taken:
		return permit.Permit(l.s.grant(l.e, n)), false, 0, nil
	case waitq.CtxEnded:
		return permit.Permit{}, false, waitq.Cancelled, err
	case waitq.Refused:
		return permit.Permit{}, false, waitq.Failed, err
	}
	l.s.waiters.Add(1)
	return permit.Permit{}, true, 0, nil
}
