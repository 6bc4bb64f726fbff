package model

import "time"

// Barging is a sequential model of a semaphore made with
// semaphore.WithBarging(bound): the FIFO model, with one rule changed, the
// bound being the rule. A caller (Acquire or TryAcquire) takes free
// permits at once, ahead of the waiters, unless a waiter has waited at
// least bound (then the model is strict: it queues, or TryAcquire fails).
// Everything else is the FIFO model's: the waiters are served in arrival
// order, the head while it fits, when permits come back, a waiter leaves
// or the capacity grows (in a sequential model a woken waiter that
// competes for freed permits always wins them: nobody else runs).
//
// Time is the model's own, moved by Advance; a waiter's wait is counted
// from the Acquire that queued it.
type Barging struct {
	*Semaphore
	bound time.Duration
	now   time.Duration
	since map[int]time.Duration // queueing time of each queued waiter
}

// NewBarging returns a model of a barging semaphore with the given
// capacity, bounds on the waiters (<= 0: none) and starvation bound (> 0).
func NewBarging(capacity int64, maxWaiters int, maxWaitWeight int64, bound time.Duration) *Barging {
	if bound <= 0 {
		panic("model: the barging bound must be positive")
	}
	return &Barging{
		Semaphore: NewSemaphore(capacity, maxWaiters, maxWaitWeight),
		bound:     bound,
		since:     make(map[int]time.Duration),
	}
}

// Advance moves the model's time on by d.
func (m *Barging) Advance(d time.Duration) { m.now += d }

// Old returns the number of queued waiters that have waited at least the
// bound.
func (m *Barging) Old() int {
	k := 0
	for _, w := range m.queue {
		if m.now-m.since[w.ID] >= m.bound {
			k++
		}
	}
	return k
}

// Strict reports whether a queued waiter has waited the bound: nobody may
// take permits ahead of the queue.
func (m *Barging) Strict() bool { return m.Old() > 0 }

// Acquire models a blocking Acquire of n permits with a live context: it
// is granted at once if n permits are free and nobody waits or the model
// is not strict; otherwise it queues at the tail (or fails at once, as
// the FIFO model's does).
func (m *Barging) Acquire(n int64) (id int, queued bool, err Err) {
	id = m.id()
	switch {
	case n <= 0:
		m.st.Rejected++
		return id, false, InvalidWeight
	case m.closed:
		m.st.Rejected++
		return id, false, Closed
	case n > m.capacity:
		m.st.Rejected++
		return id, false, TooHeavy
	case m.available >= n && (len(m.queue) == 0 || !m.Strict()):
		m.grant(id, n)
		return id, false, OK
	case m.maxWaiters > 0 && len(m.queue) >= m.maxWaiters,
		m.maxWaitWeight > 0 && m.waitingWeight()+n > m.maxWaitWeight:
		m.st.Rejected++
		return id, false, QueueFull
	}
	m.queue = append(m.queue, Waiter{ID: id, N: n})
	m.since[id] = m.now
	return id, true, OK
}

// TryAcquire models TryAcquire(n): granted if the semaphore is open, n
// permits are free, and nobody waits or the model is not strict.
func (m *Barging) TryAcquire(n int64) (id int, ok bool) {
	if n <= 0 || m.closed || n > m.capacity || m.available < n || (len(m.queue) > 0 && m.Strict()) {
		return 0, false
	}
	id = m.id()
	m.grant(id, n)
	return id, true
}
