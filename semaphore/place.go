package semaphore

import (
	"context"
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// Place is a caller's place in a semaphore's line, taken by
// [Weighted.Join]: the permits were taken at once, or a waiter stands in
// the queue, as a waiting Acquire's would, and keeps its turn there until
// [Place.Wait] waits for the permit or [Place.Leave] gives the place up.
//
// Ownership: a Place is used once. Whoever holds it owns the turn until
// the first Wait or Leave (through any copy: a Place is a small value and
// may be copied and handed to another goroutine, which then owns it);
// every later Wait returns [ErrPlaceUsed] and no permit, and every later
// Leave does nothing, so the permit has exactly one owner. A Place that is
// neither waited for nor left is a leak, as a permit never released is:
// once its turn comes it holds the permits, and the waiters behind it wait
// for them for good. Call Leave on every path that does not Wait (a
// deferred Leave after a successful Wait is harmless).
//
// A place standing in line counts in [Stats].Waiters and WaitingWeight,
// and in the bounds of WithMaxWaiters and WithMaxWaitingWeight. The zero
// Place is used: its Wait returns ErrPlaceUsed and its Leave does
// nothing. Methods are safe for concurrent use.
type Place struct {
	s   *Weighted
	r   *place
	gen uint64
}

// place is the record behind a Place, pooled: whoever moves its generation
// on from the one its Place carries owns the place, takes its fields and
// puts it back at once, so that every other copy of that Place finds it
// used, also once the record serves a later Join. Generations are 64-bit
// and never wrap.
type place struct {
	gen atomic.Uint64
	w   *waitq.Waiter // the waiter in the queue; nil when granted at Join
	p   Permit        // the permit, when granted at Join
}

var places = sync.Pool{New: func() any { return new(place) }}

// errLeft is the ending of a waiter whose place was given up (Leave), for
// the engine; no caller sees it.
var errLeft = errors.New("semaphore: place left")

// Join takes a place in the semaphore's line for n permits, at once, and
// returns it without waiting: the permits are taken now if they are
// available and nobody waits (the place is then granted already), and
// otherwise a waiter joins the queue exactly as a waiting Acquire's would,
// at the place Acquire would take. [Place.Wait] waits for the permits
// later, or [Place.Leave] gives the place up. On a FIFO semaphore places
// are served in the order Join took them, whatever order their Waits are
// called in; on one made [WithPriorities] or [WithFairShare], by that
// order, at the place opts give it (as for Acquire; its priority ages from
// Join's call). A place whose turn comes ahead of the head takes its
// permits at once if they are free, as such an Acquire would.
//
// Join fails, taking nothing, with the errors Acquire returns at once:
// [ErrInvalidWeight], [ErrTooHeavy], [ErrClosed] and [ErrQueueFull], and
// refuses opts as Acquire does. It never waits. A semaphore made
// [WithBarging] keeps no places: its Join fails with an error wrapping [ErrInvalidConfig] (see
// WithBarging). On success the caller owns the place (see [Place] for what
// that obliges). It allocates nothing: the place's record is pooled.
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
	// The place in line is computed before locking, as in acquireSlow.
	var key, unit int64
	if s.prio.step != 0 {
		key = s.turnKey(t.Priority)
	}
	if s.fair != nil {
		var err error
		if unit, err = s.fair.unit(t.Group); err != nil {
			s.reject()
			return Place{}, err
		}
	}
	s.mu.Lock()
	if s.closed {
		s.rejected++
		s.mu.Unlock()
		return Place{}, ErrClosed
	}
	if n > s.capacity.Load() {
		s.rejected++
		s.mu.Unlock()
		return Place{}, ErrTooHeavy
	}
	// As acquireSlow, without a context: Join waits for nothing.
	for {
		st := s.state.Load()
		if (s.q.Empty() || s.prio.step != 0 && key < s.q.Head().Key()) && avail(st) >= n {
			if tok, ok := s.claimLocked(st, n); ok {
				s.mu.Unlock()
				return s.placed(nil, Permit(permit.Make(tok, tok.Gen(), n))), nil
			}
			continue
		}
		if (s.maxWaiters > 0 && s.waiters >= s.maxWaiters) ||
			(s.maxWaitWt > 0 && uint64(n) > uint64(s.maxWaitWt)-s.waitWeight) {
			s.rejected++
			s.mu.Unlock()
			return Place{}, ErrQueueFull
		}
		// The slow flag before queueing, so that no fast-path release can
		// slip past the queue (see acquireSlow).
		if st&flagSlow != 0 || s.state.CompareAndSwap(st, st|flagSlow) {
			break
		}
	}
	w := s.wcache.Get()
	w.N = n
	if s.tm != nil {
		w.Since = s.hc.Precise()
	}
	s.waiters++
	var carry uint64
	s.waitWeight, carry = bits.Add64(s.waitWeight, uint64(n), 0)
	s.waitHi += carry
	// By the semaphore's order, as acquireSlow pushes: an ordered queue
	// must never see Push.
	switch {
	case s.fair != nil:
		s.pushFairUnlock(w, t.Group, unit) // may serve w at once: Wait then finds it granted
	case s.prio.step != 0:
		s.q.PushAt(w, key)
		s.mu.Unlock()
	default:
		s.q.Push(w)
		s.mu.Unlock()
	}
	return s.placed(w, Permit{}), nil
}

