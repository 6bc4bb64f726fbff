package waitq

// This file is the engine's part of bounded barging (semaphore.WithBarging):
// a wake-up that is not a grant. The barging owner writes its own wait
// loop around it (semaphore/barging.go); FIFO owners never call these.
//
// A nudge takes the head off the queue, marked served with no grant and
// no failure, and wakes it after the owner unlocks, as Serve does: so
// every rule of the protocol still holds (one party serves a waiter,
// under the lock, one send per service, received before the waiter is
// reused). The nudged waiter is in no queue while it runs: it takes free
// permits itself, or Rejoins the queue at its place, the head (it was the
// head, and everyone queued since came later), or leaves. An owner that
// nudges pushes with Push (it orders nothing), and may keep its waiters'
// arrival in their Place for its own bound; Rejoin keeps the Place.

// Nudge takes w, the waiter Head returned, off the queue without a grant,
// and adds it to c for waking: its wake-up tells it to look at the
// permits again (Nudged reports it). The owner counts it as dequeued.
func (q *Queue) Nudge(w *Waiter, c *Chain) {
	unlink(q, w)
	w.tok, w.err, w.served = nil, nil, true
	c.add(w)
}

// Nudged reports whether w's wake-up, received, was a Nudge: served with
// neither a grant nor a failure.
func (w *Waiter) Nudged() bool { return w.served && w.tok == nil && w.err == nil }

// Served reports whether w is off the queue with a wake-up sent or on its
// way (granted, failed or nudged). It must be called with the owner's
// lock held, or after the wake-up was received.
func (w *Waiter) Served() bool { return w.served }

// Rejoin puts w, a nudged waiter whose wake-up was received, back at the
// head of the queue, unserved, with its key. The owner counts it again,
// under its lock.
func (q *Queue) Rejoin(w *Waiter) {
	w.served = false
	if q.head == nil {
		w.next, w.prev = nil, w
		q.head = w
		return
	}
	w.next, w.prev = q.head, q.head.prev
	q.head.prev = w
	q.head = w
}
