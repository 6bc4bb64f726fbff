package keyedsem

import (
	"context"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// Place is a place in a key's line, taken by [Keyed.Join], owned as
// [semaphore.Place] is. Its entry is never evicted while it lasts. A caller
// that waits for a later place of a key while holding an earlier one waits
// for itself: wait for them from different goroutines.
type Place[K comparable] struct {
	s   *Keyed[K]
	r   *waitq.Spot // its owner is the *entry[K] the place holds a reference on
	gen uint64
}

// Join takes a place in key's line without waiting, where Acquire with opts
// would wait, as [semaphore.Weighted.Join] does: a webhook can answer at
// once and its worker wait for the key's turn, and with [WithSequenceOrder]
// a thread's messages are served in order while they wait. It fails with
// Acquire's errors that need no wait, and always under [WithBarging]. It
// allocates nothing.
func (s *Keyed[K]) Join(key K, opts ...semaphore.AcquireOption) (Place[K], error) {
	if len(opts) == 0 {
		return s.joinAt(key, 1, nil)
	}
	n, t, err := s.callOf(opts)
	if err != nil {
		s.rejected.Add(1)
		return Place[K]{}, err
	}
	return s.joinAt(key, n, &t)
}

// joinAt is Join: t (nil: the zero Turn) places the waiter.
func (s *Keyed[K]) joinAt(key K, n int64, t *call.Turn) (Place[K], error) {
	if s.barging {
		s.rejected.Add(1)
		return Place[K]{}, errBargingJoin
	}
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		return Place[K]{}, s.refuse(n)
	}
	// A context that never ends: Join waits for nothing but, with the
	// hard cap, a running eviction pass.
	ctx := context.Background()
	e, took, err := s.lookup(ctx, key, s.takeAtLookup(n, t), false)
	if err != nil {
		s.rejected.Add(1) // ErrTooManyKeys or errTooManyRefs: ctx never ends
		return Place[K]{}, err
	}
	var w *waitq.Waiter
	var p semaphore.Permit
	if took && !s.holds(t) {
		p = s.grant(e, n)
	} else {
		// p when the permits came free meanwhile (w nil)
		if w, p, err = s.enqueue(ctx, e, n, t); err != nil {
			return Place[K]{}, err // enqueue dropped the reference and counted
		}
	}
	r, gen := waitq.NewSpot(e, w, permit.Permit(p))
	return Place[K]{s: s, r: r, gen: gen}, nil
}

// take makes the caller the one user of the place and returns what it
// holds, or reports that the place was used already.
func (p Place[K]) take() (*entry[K], *waitq.Waiter, semaphore.Permit, bool) {
	e, w, granted, ok := waitq.Take(p.r, p.gen)
	if !ok {
		return nil, nil, semaphore.Permit{}, false
	}
	return e.(*entry[K]), w, semaphore.Permit(granted), true
}

// Wait waits for the place's permits, as [semaphore.Place.Wait] does.
// Cancellation: see the package doc.
func (p Place[K]) Wait(ctx context.Context) (semaphore.Permit, error) {
	if ctx == nil {
		panic("keyedsem: nil Context")
	}
	e, w, granted, ok := p.take()
	if !ok {
		return semaphore.Permit{}, semaphore.ErrPlaceUsed
	}
	s := p.s
	if w == nil {
		// Granted at Join. The context is looked at as an acquire looks
		// at it, before handing out permits: one that has ended wins.
		if err := ended(ctx); err != nil {
			// A hand-back, counted only in Cancelled, as the engine's
			// hand-back of a grant that came too late is: the token goes
			// back without a release (which would count the grant in
			// Acquired and Released, and its hold), then the permits and
			// the place's reference, serving the callers behind.
			s.cancelled.Add(1)
			s.untoken(permit.TokenOf(permit.Permit(granted)))
			s.release(e, granted.Weight())
			return semaphore.Permit{}, err
		}
		return granted, nil
	}
	// The engine's wait for a waiter pushed already: a grant there to see
	// when the context has ended too is handed back (see waitq.Await).
	return s.await(ctx, e, w)
}

// Leave gives the place up, as [semaphore.Place.Leave] does.
func (p Place[K]) Leave() {
	e, w, granted, ok := p.take()
	if !ok {
		return
	}
	if s := p.s; waitq.GiveUp(&e.q, line[K]{s, e}, &s.wcache, w, permit.Permit(granted)) {
		s.release(e, 0) // the place's reference
	}
}
