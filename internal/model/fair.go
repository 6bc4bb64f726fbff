package model

import (
	"fmt"
	"slices"
)

// FairScale is the length, in the fair model's virtual time, of a request
// of one permit in a group of weight 1. The order of service does not
// depend on it as long as every weight divides it (then every length is
// exact and scaling it scales every key alike); the tests use weights
// from 1 to 16, which divide it.
const FairScale = 720720

// FairWaiter is a request waiting in the fair model's queue.
type FairWaiter struct {
	ID    int
	N     int64
	Group string
	Key   int64 // its start in virtual time: its place in line
	seq   int   // arrival order, for equal keys
}

// FairSemaphore is a sequential model of a semaphore made with
// semaphore.WithFairShare: start-time fair queuing, written out plainly.
//
// Virtual time V is the key of the waiter served last; each group has
// the finish of its last request, F (0 if it has none). A waiter of n
// permits of group g joins at key max(V, F[g]), and F[g] becomes that key
// plus n*FairScale/weight(g). The queue is kept sorted by key, equal keys
// in arrival order; the head is served while it fits, and a head that
// does not fit stops the service (nobody behind it overtakes it). A
// newcomer whose key is below the head's goes ahead of it, and is served
// at once if it fits (counted as a grant that waited). When a waiter
// joins an empty queue, V and every F start again from zero. The model
// keeps every group's F until then (the real semaphore drops the records
// that cannot matter, which must change nothing).
//
// Ids, outcomes and counters are those of [Semaphore] (no bounds on the
// queue, no maximum wait).
type FairSemaphore struct {
	capacity  int64
	available int64
	closed    bool
	weight    func(string) int
	v         int64
	finish    map[string]int64
	queue     []FairWaiter
	seq       int
	held      map[int]int64
	nextID    int
	served    []int // ids granted after waiting, in order of service
	st        SemStats
}

// NewFairSemaphore returns a model of a fair-share semaphore of the given
// capacity; weight gives each group's weight (nil: 1 for every group).
func NewFairSemaphore(capacity int64, weight func(string) int) *FairSemaphore {
	if capacity < 0 {
		panic("model: negative capacity")
	}
	if weight == nil {
		weight = func(string) int { return 1 }
	}
	return &FairSemaphore{
		capacity:  capacity,
		available: capacity,
		weight:    weight,
		finish:    make(map[string]int64),
		held:      make(map[int]int64),
	}
}

func (m *FairSemaphore) grant(id int, n int64) {
	m.available -= n
	m.held[id] = n
	m.st.Acquired++
}

// Acquire models AcquireTurn(ctx, n, Turn{Group: group}) with a live
// context: granted at once (OK, queued false), queued, or refused.
func (m *FairSemaphore) Acquire(group string, n int64) (id int, queued bool, err Err) {
	m.nextID++
	id = m.nextID
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
	case len(m.queue) == 0 && m.available >= n:
		m.grant(id, n)
		return id, false, OK
	}
	if len(m.queue) == 0 {
		m.v = 0
		m.finish = make(map[string]int64)
	}
	key := max(m.v, m.finish[group])
	m.finish[group] = key + n*(FairScale/int64(m.weight(group)))
	m.seq++
	w := FairWaiter{ID: id, N: n, Group: group, Key: key, seq: m.seq}
	at := len(m.queue)
	for at > 0 && m.queue[at-1].Key > key {
		at--
	}
	if at == 0 && n <= m.available {
		// Its turn comes before the head's, which did not fit, and it
		// fits: it is served as it joins (a grant that waited).
		m.v = key
		m.grant(id, n)
		m.st.Waited++
		m.served = append(m.served, id)
		return id, false, OK
	}
	m.queue = slices.Insert(m.queue, at, w)
	return id, true, OK
}

// TryAcquire models TryAcquire(n).
func (m *FairSemaphore) TryAcquire(n int64) (id int, ok bool) {
	if n <= 0 || m.closed || len(m.queue) > 0 || n > m.capacity || m.available < n {
		return 0, false
	}
	m.nextID++
	m.grant(m.nextID, n)
	return m.nextID, true
}

// Release models the first Release of permit id, and returns the waiters
// it lets in.
func (m *FairSemaphore) Release(id int) []Served {
	n, ok := m.held[id]
	if !ok {
		panic(fmt.Sprintf("model: release of permit %d that is not out", id))
	}
	delete(m.held, id)
	m.available += n
	m.st.Released++
	return m.serve()
}

