package keyedsem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// ErrPlaceUsed is returned by [Place.Wait] for a place already waited for
// or given up (through any copy of it), and for the zero Place. It is
// [semaphore.ErrPlaceUsed].
var ErrPlaceUsed = semaphore.ErrPlaceUsed

// Place is a caller's place in a key's line, taken by [Keyed.Join]: the
// permits were taken at once, or a waiter stands in the key's queue, as a
// waiting Acquire's would, and keeps its turn there until [Place.Wait]
// waits for the permit or [Place.Leave] gives the place up. It lets a
// caller take its turn now and wait later: a webhook that joins the line
// for a thread and answers at once, its worker waiting for the turn.
//
// Ownership: a Place is used once. Whoever holds it owns the turn until
// the first Wait or Leave (through any copy: a Place is a small value and
// may be copied and handed to another goroutine, which then owns it);
// every later Wait returns [ErrPlaceUsed] and no permit, and every later
// Leave does nothing, so the permit has exactly one owner. A Place that is
// neither waited for nor left is a leak, as a permit never released is:
// once its turn comes it holds the key's permits, and every later caller
// of the key waits for them for good. Call Leave on every path that does
// not Wait (a deferred Leave after a Wait is harmless).
//
// While a place exists its key's entry is referenced, so it is never
// evicted (by the idle timeout, the cap, or Sweep); the reference goes
// when the place ends: with the permit's Release after a Wait, or with
// the Wait's failure, or with Leave.
//
// Places of a key are served in the order they were joined (by the key's
// order: a place joined with a higher priority or lower sequence may go
// ahead of earlier ones), so a caller
// that waits for a later place of a key while it holds an earlier one (or
// its permit) waits for itself: wait for them from different goroutines,
// as a webhook's workers do.
//
// A place standing in line counts in [Stats].Waiters, as a waiting
// Acquire does. The zero Place is used: its Wait returns ErrPlaceUsed and
// its Leave does nothing. Methods are safe for concurrent use.
type Place[K comparable] struct {
	s   *Keyed[K]
	r   *place
	gen uint64
}

// place is the record behind a Place, pooled: whoever moves its generation
// on from the one its Place carries owns the place, takes its fields and
// puts it back at once, so that every other copy of that Place (whose
// generation is now behind) finds it used, also once the record serves a
// later Join. Generations are 64-bit and never wrap.
type place struct {
	gen atomic.Uint64
	e   any           // the *entry[K] the place holds a reference on
	w   *waitq.Waiter // the waiter in the entry's queue; nil when granted at Join
	p   Permit        // the permit, when granted at Join
}

var places = sync.Pool{New: func() any { return new(place) }}

// errLeft is the ending of a waiter whose place was given up (Leave), for
// the engine; no caller sees it.
var errLeft = errors.New("keyedsem: place left")

// Join takes a place for key in the line of callers of key, at once, for
// the permits Acquire with opts would take, and returns it without
// waiting: the permits are taken now if they are free and nobody waits
// for key (the place is then granted already), and otherwise a waiter
// joins the key's queue exactly as a waiting Acquire's would, at the place
// opts give it (a priority ages from Join's call). [Place.Wait] waits for
// the permits later, or [Place.Leave] gives the place up. Places of one
// key are served in the order Join took them, whatever order their Waits
// are called in, or by the key's order ([WithPriorities],
// [WithSequenceOrder]): a webhook that joins each message's place with its
// [semaphore.Sequence] has a thread's messages served in order while they
// wait.
//
// Join fails, taking nothing, with the errors Acquire returns at once
// (an option refused counts in Rejected):
// [ErrInvalidWeight], [ErrTooHeavy], [ErrClosed], [ErrNaNKey],
// [ErrQueueFull] (the key's waiters, places included, are at
// WithMaxWaitersPerKey) and [ErrTooManyKeys]. It never waits for permits;
// a new key that WithHardMaxKeys finds no room for waits for a running
// eviction pass first, as Acquire does.
// A keyed semaphore made [WithBarging] keeps no places: its Join fails
// with an error wrapping [ErrInvalidConfig] (see
// WithBarging).
//
// On success the caller owns the place (see [Place] for what that
// obliges). Join costs what Acquire costs up to its wait, and no
// allocation: the place's record is pooled.
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
	e, took, err := s.lookup(ctx, key, n, false)
	if err != nil {
		s.rejected.Add(1) // ErrTooManyKeys or errTooManyRefs: ctx never ends
		return Place[K]{}, err
	}
	r := places.Get().(*place)
	if took {
		r.p = s.grant(e, n)
	} else {
		w, p, err := s.enqueue(ctx, e, n, t)
		if err != nil { // enqueue dropped the reference and counted
			places.Put(r)
			return Place[K]{}, err
		}
		r.w, r.p = w, p // p when the permits came free meanwhile (w nil)
	}
	r.e = e
	return Place[K]{s: s, r: r, gen: r.gen.Load()}, nil
}

