package waitq

import (
	"math/bits"

	"github.com/sessionlane/lanes/internal/permit"
)

// This file is the order of service: where a waiter joins the queue (Push
// at the tail, or PushOrdered by its Place) and whom Grant serves (the
// head, while it fits).

// Queue is a list of waiters, oldest first. It is one pointer, so that a
// keyed semaphore's entry carries no more; owners that need counts keep
// them beside it (see Owner.Dequeued). It is guarded by its owner's lock.
// The zero Queue is empty.
type Queue struct {
	head *Waiter // head.prev is the newest, whose next is nil
}

// Empty reports whether nobody waits. Owners ask it before they take
// permits ahead of the queue.
func (q *Queue) Empty() bool { return q.head == nil }

// Push puts w, a waiter from Cache.Get with its N set, into the queue: at
// the tail. The owner has counted it.
func (q *Queue) Push(w *Waiter) {
	w.next = nil
	if q.head == nil {
		w.prev = w
		q.head = w
		return
	}
	tail := q.head.prev
	w.prev = tail
	tail.next = w
	q.head.prev = w
}

// Place is a waiter's place in an ordered queue: the one order of service
// of every lane, which composes three levels. A waiter goes ahead of an
// earlier one when its band (priority) is higher than the earlier one's
// band aged by the steps that one has waited; within one band, when its
// rank is lower (a fair-share start tag, a sequence number, or 0 for
// arrival order). FIFO is every place zero.
type Place struct {
	Band    int32 // the priority: higher first
	Arrival int64 // when it came, in nanoseconds on the owner's aging clock
	Rank    int64 // within its band: lower first, equal ranks in arrival order
}

// Ahead reports whether a newcomer at place p goes ahead of w, a waiter
// already queued, on a queue whose aging step is step nanoseconds (0: the
// owner has no priorities, and all bands are 0).
//
// Across bands the rule is aging: w's band rises by one for each whole
// step it has waited when p arrives, and p goes ahead only of a waiter
// whose aged band is still below p's. For whole bands, d > floor(t/step)
// is d > t/step, so this is the order of the keys arrival - band*step:
// a waiter of band b is overtaken only by a band c > b that arrives less
// than (c-b)*step after it, which bounds its wait. Within a band the rank
// decides, and aging does not enter: two waiters of one band age alike.
// The decision is made once, as p joins; the queue is never sorted again.
//
// d > t/step is decided as d*step > t, in 128 bits (the product of a band
// difference and a step can pass 2^63): PushOrdered makes this comparison
// for each waiter it walks past, under the owner's lock, where the
// division's latency was most of Ahead's cost (BenchmarkAblationAhead,
// docs/internals.md).
func Ahead(p *Place, w *Waiter, step int64) bool {
	if p.Band == w.Band {
		return p.Rank < w.Rank
	}
	d := int64(p.Band) - int64(w.Band)
	if d <= 0 {
		return false
	}
	if step <= 0 {
		return true
	}
	hi, lo := bits.Mul64(uint64(d), uint64(step))
	return hi != 0 || lo > uint64(max(p.Arrival-w.Arrival, 0))
}

// PushOrdered puts w, a waiter from Cache.Get with its N and Place set,
// into the queue: ahead of the waiters it goes ahead of (Ahead), searched
// from the newest, and behind the first one it does not. So a newcomer
// never passes a waiter that it does not go ahead of, which is what bounds
// every wait; one that goes ahead of nobody (arrival order, the common
// case) costs what Push does, and one that passes k waiters costs k
// steps, under the lock. An owner must not mix Push and PushOrdered on one
// queue, except through Rejoin.
func (q *Queue) PushOrdered(w *Waiter, step int64) {
	if q.head == nil || !Ahead(&w.Place, q.head.prev, step) {
		q.Push(w)
		return
	}
	at := q.head.prev // w goes ahead of at
	for at != q.head && Ahead(&w.Place, at.prev, step) {
		at = at.prev
	}
	if at == q.head {
		// The new head: the newest stays behind it.
		w.next, w.prev = at, at.prev
		at.prev = w
		q.head = w
		return
	}
	w.prev, w.next = at.prev, at
	at.prev.next = w
	at.prev = w
}

// Next returns the waiter behind w in its queue, nil if w is the newest,
// for an owner that looks along its queue under its lock.
func (w *Waiter) Next() *Waiter { return w.next }

// Head returns the waiter to serve next, nil if nobody waits, for an
// owner that looks at it under its lock (who may pass it, whether it is
// held). Only Grant serves it.
func (q *Queue) Head() *Waiter { return q.head }

// serve takes w, the waiter Head returned, off the queue as granted
// through t, and adds it to c for waking.
func (q *Queue) serve(w *Waiter, t *permit.Token, c *Chain) {
	unlink(q, w)
	w.tok, w.gen, w.served = t, t.Gen(), true
	c.add(w)
}

// Grant serves the waiters at the head of q, in order, for as long as
// Claim finds their permits (the one grant loop of every owner and
// policy: the owners' Claim and counts are indirect calls, which an
// ablation found within noise of a loop written out per owner, see
// docs/internals.md), and adds them to c for waking; then, if the
// queue is empty, it tells the owner. It must be called with the owner's
// lock held, after anything that may let a waiter in: permits given back, a
// larger capacity, the head leaving.
func Grant[O Owner](q *Queue, o O, c *Chain) {
	for w := q.Head(); w != nil; w = q.Head() {
		t, ok := o.Claim(w.N)
		if !ok {
			break
		}
		q.serve(w, t, c)
		o.Dequeued(w.N)
	}
	if q.head == nil {
		o.Emptied()
	}
}

// Len returns the number of waiters, counting no further than limit.
func (q *Queue) Len(limit int) int {
	if q.head == nil {
		return 0
	}
	n := 1
	for w := q.head.next; w != nil && n < limit; w = w.next {
		n++
	}
	return n
}

// remove takes w out of q and tells the owner.
func remove[O Owner](q *Queue, o O, w *Waiter) {
	unlink(q, w)
	o.Dequeued(w.N)
}

// unlink takes w out of q. Serving the head touches only the waiter
// behind it, not the newest (written last by another caller): the list is
// circular through prev only. Under a contended owner this runs in the
// lock on every hand-off; docs/internals.md has the ablation against a
// list circular both ways.
func unlink(q *Queue, w *Waiter) {
	switch next := w.next; {
	case q.head == w:
		q.head = next
		if next != nil {
			next.prev = w.prev
		}
	case next == nil: // the newest, behind the head
		w.prev.next = nil
		q.head.prev = w.prev
	default:
		w.prev.next = next
		next.prev = w.prev
	}
	w.next, w.prev = nil, nil
}
