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
		w.prev, w.qlen = w, 1
		q.head = w
		return
	}
	tail := q.head.prev
	w.prev = tail
	tail.next = w
	q.head.prev = w
	q.head.qlen++
}

// Place is a waiter's place in an ordered queue: the one order of service
// of every lane, which composes three levels. A waiter goes ahead of an
// earlier one when its band (priority) is higher than the earlier one's
// band aged by the steps that one has waited; within one band, when its
// rank is lower (a fair-share start tag, a sequence number, or 0 for
// arrival order). FIFO is every place zero.
type Place struct {
	Band    int32 // the priority: higher first
	Arrival int64 // when it came, in nanoseconds on the owner's aging clock; never negative
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
// under the owner's lock, where the division's latency was most of
// Ahead's cost (BenchmarkAblationAhead, docs/internals.md).
func Ahead(p *Place, w *Waiter, step int64) bool {
	if p.Band == w.Band {
		return p.Rank < w.Rank
	}
	return above(p, w.Band, w.Arrival, step)
}

// above is Ahead across bands: whether p goes ahead of a waiter of band b,
// not p's, that arrived at t. For a band below p's it is false for every
// t up to some time and true after it (p.Arrival-t only falls as t grows,
// and neither wraps, arrivals being non-negative): so if p goes ahead of
// a waiter that arrived at t, it goes ahead of every waiter of band b
// that arrived at t or later.
func above(p *Place, b int32, t int64, step int64) bool {
	d := int64(p.Band) - int64(b)
	if d <= 0 {
		return false
	}
	if step <= 0 {
		return true
	}
	hi, lo := bits.Mul64(uint64(d), uint64(step))
	return hi != 0 || lo > uint64(max(p.Arrival-t, 0))
}

// PushOrdered puts w, a waiter from Cache.Get with its N and Place set,
// into the queue: ahead of the waiters it goes ahead of (Ahead), searched
// from the newest, and behind the first one it does not. So a newcomer
// never passes a waiter that it does not go ahead of, which is what bounds
// every wait. It must be called with the owner's lock held. An owner that
// orders its queue pushes with PushOrdered only (Push and Rejoin keep the
// runs below right, but they do not order).
//
// # Runs
//
// The search would compare w with each waiter it passes, and a newcomer of
// the top band passes every waiter of the bands below that has not aged
// past it: on BenchmarkComposed's priorities+fair row (32 callers, 4
// bands) a push passed 12 waiters on average, and up to 31, each compared
// under the lock. So the queue is cut into runs, stretches of consecutive
// waiters of one band, and the search passes a run at a time where it
// can. A run of more than one waiter is marked at its ends: its last (the
// newest) points at its first (runFirst) and holds a lower bound of its
// waiters' arrivals (runMin), its first points at its last (runLast);
// every other waiter has neither, and a waiter with neither at an end is
// a run of one. So Push and Rejoin, which link a waiter at an end with
// neither, keep the runs right, and a FIFO queue has none to keep up:
// serving looks at one field and finds it nil. Runs need not be the
// longest stretches of one band (two runs of one band may touch); only
// more steps come of it.
//
// Why the search stops where the walk of one waiter at a time stops (just
// behind the newest waiter w does not go ahead of; the head if none). It
// starts at the newest waiter, the last of its run, and at each run, from
// its last x back to its first f, knowing that w goes ahead of every
// waiter behind x, it either passes the whole run, which is right only if
// w goes ahead of each of its waiters, or walks it one at a time from x,
// as the old walk did:
//   - A run of a band above w's: w goes ahead of none of it. The walk
//     stops at once, at x.
//   - A run of w's band: the ranks decide, and a run need not be in rank
//     order (a waiter of a higher band can part a band, and leave, see the
//     package doc), nor in arrival order. It is walked.
//   - A run of a band below w's: w goes ahead of one of its waiters y when
//     (w.Band - y.Band)*step > w.Arrival - y.Arrival, the more easily the
//     later y arrived (above). The run's first waiter need not be its
//     oldest (ranks reorder a band: a fair-share newcomer may join ahead
//     of older waiters of its band; and arrivals are read before the
//     lock, so even equal ranks may join out of arrival order), so the run
//     keeps runMin, at most the least arrival in it: if w goes ahead of a
//     waiter that arrived at runMin, it goes ahead of every waiter of the
//     run, and the search passes it, to f's predecessor. Otherwise (some
//     may have aged past w) it walks the run, and may stop inside it.
//
// runMin stays a lower bound of the run's arrivals: a waiter joining the
// run lowers it to its arrival if earlier; a waiter leaving leaves it, and
// a run cut in two leaves it on both parts (the bound stays true, only
// looser); and a walk that passes a whole run has looked at every arrival
// in it, and sets it to the least of them. So a pass is always right, and
// the search stops at the waiter the old walk stops at
// (TestPushOrderedMatchesTheWalk compares the two on random histories). A
// bound loosened by its oldest waiter leaving (a run's first is served or
// gives up) costs one walk through the run, after which it is exact
// again: without that repair, on the row above, 0.4 pushes in 1 walked a
// whole lower run (3 waiters each) where a pass would have done.
//
// Without aging the queue is in band order, one run per band, and a
// newcomer takes one step per band it passes, then its walk within its
// own band; a band ordered by rank (fair share, sequences) is still
// walked within. On the row above a push now passes 1.6 runs, one step
// each, and compares 1.1-1.3 waiters of its own band and 0.2 of others,
// where the walk compared 13 (counted, see docs/internals.md).
func (q *Queue) PushOrdered(w *Waiter, step int64) {
	h := q.head
	if h == nil {
		q.Push(w)
		return
	}
	for x := h.prev; ; {
		// w goes ahead of every waiter behind x, the last of its run.
		f := x.runFirst
		if f == nil {
			f = x
		}
		if f == x || !above(&w.Place, x.Band, x.runMin, step) {
			least := x.Arrival
			for y := x; ; y = y.prev {
				if !Ahead(&w.Place, y, step) {
					q.link(w, y, f, x)
					return
				}
				least = min(least, y.Arrival)
				if y == f {
					break
				}
			}
			x.runMin = least // exact: every waiter of the run was looked at
		}
		if f == h {
			q.link(w, nil, nil, nil) // ahead of everyone: the new head
			return
		}
		x = f.prev
	}
}

// link puts w, with neither run field set, into q right behind a (nil: at
// the head), and into the runs: w joins a's run if of its band (f and l
// are that run's first and last), else the run behind it if of its band;
// else it is a run of its own, which cuts a's run in two if it lands
// inside it.
//
// But w does not become the new last of a run that begins at the head:
// it begins a run of its own behind it. Else a queue of one band (arrival
// order, or sequences) would be one run from the head to the newest, and
// every push would write the head (its runLast) and every serve the newest
// (its runFirst), each a line the other side of the hand-off writes: what
// unlinkBare keeps FIFO's serving from doing. So the head's run stops
// growing, serving writes only within it, and a higher-band newcomer
// passes a band in two steps instead of one.
func (q *Queue) link(w, a, f, l *Waiter) {
	var b *Waiter // behind w
	if a == nil {
		b = q.head
		w.next, w.prev, w.qlen = b, b.prev, b.qlen+1
		b.prev = w
		q.head = w
	} else {
		b = a.next
		w.prev, w.next = a, b
		a.next = w
		if b == nil {
			q.head.prev = w
		} else {
			b.prev = w
		}
		q.head.qlen++
	}
	switch {
	case a != nil && a.Band == w.Band && (a != l || f != q.head):
		if a != l { // inside the run: its ends stay
			l.runMin = min(l.runMin, w.Arrival)
			return
		}
		m := a.Arrival // a was a run of one
		if f != a {
			m = a.runMin
			a.runFirst = nil
		}
		w.runFirst, w.runMin = f, min(m, w.Arrival)
		f.runLast = w
	case b != nil && b.Band == w.Band:
		// b is the first of its run (a, of another band, is not in it):
		// w comes first.
		bl := b.runLast
		if bl == nil { // b was a run of one
			bl, b.runMin = b, b.Arrival
		} else {
			b.runLast = nil
		}
		w.runLast = bl
		bl.runFirst, bl.runMin = w, min(bl.runMin, w.Arrival)
	case a != nil && a != l:
		// w, of another band, lands inside a's run, between a and b: the
		// run becomes f..a and b..l, each keeping the bound.
		if f == a {
			a.runLast = nil
		} else {
			a.runFirst, a.runMin, f.runLast = f, l.runMin, a
		}
		if b == l {
			l.runFirst = nil
		} else {
			b.runLast, l.runFirst = l, b
		}
	}
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
	if w.runLast != nil { // the head ends no run: it may begin one
		unrun(w)
	}
	unlinkBare(q, w)
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
		o.Dequeued(w)
	}
	if q.head == nil {
		o.Emptied()
	}
}

