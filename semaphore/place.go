package semaphore

import (
	"context"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// Place is a place in line, taken by [Weighted.Join]. It is used once, by
// the first [Place.Wait] or [Place.Leave] through any copy; one never used
// leaks its permits. It counts as a waiter. The zero Place is used.
type Place struct {
	s   *Weighted
	r   *waitq.Spot
	gen uint64
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
	var t call.Turn
	if len(opts) != 0 {
		var err error
		if t, err = s.turnOf(opts); err != nil {
			s.reject()
			return Place{}, err
		}
	}
	if n <= 0 {
		s.reject()
		return Place{}, ErrInvalidWeight
	}
	if st := s.state.Load(); timedOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return s.placed(nil, s.stamp(p)), nil
		}
	}
	w, granted, err := s.admit(nil, n, &t)
	if w == nil {
		if err != nil {
			return Place{}, err
		}
		return s.placed(nil, granted), nil
	}
	return s.placed(w, Permit{}), nil
}

// placed returns a Place on a pooled spot holding w or p.
func (s *Weighted) placed(w *waitq.Waiter, p Permit) Place {
	r, gen := waitq.NewSpot(nil, w, permit.Permit(p))
	return Place{s: s, r: r, gen: gen}
}

// take makes the caller the one user of the place and returns what it
// holds, or reports that the place was used already.
func (p Place) take() (*waitq.Waiter, Permit, bool) {
	_, w, granted, ok := waitq.Take(p.r, p.gen)
	return w, Permit(granted), ok
}

// Wait waits for the place's permits as Acquire does, WithMaxWait counting
// from here, and gives the place up on failure. Cancellation: see the
// package doc; an ended context also wins over a grant made before Wait.
func (p Place) Wait(ctx context.Context) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	w, granted, ok := p.take()
	if !ok {
		return Permit{}, ErrPlaceUsed
	}
	s := p.s
	if w == nil {
		// Granted at Join: an ended context wins, as in Acquire.
		if ctxEnded(ctx) {
			s.handBackJoined(granted)
			return Permit{}, ctx.Err()
		}
		return granted, nil
	}
	var mw *waitq.MaxWait
	if s.maxWait > 0 {
		mw = &waitq.MaxWait{D: s.maxWait, Clock: s.clock, Err: ErrWaitTooLong}
	}
	since := w.Since // the waiter goes back to its cache in Wait
	perm, err := waitq.Wait(ctx, &s.q, (*owner)(s), &s.wcache, w, mw)
	s.waited(since, err)
	return Permit(perm), err
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
	if w, granted, ok := p.take(); ok {
		s := p.s
		waitq.GiveUp(&s.q, (*owner)(s), &s.wcache, w, permit.Permit(granted))
	}
}
