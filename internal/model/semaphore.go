package model

import (
	"fmt"
	"time"
)

// Err names the outcome of an operation on the semaphore model. The tests
// map each to the sentinel error of the real package.
type Err int

// Outcomes of an acquire, for a caller or a waiter.
const (
	OK            Err = iota // granted
	InvalidWeight            // n <= 0
	TooHeavy                 // n above the capacity (at once, or after a shrink)
	Closed                   // the semaphore is, or was just, closed
	QueueFull                // the wait queue is at one of its bounds
	Cancelled                // the caller's context ended
	WaitTooLong              // the caller waited longer than the maximum wait
	InvalidTurn              // a Turn the semaphore has no ordering option for
)

var errNames = [...]string{"OK", "InvalidWeight", "TooHeavy", "Closed", "QueueFull", "Cancelled", "WaitTooLong", "InvalidTurn"}

// String returns the outcome's name.
func (e Err) String() string {
	if e >= 0 && int(e) < len(errNames) {
		return errNames[e]
	}
	return fmt.Sprintf("Err(%d)", int(e))
}

// Waiter is a request waiting in the model's queue.
type Waiter struct {
	ID int   // the id Acquire returned for the request
	N  int64 // its weight
	// With priorities: its Turn.Priority, and when it arrived on the
	// model's clock.
	Priority int
	Arrived  time.Duration
	// With fair share: its Turn.Group, and its start in virtual time
	// (its place in line).
	Group string
	Key   int64
}

// Served is a waiter taken off the queue by an operation, with what it got.
type Served struct {
	ID  int
	Err Err // OK for a grant
}

// SemStats mirrors the real semaphore's Stats.
type SemStats struct {
	Capacity      int64
	Available     int64
	Held          int64
	Waiters       int
	WaitingWeight int64
	Closed        bool

	Counters // the real Stats' Timings are not modelled
}

// Semaphore is a sequential model of a weighted semaphore: a capacity,
// a count of available permits, a slice of waiters in arrival order, the
// permits out, and the counters of the real semaphore's Stats. Its Order
// says whom it serves next (FIFO, priorities, fair share); everything
// else (bounds, grants, failures, counts) is the same for every order.
//
// Every acquire call gets an id. A granted request's id names its permit
// (for Release); a queued request's id names its waiter (for Cancel and
// Expire) and, once granted, its permit.
type Semaphore struct {
	capacity      int64
	available     int64
	maxWaiters    int   // <= 0: no bound
	maxWaitWeight int64 // <= 0: no bound
	closed        bool
	queue         []Waiter
	held          map[int]int64 // permit id -> weight, for permits out
	released      map[int]bool  // permit ids released at least once
	nextID        int
	st            SemStats      // counters only
	order         Order         // whom to serve next
	now           time.Duration // the model's clock, moved by Advance
}

// NewSemaphore returns a model of a FIFO semaphore of the given capacity,
// with the given bounds on the number and total weight of waiters (<= 0:
// none).
func NewSemaphore(capacity int64, maxWaiters int, maxWaitWeight int64) *Semaphore {
	return NewOrderedSemaphore(capacity, maxWaiters, maxWaitWeight, FIFO())
}

// NewOrderedSemaphore is NewSemaphore serving its waiters in order: FIFO(),
// Priorities(step) or FairShare(weight), the models of the real
// semaphore's ordering options. An Order keeps state: give each model its
// own.
func NewOrderedSemaphore(capacity int64, maxWaiters int, maxWaitWeight int64, order Order) *Semaphore {
	if capacity < 0 {
		panic("model: negative capacity")
	}
	return &Semaphore{
		capacity:      capacity,
		available:     capacity,
		maxWaiters:    maxWaiters,
		maxWaitWeight: maxWaitWeight,
		held:          make(map[int]int64),
		released:      make(map[int]bool),
		order:         order,
	}
}

// Advance moves the model's clock on by d, which ages the waiters.
func (m *Semaphore) Advance(d time.Duration) { m.now += d }

func (m *Semaphore) id() int {
	m.nextID++
	return m.nextID
}

