package waitq

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// spot is the record behind a place in line (a Spot), pooled. A place
// carries the record and the generation it was made at; whoever moves the
// generation on from that one (Take) owns the place, takes its contents
// and puts the record back at once, so that
// every other copy of that place, whose generation is now behind, finds it
// used, also once the record serves a later place. Generations are 64-bit
// and never wrap.
type spot struct {
	gen    atomic.Uint64
	placer Placer        // the semaphore the place is in
	owner  any           // what the place holds a reference on (a keyed entry); nil for a semaphore
	w      *Waiter       // the waiter in the queue; nil when granted at once
	p      permit.Permit // the permit, when granted at once
}

var spots = sync.Pool{New: func() any { return new(spot) }}

// Placer is a semaphore that keeps places (semaphore.Weighted, a
// keyedsem.Keyed): what a place's Wait and Leave call, with what its spot
// held. An indirect call, once per place: the wait it starts costs more.
type Placer interface {
	// WaitPlace waits for the place's permits: granted, if they were
	// granted at Join (w nil), else w's.
	WaitPlace(ctx context.Context, owner any, w *Waiter, granted permit.Permit) (permit.Permit, error)
	// LeavePlace gives the place up (see GiveUp).
	LeavePlace(owner any, w *Waiter, granted permit.Permit)
}

// PlaceOf is set by package semaphore to its func(Spot) semaphore.Place,
// which makes the Place of a Spot; package keyedsem, whose Join returns a
// semaphore.Place, asserts it to that type once. It is an any because
// this package may not import semaphore.
var PlaceOf any

// Spot is a place in line, of any semaphore that keeps them
// (semaphore.Place is one): its record and the generation it was made at.
// The zero Spot is used.
type Spot struct {
	r   *spot
	gen uint64
}

// NewSpot returns a place on a pooled record holding pl, owner and either
// w, a waiter pushed, or p, the permit granted at once.
func NewSpot(pl Placer, owner any, w *Waiter, p permit.Permit) Spot {
	r := spots.Get().(*spot)
	r.placer, r.owner, r.w, r.p = pl, owner, w, p
	return Spot{r, r.gen.Load()}
}

// Take makes the caller the one user of the place and returns what its
// record holds; ok is false if the place was used already, or is the zero
// Spot.
func (pc Spot) Take() (pl Placer, owner any, w *Waiter, p permit.Permit, ok bool) {
	r := pc.r
	if r == nil || !r.gen.CompareAndSwap(pc.gen, pc.gen+1) {
		return nil, nil, nil, permit.Permit{}, false
	}
	pl, owner, w, p = r.placer, r.owner, r.w, r.p
	r.placer, r.owner, r.w, r.p = nil, nil, nil, permit.Permit{}
	spots.Put(r)
	return pl, owner, w, p, true
}

// errLeft is the ending of a waiter whose place was given up (GiveUp); no
// caller sees it.
var errLeft = errors.New("lanes: place left")

// GiveUp gives up a place whose spot held w, a waiter in q, or granted, a
// permit given at once: the permit is released, or the waiter leaves as a
// wait whose context ended (taken out of the queue, or, if it was served
// meanwhile, its wake-up received and a grant given back; a failure is
// only received), the ones behind served either way. It reports whether
// there was a waiter, so that an owner that counts references on it (a
// keyed entry) drops the place's.
func GiveUp[O Owner](q *Queue, o O, c *Cache, w *Waiter, granted permit.Permit) (waited bool) {
	if w == nil {
		granted.Release()
		return false
	}
	_ = End(q, o, c, w, Ended{Err: errLeft, How: Cancelled})
	return true
}
