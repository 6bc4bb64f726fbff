package keyedsem

import (
	"context"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// placer is a Keyed as the waitq.Placer of its places: a distinct,
// unexported type, so that the methods Place calls are out of users'
// reach.
type placer[K comparable] Keyed[K]

// placeOf makes the semaphore.Place of a spot (see waitq.PlaceOf).
var placeOf = waitq.PlaceOf.(func(waitq.Spot) semaphore.Place)

// Join takes a place in key's line without waiting, where Acquire with opts
// would wait, as [semaphore.Weighted.Join] does: a webhook can answer at
// once and its worker wait for the key's turn, and with [WithSequenceOrder]
// a thread's messages are served in order while they wait. It fails with
// Acquire's errors that need no wait, and always under [WithBarging]. It
// allocates nothing. The key's entry is never evicted while the place
// lasts. A caller that waits for a later place of a key while holding an
// earlier one waits for itself: wait for them from different goroutines.
func (s *Keyed[K]) Join(key K, opts ...semaphore.AcquireOption) (semaphore.Place, error) {
	if len(opts) == 0 {
		return s.joinAt(key, 1, nil)
	}
	n, t, err := s.callOf(opts)
	if err != nil {
		s.rejected.Add(1)
		return semaphore.Place{}, err
	}
	return s.joinAt(key, n, &t)
}

// joinAt is Join: t (nil: the zero Turn) places the waiter.
func (s *Keyed[K]) joinAt(key K, n int64, t *call.Turn) (semaphore.Place, error) {
	if s.barging {
		s.rejected.Add(1)
		return semaphore.Place{}, errBargingJoin
	}
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		return semaphore.Place{}, s.refuse(n)
	}
	// A context that never ends: Join waits for nothing but, with the
	// hard cap, a running eviction pass.
	ctx := context.Background()
	e, took, err := s.lookup(ctx, key, s.takeAtLookup(n, t), false)
	if err != nil {
		s.rejected.Add(1) // ErrTooManyKeys or errTooManyRefs: ctx never ends
		return semaphore.Place{}, err
	}
	var w *waitq.Waiter
	var p semaphore.Permit
	if took && !s.holds(t) {
		p = s.grant(e, n)
	} else {
		// p when the permits came free meanwhile (w nil)
		if w, p, err = s.enqueue(ctx, e, n, t); err != nil {
			return semaphore.Place{}, err // enqueue dropped the reference and counted
		}
	}
	return placeOf(waitq.NewSpot((*placer[K])(s), e, w, permit.Permit(p))), nil
}

// WaitPlace is semaphore.Place.Wait for a place of s, on entry owner (see
// waitq.Placer).
func (pl *placer[K]) WaitPlace(ctx context.Context, owner any, w *waitq.Waiter, granted permit.Permit) (permit.Permit, error) {
	s, e := (*Keyed[K])(pl), owner.(*entry[K])
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
			s.untoken(permit.TokenOf(granted))
			s.release(e, granted.Weight())
			return permit.Permit{}, err
		}
		return granted, nil
	}
	// The engine's wait for a waiter pushed already: a grant there to see
	// when the context has ended too is handed back (see waitq.Await).
	p, err := s.await(ctx, e, w)
	return permit.Permit(p), err
}

// LeavePlace is semaphore.Place.Leave for a place of s, on entry owner
// (see waitq.Placer).
func (pl *placer[K]) LeavePlace(owner any, w *waitq.Waiter, granted permit.Permit) {
	s, e := (*Keyed[K])(pl), owner.(*entry[K])
	if waitq.GiveUp(&e.q, line[K]{s, e}, &s.wcache, w, granted) {
		s.release(e, 0) // the place's reference
	}
}