func (m *Semaphore) grant(id int, n int64) {
	m.available -= n
	m.held[id] = n
	m.st.Acquired++
}

// Acquire models a blocking Acquire of n permits with a live context. It
// returns the request's id and either OK (granted at once), queued == true
// (the caller now waits, at the tail), or the error the call fails with at
// once.
func (m *Semaphore) Acquire(n int64) (id int, queued bool, err Err) {
	return m.AcquireTurn(n, Turn{})
}

// AcquireTurn models AcquireTurn(n, t): Acquire, with t's Priority or
// Group, after refusing with InvalidTurn a Turn that asks for what the
// model's order does not honour (a priority out of range included). A newcomer
// whose permits are free and whom the order places ahead of every waiter
// is served at once: with priorities as from an empty line, with fair
// share as it joins (its group charged, and counted as a grant that
// waited, as the real semaphore does).
func (m *Semaphore) AcquireTurn(n int64, t Turn) (id int, queued bool, err Err) {
	id = m.id()
	if t.Sequence != 0 || !m.order.takes(t) {
		m.st.Rejected++
		return id, false, InvalidTurn
	}
	w := Waiter{ID: id, N: n, Priority: t.Priority, Arrived: m.now, Group: t.Group}
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
	case m.available >= n && (len(m.queue) == 0 || m.order.passes(m, w)):
		// Nobody would be served before it.
		m.grant(id, n)
		return id, false, OK
	case m.maxWaiters > 0 && len(m.queue) >= m.maxWaiters,
		m.maxWaitWeight > 0 && m.waitingWeight()+n > m.maxWaitWeight:
		m.st.Rejected++
		return id, false, QueueFull
	}
	m.order.join(m, &w)
	m.queue = append(m.queue, w)
	// The one to serve next did not fit: only the newcomer can be served.
	switch g := m.serve(); {
	case len(g) == 0:
		return id, true, OK
	case len(g) > 1 || g[0].ID != id:
		panic(fmt.Sprintf("model: joining #%d served %v", id, g))
	}
	return id, false, OK
}

// next returns the index of the waiter to serve next: the first one that
// no other is served before. The queue must not be empty.
func (m *Semaphore) next() int {
	best := 0
	for i := 1; i < len(m.queue); i++ {
		if m.order.before(m, m.queue[i], m.queue[best]) {
			best = i
		}
	}
	return best
}

// AcquireDone models an Acquire whose context had already ended: it fails
// at once with the context's error, whatever the state.
func (m *Semaphore) AcquireDone() Err {
	m.st.Cancelled++
	return Cancelled
}

// TryAcquire models TryAcquire(n): granted only if nobody waits, the
// semaphore is open, and n permits are available now.
func (m *Semaphore) TryAcquire(n int64) (id int, ok bool) {
	if n <= 0 || m.closed || len(m.queue) > 0 || n > m.capacity || m.available < n {
		return 0, false
	}
	id = m.id()
	m.grant(id, n)
	return id, true
}

// Release models the Release of permit id. It reports whether it was the
// first release of a permit out (false is counted as a double release), and
// returns the waiters it lets in.
func (m *Semaphore) Release(id int) (first bool, granted []Served) {
	n, ok := m.held[id]
	if !ok {
		if !m.released[id] {
			panic(fmt.Sprintf("model: release of permit %d that was never granted", id))
		}
		m.st.DoubleReleases++
		return false, nil
	}
	delete(m.held, id)
	m.released[id] = true
	m.available += n
	m.st.Released++
	return true, m.serve()
}

// Cancel models waiter id's context ending while it waits: it leaves the
// queue, and the waiters behind it move up. A Release right after it, even
// one that the real semaphore applies before the waiter has seen its
// context end, comes after it in the model: the real semaphore must then
// hand the grant on as if the waiter had left first, counted in Cancelled
// only. Expire likewise.
func (m *Semaphore) Cancel(id int) (granted []Served) {
	m.remove(id)
	m.st.Cancelled++
	return m.serve()
}

