package waitq

// This file is the order of service, FIFO: where a waiter joins the queue
// (Push) and whom Grant serves (the head, while it fits). Another policy
// changes these two and nothing else (see the package doc).

// Queue is a list of waiters, oldest first. It is one pointer, so that a
// keyed semaphore's entry carries no more; owners that need counts keep
// them beside it (see Owner.Dequeued). It is guarded by its owner's lock.
// The zero Queue is empty.
type Queue struct {
	head *Waiter // the list is circular: head.prev is the newest
}

// Empty reports whether nobody waits. Owners ask it before they take
// units ahead of the queue.
func (q *Queue) Empty() bool { return q.head == nil }

// Push puts w, a waiter from Cache.Get with its N set, into the queue: at
// the tail. The owner has counted it.
func (q *Queue) Push(w *Waiter) {
	if q.head == nil {
		w.next, w.prev = w, w
		q.head = w
		return
	}
	tail := q.head.prev
	w.prev, w.next = tail, q.head
	tail.next = w
	q.head.prev = w
}

// Grant serves the waiters at the head of q, in order, for as long as
// Claim finds their units, and adds them to c for waking; then, if the
// queue is empty, it tells the owner. It must be called with the owner's
// lock held, after anything that may let a waiter in: units given back, a
// larger capacity, the head leaving.
func Grant[O Owner](q *Queue, o O, c *Chain) {
	for w := q.head; w != nil; w = q.head {
		t, ok := o.Claim(w.N)
		if !ok {
			break
		}
		remove(q, o, w)
		w.tok, w.gen, w.served = t, t.Gen(), true
		c.add(w)
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
	for w := q.head.next; w != q.head && n < limit; w = w.next {
		n++
	}
	return n
}

// remove takes w out of q and tells the owner.
func remove[O Owner](q *Queue, o O, w *Waiter) {
	if w.next == w {
		q.head = nil
	} else {
		w.prev.next = w.next
		w.next.prev = w.prev
		if q.head == w {
			q.head = w.next
		}
	}
	w.next, w.prev = nil, nil
	o.Dequeued(w.N)
}