// placed returns a Place on a pooled record holding w or p.
func (s *Weighted) placed(w *waitq.Waiter, p Permit) Place {
	r := places.Get().(*place)
	r.w, r.p = w, p
	return Place{s: s, r: r, gen: r.gen.Load()}
}

// take makes the caller the one user of the place and returns what it
// holds, or reports that the place was used already.
func (p Place) take() (w *waitq.Waiter, granted Permit, ok bool) {
	r := p.r
	if r == nil || !r.gen.CompareAndSwap(p.gen, p.gen+1) {
		return nil, Permit{}, false
	}
	w, granted = r.w, r.p
	r.w, r.p = nil, Permit{}
	places.Put(r)
	return w, granted, true
}

// Wait waits for the place's permits and returns them: at once if the
// place was granted at Join or since, else when the waiters ahead have
// been served. The caller then owns the Permit and must release it once,
// as after Acquire.
//
// On failure it returns the zero Permit and an error, and the place is
// given up (the line moves on, as after Leave): ctx.Err() if ctx ends
// first; [ErrWaitTooLong] after waiting WithMaxWait from Wait's call;
// [ErrClosed] if Close failed the place while it stood in line, or
// [ErrTooHeavy] if SetCapacity shrank the capacity below its weight (also
// if ctx ended meanwhile; a place granted before keeps its permits, which
// Wait returns); [ErrPlaceUsed] if the place was waited for or left
// already.
//
// Cancellation: as for Acquire. A context that has ended when Wait is
// called, or that ended before the release that granted the place (the
// grant may have come before Wait was called), wins over the grant: the
// permits go back to the waiters behind, as if the place had left
// before it, and Wait returns ctx.Err(); the grant counts only in
// [Stats].Cancelled (a hand-back), not in Acquired or Released. A
// context that ends while Wait waits takes the place out of the line at
// once. The caller owns a permit if and only if the error is nil.
//
// Wait panics if ctx is nil.
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

// Leave gives the place up: a place still in line leaves it (the waiters
// behind move up, as when a waiter's context ends), and one granted at
// Join or since gives its permits back, so that the next ones in line are
// served. It does nothing for a place already waited for or left (a
// deferred Leave after a successful Wait keeps the permit), nor for the
// zero Place, and it never waits for permits. A place given up counts in
// [Stats].Cancelled, as a cancelled wait does, except one granted at
// Join, whose permits count as acquired and released.
//
// Leave does not end a Wait in progress (that Wait owns the place): end
// its context instead.
func (p Place) Leave() {
	w, granted, ok := p.take()
	if !ok {
		return
	}
	if w == nil {
		granted.Release()
		return
	}
	s := p.s
	_ = waitq.End(&s.q, (*owner)(s), &s.wcache, w, waitq.Ended{Err: errLeft, How: waitq.Cancelled})
}