// Cancel models waiter id's context ending while it waits (see
// Semaphore.Cancel). Its group stays charged.
func (m *FairSemaphore) Cancel(id int) []Served {
	i := slices.IndexFunc(m.queue, func(w FairWaiter) bool { return w.ID == id })
	if i < 0 {
		panic(fmt.Sprintf("model: waiter %d is not queued", id))
	}
	m.queue = slices.Delete(m.queue, i, i+1)
	m.st.Cancelled++
	return m.serve()
}

// SetCapacity models SetCapacity(n).
func (m *FairSemaphore) SetCapacity(n int64) (out []Served) {
	m.available += n - m.capacity
	m.capacity = n
	keep := m.queue[:0]
	for _, w := range m.queue {
		if w.N > n {
			m.st.Failed++
			out = append(out, Served{ID: w.ID, Err: TooHeavy})
			continue
		}
		keep = append(keep, w)
	}
	m.queue = keep
	return append(out, m.serve()...)
}

// Close models Close.
func (m *FairSemaphore) Close() (failed []Served) {
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

// serve grants the head while it fits; V follows each key served.
func (m *FairSemaphore) serve() (granted []Served) {
	for len(m.queue) > 0 && m.queue[0].N <= m.available {
		w := m.queue[0]
		m.queue = m.queue[1:]
		m.v = w.Key
		m.grant(w.ID, w.N)
		m.st.Waited++
		m.served = append(m.served, w.ID)
		granted = append(granted, Served{ID: w.ID, Err: OK})
	}
	return granted
}

// Queue returns a copy of the waiters, in order of service.
func (m *FairSemaphore) Queue() []FairWaiter { return slices.Clone(m.queue) }

// ServedOrder returns the ids granted after waiting, in order of service.
func (m *FairSemaphore) ServedOrder() []int { return slices.Clone(m.served) }

// Capacity returns the current capacity.
func (m *FairSemaphore) Capacity() int64 { return m.capacity }

// Held returns the ids of the permits out, with their weights.
func (m *FairSemaphore) Held() map[int]int64 {
	h := make(map[int]int64, len(m.held))
	for id, n := range m.held {
		h[id] = n
	}
	return h
}

// Stats returns the model's view of the real semaphore's Stats.
func (m *FairSemaphore) Stats() SemStats {
	s := m.st
	s.Capacity = m.capacity
	s.Available = m.available
	for _, n := range m.held {
		s.Held += n
	}
	s.Waiters = len(m.queue)
	for _, w := range m.queue {
		s.WaitingWeight += w.N
	}
	s.Closed = m.closed
	return s
}

// Check returns an error if the model's invariants do not hold: held plus
// available is the capacity; nobody waits while the head fits; the queue
// is sorted by key, equal keys in arrival order; every key is at least V;
// within a group, keys rise in arrival order (FIFO within a group).
func (m *FairSemaphore) Check() error {
	s := m.Stats()
	if s.Available+s.Held != s.Capacity {
		return fmt.Errorf("model: available %d + held %d != capacity %d", s.Available, s.Held, s.Capacity)
	}
	if len(m.queue) > 0 && m.queue[0].N <= m.available {
		return fmt.Errorf("model: head waiter %+v fits in %d available", m.queue[0], m.available)
	}
	if m.closed && len(m.queue) > 0 {
		return fmt.Errorf("model: %d waiters on a closed semaphore", len(m.queue))
	}
	last := make(map[string]FairWaiter)
	for i, w := range m.queue {
		if w.Key < m.v {
			return fmt.Errorf("model: waiter %+v has a key below V %d", w, m.v)
		}
		if i > 0 {
			p := m.queue[i-1]
			if p.Key > w.Key || (p.Key == w.Key && p.seq > w.seq) {
				return fmt.Errorf("model: queue out of order at %d: %+v before %+v", i, p, w)
			}
		}
		if p, ok := last[w.Group]; ok && (p.seq > w.seq || p.Key >= w.Key) {
			return fmt.Errorf("model: group %q out of arrival order: %+v before %+v", w.Group, p, w)
		}
		last[w.Group] = w
	}
	return nil
}
