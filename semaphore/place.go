package semaphore

import (
	"context"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// Place is a place in line, taken by [Weighted.Join] or keyedsem's Join.
// It is used once, by the first [Place.Wait] or [Place.Leave] through any
// copy; one never used leaks its permits. It counts as a waiter, and a
// keyed place keeps its key's entry from eviction. The zero Place is used.
type Place struct{ spot waitq.Spot }

// Package keyedsem makes its places through waitq.PlaceOf: a Place's
// field is out of its reach, and a conversion would need the type to be
// waitq.Spot itself, which go doc would then show.
func init() {
	waitq.PlaceOf = func(sp waitq.Spot) Place { return Place{sp} }
	call.FairShare = func(s *Weighted) bool { return s.fair != nil }
}

// Join takes a place in line for n permits where Acquire would wait,
// without waiting; places are served in that order, whatever order their
// Waits come in. It fails with the errors Acquire gives without waiting,
// and always under [WithBarging]. It allocates nothing.
func (s *Weighted) Join(n int64, opts ...AcquireOption) (Place, error) {
	if s.barge != nil {
		s.reject()
		return Place{}, errBargingJoin
	}
	var c call.Call
	if len(opts) != 0 {
		if err := s.turnOf(opts, &c); err != nil {
			s.reject()
			return Place{}, err
		}
	}
	t := &c.Turn
	if n <= 0 {
		s.reject()
		return Place{}, ErrInvalidWeight
	}
	if st := s.state.Load(); timedOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return s.placed(nil, s.stamp(p)), nil
		}
	}
	w, granted, err := s.admit(context.Background(), n, t) // Join waits for nothing
	if w == nil {
		if err != nil {
			return Place{}, err
		}
		return s.placed(nil, granted), nil
	}
	return s.placed(w, Permit{}), nil
}

// placed returns a Place holding w, a waiter pushed, or p, the permits
// granted at once.
func (s *Weighted) placed(w *waitq.Waiter, p Permit) Place {
	return Place{waitq.NewSpot((*owner)(s), nil, w, permit.Permit(p))}
}

// Wait waits for the place's permits as Acquire does, WithMaxWait counting
// from here, and gives the place up on failure. Cancellation: see the
// package doc; an ended context also wins over a grant made before Wait.
func (p Place) Wait(ctx context.Context) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	pl, owner, w, granted, ok := p.spot.Take()
	if !ok {
		return Permit{}, ErrPlaceUsed
	}
	perm, err := pl.WaitPlace(ctx, owner, w, granted)
	return Permit(perm), err
}

// WaitPlace is Place.Wait for a place of s (see waitq.Placer).
func (o *owner) WaitPlace(ctx context.Context, _ any, w *waitq.Waiter, granted permit.Permit) (permit.Permit, error) {
	s := (*Weighted)(o)
	if w == nil {
		// Granted at Join: an ended context wins, as in Acquire.
		if ctxEnded(ctx) {
			s.handBackJoined(Permit(granted))
			return permit.Permit{}, ctx.Err()
		}
		return granted, nil
	}
	since, timed := w.Since, w.Timed // the waiter goes back to its cache in Wait
	perm, err := waitq.Wait(ctx, &s.q, o, &s.wcache, w, s.mw)
	s.waited(since, timed, err)
	return perm, err
}

// handBackJoined gives back the permits of a place granted at Join whose
// Wait found its context ended: a hand-back, counted only in Cancelled, as
// the engine's hand-back of a grant that came too late is (a Release would
// count the grant in Acquired and Released, and its hold). The waiters
// behind are served. A semaphore that keeps places does not barge (Join
// refuses WithBarging).
func (s *Weighted) handBackJoined(p Permit) {
	var wake waitq.Chain
	s.mu.Lock()
	s.cancelled++
	s.untake(permit.TokenOf(permit.Permit(p)), p.Weight())
	s.grantLocked(&wake)
	s.mu.Unlock()
	wake.Wake()
}

// Leave gives the place up, and any permits it has back, without waiting;
// it does nothing for a used place (so defer it). To end a Wait in
// progress, end its context.
func (p Place) Leave() {
	if pl, owner, w, granted, ok := p.spot.Take(); ok {
		pl.LeavePlace(owner, w, granted)
	}
}

// LeavePlace is Place.Leave for a place of s (see waitq.Placer).
func (o *owner) LeavePlace(_ any, w *waitq.Waiter, granted permit.Permit) {
	waitq.GiveUp(&o.q, o, &o.wcache, w, granted)
}