// take makes the caller the one user of the place and returns what it
// holds, or reports that the place was used already.
func (p Place[K]) take() (e *entry[K], w *waitq.Waiter, granted Permit, ok bool) {
	r := p.r
	if r == nil || !r.gen.CompareAndSwap(p.gen, p.gen+1) {
		return nil, nil, Permit{}, false
	}
	e, w, granted = r.e.(*entry[K]), r.w, r.p
	r.e, r.w, r.p = nil, nil, Permit{}
	places.Put(r)
	return e, w, granted, true
}

// Wait waits for the place's permits and returns them: at once if the
// place was granted at Join or since, else when the key's earlier callers
// have released. The caller then owns the Permit and must release it
// once, as after Acquire.
//
// On failure it returns the zero Permit and an error, and the place is
// given up (the line moves on, as after Leave): ctx.Err() if ctx ends
// first; [ErrClosed] if Close failed the place while it stood in line
// (also if ctx ended meanwhile; a place granted before Close keeps its
// permits, which Wait returns); [ErrPlaceUsed] if the place was waited for
// or left already.
//
// Cancellation: as for Acquire. A context that has ended when Wait is
// called, or that ended before the release that granted the place (the
// grant may have come before Wait was called), wins over the grant: the
// permits go back to the callers behind, as if the place had left
// before it, and Wait returns ctx.Err(); the grant counts only in
// [Stats].Cancelled (a hand-back), not in Acquired or Released. A
// context that ends while Wait waits takes the place out of the line at
// once, and the callers behind move up. The caller owns a permit if and
// only if the error is nil.
//
// Wait panics if ctx is nil.
func (p Place[K]) Wait(ctx context.Context) (Permit, error) {
	if ctx == nil {
		panic("keyedsem: nil Context")
	}
	e, w, granted, ok := p.take()
	if !ok {
		return Permit{}, ErrPlaceUsed
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
			return Permit{}, err
		}
		return granted, nil
	}
	// The engine's wait for a waiter pushed already: a grant there to see
	// when the context has ended too is handed back (see waitq.Await).
	return s.await(ctx, e, w)
}

// Leave gives the place up: a place still in line leaves it (the callers
// behind move up, as when a waiter's context ends), and one granted at
// Join or since gives its permits back, so that the next ones in line are
// served. It does nothing for a place already waited for or left (so a
// deferred Leave after a successful Wait keeps the permit, which the
// caller releases), nor for the zero Place; it never waits for permits.
// A place given up counts in [Stats].Cancelled, as a cancelled wait does,
// except one granted at Join, whose permits count as acquired and
// released.
//
// Leave does not end a Wait in progress (that Wait owns the place): end
// its context instead.
func (p Place[K]) Leave() {
	e, w, granted, ok := p.take()
	if !ok {
		return
	}
	if w == nil {
		granted.Release()
		return
	}
	s := p.s
	// As a wait whose context ended without being woken: the engine takes
	// w out of the queue, or, if it was served meanwhile, receives its
	// wake-up and gives the grant back (a failure by Close is only
	// received); the callers behind are served either way.
	_ = waitq.End(&e.q, line[K]{s, e}, &s.wcache, w, waitq.Ended{Err: errLeft, How: waitq.Cancelled})
	s.release(e, 0)
}