// Hand serves the head of q, which must not be empty, with t: a token
// that a release gives back under the owner's lock with at least the
// permits the head asks for, which the owner has found free for it (so
// that the head fits) and counted as a grant that waited, as Claim would.
// It is Grant's step for a release that hands its token on instead of
// giving it back for Claim to take again (see the package doc): the head
// is taken off the queue as granted and added to c for waking; then, if
// the queue is empty, the owner is told. It must be called with the
// owner's lock held; the caller gives back what the head did not take and
// serves the others (Grant).
func Hand[O Owner](q *Queue, o O, t *permit.Token, c *Chain) {
	w := q.head
	q.serve(w, t, c)
	o.Dequeued(w)
	if q.head == nil {
		o.Emptied()
	}
}

// Len returns the number of waiters, kept on the head: no walk.
func (q *Queue) Len() int {
	if q.head == nil {
		return 0
	}
	return q.head.qlen
}

// remove takes w out of q and tells the owner.
func remove[O Owner](q *Queue, o O, w *Waiter) {
	unlink(q, w)
	o.Dequeued(w)
}

// unlink takes w out of q: out of its run, if w is at an end of one (on
// an ordered queue, see PushOrdered; a FIFO queue's waiters are at the
// end of none), then out of the list (unlinkBare).
func unlink(q *Queue, w *Waiter) {
	if w.runFirst != nil || w.runLast != nil {
		unrun(w)
	}
	unlinkBare(q, w)
}

