package lanequeue

import (
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// inlineLanes is how many lanes a ticket holds without a list of its own:
// enough for every flow of the package docs (a keyed lane, a global
// lane, a reservation lane, a rate lane). A ticket for more lanes
// allocates its list separately.
const inlineLanes = 4

// Ticket is the permits of one successful AcquireAll, one per lane,
// released once by Release or Finish. A released, zero or nil Ticket holds
// nothing; [Queue.Holders] lists what the tickets out hold.
type Ticket[K comparable] struct {
	r *record[K]
}

// record is the reusable part of a ticket: its key, lanes and permits. A
// record belongs for good to one stripe of one queue (its home), and is on
// the home's list of records, which Holders walks, for as long as the
// home keeps it. Released, it goes on the home's free list for the next
// grant, or, if the home keeps maxFree free records already, off the list
// to the garbage collector. Taking a free record and giving it back thus
// moves one pointer each way, and links nothing.
//
// owner is the record's side of the handle: the ticket that holds the
// record, or nil while it is free. Release sets it from the ticket to nil
// under the home's lock, so that exactly one Release wins and every other
// handle (a stale ticket of an earlier grant, a zero Ticket) finds another
// owner. Handles are never reused (see handleBlockBytes), and a stale
// handle cannot be freed and reallocated while someone can still call its
// Release, so no later grant can have a stale handle's address.
type record[K comparable] struct {
	home *holderStripe[K] // immutable

	// Guarded by home.mu. publish writes them; Release takes the permits
	// out; Holders and the ticket's accessors read them after checking
	// owner.
	owner    *Ticket[K]
	nextFree *record[K] // the free list, while owner is nil
	key      K
	// since is when every permit was held: nanoseconds since the queue's
	// epoch on its coarse clock (see coarse.Clock).
	since int64
	g     grant[K]
	// A call still acquiring, listed by Waiters (see waitFor): pending,
	// waiting for lane at of g since atSince, the seq-th arrival at a
	// lane. The lanes before at are held, or, if cool (the call waits out
	// lane at's cooldown), every lane before the rate lanes; owner is nil.
	pending bool
	cool    bool
	at      int
	seq     uint64
	atSince int64
	// The home's list of records, guarded by home.mu.
	prev, next *record[K]

	q *Queue[K] // immutable
}

// grant is the lanes of one request in canonical order, the weight to take
// on each and the permits taken so far. AcquireAll and TryAcquireAll build
// it on their stack, so that a call that fails allocates nothing; publish
// copies it into a record once every permit is held.
type grant[K comparable] struct {
	weight int64 // the weight of semaphore.Weight
	// n is the number of lanes in inline (0 when they are in more): at
	// most inlineLanes, so a byte holds it.
	n uint8
	// plain is the number of lanes before the first rate lane. A call may
	// name any number of lanes, so it is an int: as a uint8 it wrapped at
	// 256 and the lanes past it were taken as rate lanes (their permits
	// dropped, never released).
	plain  int
	more   []held[K] // the lanes, when there are over inlineLanes
	inline [inlineLanes]held[K]
	rec    *record[K] // the record of a call that waited (see waitFor); nil until then
}

// foreign reports whether a lane of g.held()[from:], the rate lanes, is
// of another package: code of the program, which may panic.
func (g *grant[K]) foreign(from int) bool {
	hs := g.held()
	for i := from; i < len(hs); i++ {
		if hs[i].e.rate == nil {
			return true
		}
	}
	return false
}

// held returns the grant's lanes.
func (g *grant[K]) held() []held[K] {
	if g.more != nil {
		return g.more
	}
	return g.inline[:g.n]
}

// held is one lane of a ticket: the lane, the weight taken there, and the
// permit (the zero Permit for a rate lane).
type held[K comparable] struct {
	e *laneEntry[K]
	n int64
	p semaphore.Permit
}

// Release gives back every permit, newest first, and returns true the first
// time only; a hook that panics in it does not keep the permits.
func (t *Ticket[K]) Release() bool { return t.release(false, nil) }

// release is Release, and with report Finish: it also tells the observers
// of the ticket's lanes err and the time held, before any permit goes back.
func (t *Ticket[K]) release(report bool, err error) bool {
	if t == nil {
		return false
	}
	r := t.r
	if r == nil {
		return false
	}
	st := r.home
	st.mu.Lock()
	if r.owner != t {
		st.mu.Unlock()
		return false
	}
	// Take the permits out and free r for the next ticket; the permits go
	// back outside the stripe's lock, since a release may wake a waiter.
	// ps is a local, so that filling it costs no write barrier while the
	// GC runs; a ticket of over inlineLanes lanes hands its list over.
	// From here on Holders no longer lists the ticket.
	var ps [inlineLanes]semaphore.Permit
	n := r.g.n
	for i := range n {
		ps[i] = r.g.inline[i].p
	}
	more := r.g.more
	var obsBuf [inlineLanes]Observer
	obs, since := obsBuf[:0], r.since
	if report {
		obs = r.g.observers(obs)
	}
	q := r.q               // immutable: once retired, r may serve another ticket
	var long *heldLanes[K] // a hold for Hooks.OnLongHold, reported after unlocking
	if h := q.watch.hooks.Load(); h != nil {
		long = q.longHold(h, r)
	}
	shown := q.endTicket(st, r.g.held())
	st.retire(r)
	st.mu.Unlock()
	if long != nil || len(obs) > 0 {
		releaseReporting(q, long, obs, err, since, ps[:n], more, shown)
		return true
	}
	releasePermits(q, ps[:n], more, shown)
	return true
}

// releaseReporting tells the hooks of a long hold (long, if not nil) and
// the observers obs of the ticket's end, then gives its permits back as
// releasePermits does. The release is deferred: a hook or an observer that
// panics must not keep the permits, nor the call that Drain waits for; the
// panic goes on once they are back. It is a function of its own so that a
// release with no hook and no observer, the common one, runs no defer.
func releaseReporting[K comparable](q *Queue[K], long *heldLanes[K], obs []Observer, err error, since int64, ps []semaphore.Permit, more []held[K], shown bool) {
	defer releasePermits(q, ps, more, shown)
	if long != nil {
		q.report(long)
	}
	if len(obs) > 0 {
		held := time.Duration(q.stamp() - since)
		for _, o := range obs {
			o.Observe(err, held)
		}
	}
}

// releasePermits gives back the permits of a ticket, newest first, then
// tells Drain: the ticket's call ended under the stripe's lock if shown
// (endTicket), and ends now otherwise.
func releasePermits[K comparable](q *Queue[K], ps []semaphore.Permit, more []held[K], shown bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].Release()
	}
	for i := len(more) - 1; i >= 0; i-- {
		more[i].p.Release()
	}
	if shown {
		q.ticketGone()
	} else {
		q.leave()
	}
}

// lock locks the stripe of t's record and returns the record if t still
// holds it; otherwise it returns nil with nothing locked. The caller
// unlocks r.home.mu.
func (t *Ticket[K]) lock() *record[K] {
	if t == nil {
		return nil
	}
	r := t.r
	if r == nil {
		return nil
	}
	r.home.mu.Lock()
	if r.owner != t {
		r.home.mu.Unlock()
		return nil
	}
	return r
}
