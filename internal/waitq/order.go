package waitq

import "github.com/sessionlane/lanes/internal/permit"

// This file is the order of service, FIFO: where a waiter joins the queue
// (Push) and whom Grant serves (the head, while it fits). Another policy
// changes these two and nothing else (see the package doc).

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

// PushAt puts w, a waiter from Cache.Get with its N set, into the queue
// by key: behind every waiter whose key is not greater, ahead of the first
// whose key is, so that the queue is in ascending key order and waiters
// of equal keys are in arrival order. It is the insertion of the ordered
// policies (priorities with aging, sequence order, fair share), which
// differ only in how the owner computes key; an owner must not mix Push
// and PushAt on one queue. The search starts from the newest, so a key
// not below the newest's (arrival order, the common case) costs what Push
// does; a key that overtakes k waiters costs k steps, under the lock.
func (q *Queue) PushAt(w *Waiter, key int64) {
	w.key = key
	if q.head == nil || q.head.prev.key <= key {
		q.Push(w)
		return
	}
	if key < q.head.key {
		// The new head: the newest stays behind it.
		w.next, w.prev = q.head, q.head.prev
		q.head.prev = w
		q.head = w
		return
	}
	// Somewhere behind the head and ahead of the newest: after the last
	// waiter whose key is not greater.
	at := q.head.prev
	for at.key > key {
		at = at.prev
	}
	w.prev, w.next = at, at.next
	at.next.prev = w
	at.next = w
}

// Key returns the key w was pushed at by PushAt, for an owner's view of
// its queue (0 after Push).
func (w *Waiter) Key() int64 { return w.key }

// Next returns the waiter behind w in its queue, nil if w is the newest,
// for an owner that looks along its queue under its lock.
func (w *Waiter) Next() *Waiter { return w.next }

// Head returns the waiter to serve next, nil if nobody waits. An owner's
// grant loop serves it if its permits are free and stops otherwise, so that
// a heavy waiter is never overtaken:
//
//	for w := q.Head(); w != nil; w = q.Head() {
//		t, ok := claim(w.N) // the owner's own, inlined
//		if !ok {
//			break
//		}
//		q.Serve(w, t, &chain)
//		// the owner's counts of a waiter gone
//	}
//	if q.Empty() {
//		// the owner clears its flag
//	}
//
// Grant is that loop for an Owner; the owners' hot release paths write it
// out with their own claim, because a method called through a type
// parameter is an indirect call that is never inlined, and the loop runs
// under the owner's lock, where every nanosecond is paid by all the
// goroutines queued behind it.
func (q *Queue) Head() *Waiter { return q.head }

// Serve takes w, the waiter Head returned, off the queue as granted
// through t, and adds it to c for waking.
func (q *Queue) Serve(w *Waiter, t *permit.Token, c *Chain) {
	unlink(q, w)
	w.tok, w.gen, w.served = t, t.Gen(), true
	c.add(w)
}

// Grant serves the waiters at the head of q, in order, for as long as
// Claim finds their permits, and adds them to c for waking; then, if the
// queue is empty, it tells the owner. It must be called with the owner's
// lock held, after anything that may let a waiter in: permits given back, a
// larger capacity, the head leaving.
func Grant[O Owner](q *Queue, o O, c *Chain) {
	for w := q.Head(); w != nil; w = q.Head() {
		t, ok := o.Claim(w.N)
		if !ok {
			break
		}
		q.Serve(w, t, c)
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