// unlinkBare takes w out of q's list, leaving the runs as they are.
// Serving the head touches only the waiter behind it, not the newest
// (written last by another caller): the list is circular through prev
// only. Under a contended owner this runs in the lock on every hand-off;
// docs/internals.md has the ablation against a list circular both ways.
func unlinkBare(q *Queue, w *Waiter) {
	switch next := w.next; {
	case q.head == w:
		q.head = next
		if next != nil {
			next.prev, next.qlen = w.prev, w.qlen-1
		}
	case next == nil: // the newest, behind the head
		w.prev.next = nil
		q.head.prev = w.prev
		q.head.qlen--
	default:
		w.prev.next = next
		next.prev = w.prev
		q.head.qlen--
	}
	w.next, w.prev = nil, nil
}

// unrun takes w, the first or the last of a run of more than one waiter
// (see PushOrdered), out of its run, which keeps its bound, before w is
// unlinked.
func unrun(w *Waiter) {
	if l := w.runLast; l != nil { // w is the first: the next one is
		n := w.next
		if n == l {
			l.runFirst = nil
		} else {
			n.runLast, l.runFirst = l, n
		}
		w.runLast = nil
		return
	}
	f, p := w.runFirst, w.prev // w is the last: the one before it is
	if p == f {
		f.runLast = nil
	} else {
		p.runFirst, p.runMin, f.runLast = f, w.runMin, p
	}
	w.runFirst = nil
}