// Expire models waiter id waiting longer than the maximum wait.
func (m *Semaphore) Expire(id int) (granted []Served) {
	m.remove(id)
	m.st.TimedOut++
	return m.serve()
}

// SetCapacity models SetCapacity(n): waiters heavier than n fail with
// TooHeavy, then the waiter to serve next is served for as long as it
// fits.
func (m *Semaphore) SetCapacity(n int64) (served []Served) {
	if n < 0 {
		panic("model: negative capacity")
	}
	m.available += n - m.capacity
	m.capacity = n
	keep := m.queue[:0]
	for _, w := range m.queue {
		if w.N > n {
			m.st.Failed++
			served = append(served, Served{ID: w.ID, Err: TooHeavy})
			continue
		}
		keep = append(keep, w)
	}
	m.queue = keep
	return append(served, m.serve()...)
}

// Close models Close: every waiter fails with Closed; later acquires fail.
func (m *Semaphore) Close() (failed []Served) {
	if m.closed {
		return nil
	}
	m.closed = true
	for _, w := range m.queue {
		m.st.Failed++
		failed = append(failed, Served{ID: w.ID, Err: Closed})
	}
	m.queue = nil
	return failed
}

// serve grants the waiter to serve next, over and over, while it fits.
func (m *Semaphore) serve() (granted []Served) {
	for len(m.queue) > 0 && m.queue[m.next()].N <= m.available {
		i := m.next()
		w := m.queue[i]
		m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
		m.grant(w.ID, w.N)
		m.st.Waited++
		m.order.served(m, w)
		granted = append(granted, Served{ID: w.ID, Err: OK})
	}
	return granted
}

func (m *Semaphore) remove(id int) {
	for i, w := range m.queue {
		if w.ID == id {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
	panic(fmt.Sprintf("model: waiter %d is not queued", id))
}

func (m *Semaphore) waitingWeight() int64 {
	var w int64
	for _, x := range m.queue {
		w += x.N
	}
	return w
}

// Queue returns a copy of the waiters, oldest first (not in the order of
// service, with priorities or fair share: see Next).
func (m *Semaphore) Queue() []Waiter { return append([]Waiter(nil), m.queue...) }

// Held returns the ids of the permits out, with their weights.
func (m *Semaphore) Held() map[int]int64 {
	h := make(map[int]int64, len(m.held))
	for id, n := range m.held {
		h[id] = n
	}
	return h
}

// Next returns the waiter to serve next, false if nobody waits.
func (m *Semaphore) Next() (Waiter, bool) {
	if len(m.queue) == 0 {
		return Waiter{}, false
	}
	return m.queue[m.next()], true
}

// Capacity returns the current capacity.
func (m *Semaphore) Capacity() int64 { return m.capacity }

// Available returns the permits free now (negative after a shrink, until
// holders release).
func (m *Semaphore) Available() int64 { return m.available }

// IsClosed reports whether Close has been called.
func (m *Semaphore) IsClosed() bool { return m.closed }

// Stats returns the model's view of the real semaphore's Stats.
func (m *Semaphore) Stats() SemStats {
	s := m.st
	s.Capacity = m.capacity
	s.Available = m.available
	for _, n := range m.held {
		s.Held += n
	}
	s.Waiters = len(m.queue)
	s.WaitingWeight = m.waitingWeight()
	s.Closed = m.closed
	return s
}

// Check returns an error if the model's own invariants do not hold: the
// permits out plus those available make up the capacity, nobody waits
// while the waiter to serve next would fit, and the order's own (see
// FairShare).
func (m *Semaphore) Check() error {
	s := m.Stats()
	if s.Available+s.Held != s.Capacity {
		return fmt.Errorf("model: available %d + held %d != capacity %d", s.Available, s.Held, s.Capacity)
	}
	if w, ok := m.Next(); ok && w.N <= m.available {
		return fmt.Errorf("model: head waiter %v fits in %d available", w, m.available)
	}
	if m.closed && len(m.queue) > 0 {
		return fmt.Errorf("model: %d waiters on a closed semaphore", len(m.queue))
	}
	return m.order.check(m)
}
