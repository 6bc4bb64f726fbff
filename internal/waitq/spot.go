package waitq

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// Spot is the record behind a place in line (semaphore.Place,
// keyedsem.Place), pooled. A place carries the spot and the generation it
// was made at; whoever moves the generation on from that one (Take) owns
// the place, takes its contents and puts the spot back at once, so that
// every other copy of that place, whose generation is now behind, finds it
// used, also once the spot serves a later place. Generations are 64-bit
// and never wrap.
type Spot struct {
	gen   atomic.Uint64
	owner any           // what the place holds a reference on (a keyed entry); nil for a semaphore
	w     *Waiter       // the waiter in the queue; nil when granted at once
	p     permit.Permit // the permit, when granted at once
}

var spots = sync.Pool{New: func() any { return new(Spot) }}

// NewSpot returns a pooled spot holding owner and either w, a waiter
// pushed, or p, the permit granted at once, with its generation.
func NewSpot(owner any, w *Waiter, p permit.Permit) (*Spot, uint64) {
	r := spots.Get().(*Spot)
	r.owner, r.w, r.p = owner, w, p
	return r, r.gen.Load()
}

// Take makes the caller the one user of the place (r, gen) and returns
// what its spot holds; ok is false if the place was used already, or r is
// nil (the zero place).
func Take(r *Spot, gen uint64) (owner any, w *Waiter, p permit.Permit, ok bool) {
	if r == nil || !r.gen.CompareAndSwap(gen, gen+1) {
		return nil, nil, permit.Permit{}, false
	}
	owner, w, p = r.owner, r.w, r.p
	r.owner, r.w, r.p = nil, nil, permit.Permit{}
	spots.Put(r)
	return owner, w, p, true
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
