package model

import (
	"cmp"
	"fmt"
	"slices"
)

// QueueKind is the kind of a lane of the queue model, in canonical order.
type QueueKind int

// Lane kinds of the queue model, in the order AcquireAll takes them.
const (
	QueueKeyed QueueKind = iota
	QueueGlobal
	QueueRate
)

// QueueErr names the outcome of an acquire on the queue model. The tests
// map each to the sentinel error of package lanequeue.
type QueueErr int

// Outcomes of an acquire on the queue model.
const (
	QueueOK            QueueErr = iota // granted, or queued (see the call)
	QueueClosed                        // the queue is closed
	QueueNoLanes                       // the list is empty
	QueueUnknownLane                   // a name has no lane
	QueueDuplicateLane                 // a lane is named twice
	QueueInvalidWeight                 // weight below 1
	QueueTooHeavy                      // weight above a lane's capacity (per-key capacity, burst)
)

var queueErrNames = [...]string{"OK", "Closed", "NoLanes", "UnknownLane", "DuplicateLane", "InvalidWeight", "TooHeavy"}

// String returns the outcome's name.
func (e QueueErr) String() string {
	if e >= 0 && int(e) < len(queueErrNames) {
		return queueErrNames[e]
	}
	return fmt.Sprintf("QueueErr(%d)", int(e))
}

// QueueLane describes one lane of the queue model. Capacity is the
// capacity of a global lane, the per-key capacity of a keyed lane, and the
// burst of a rate lane (whose limiter never refills in the model: tests
// give the real limiter a negligible rate).
type QueueLane struct {
	Name     string
	Kind     QueueKind
	Capacity int64
}

// queueLane is a lane of the model and what is out on it.
type queueLane struct {
	QueueLane
	held   int64            // global and keyed lanes: weight held, over all keys
	perKey map[string]int64 // keyed lanes: weight held per key
	tokens int64            // rate lanes: tokens left (negative while a waiter has reserved ahead)
	// Rate lanes, while the pending request has reserved its tokens:
	// whether they were there at once (due), and whether the lane has
	// granted tokens since (used). If both, a cancellation leaves them
	// spent: the real lane cannot give back tokens already due once its
	// limiter has moved on without granting more than its bucket allows.
	due, used bool
}

// queueTicket is a granted request.
type queueTicket struct {
	key   string
	lanes []int // indexes into Queue.lanes, canonical order
	n     int64
}

// QueuePending is the one request of the model that waits.
type QueuePending struct {
	ID    int
	Key   string
	Lanes []string // canonical order
	N     int64
	// At is the index in Lanes of the lane it waits on; the lanes before
	// it are held. When it waits on the rate lanes, At is the first of
	// them, and every rate lane has reserved its tokens (Reserved).
	At       int
	Reserved bool
}

// Queue is a sequential model of a lanequeue.Queue: named lanes in
// canonical order, the tickets out, and at most one request waiting
// (enough to model a caller blocked part-way through AcquireAll, its
// cancellation, and its wake-up by a release). Keys are strings.
//
// Each lane serves its waiter first: while the pending request waits on a
// global lane, or on a keyed lane for its key, a try on that lane (for that
// key) fails even if it would fit, as the real lanes' FIFO requires; while
// it waits on rate lanes it has reserved their tokens, as rate.Limiter
// does, so tries there fail too.
type Queue struct {
	lanes   []*queueLane
	byName  map[string]int
	closed  bool
	tickets map[int]*queueTicket
	pending *QueuePending
	nextID  int
}

// NewQueue returns a model of a queue with the given lanes.
func NewQueue(lanes ...QueueLane) *Queue {
	m := &Queue{byName: map[string]int{}, tickets: map[int]*queueTicket{}}
	ls := slices.Clone(lanes)
	slices.SortFunc(ls, func(a, b QueueLane) int {
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for i, l := range ls {
		if _, dup := m.byName[l.Name]; dup || l.Name == "" || l.Capacity < 1 {
			panic(fmt.Sprintf("model: bad lane %+v", l))
		}
		q := &queueLane{QueueLane: l, tokens: l.Capacity}
		if l.Kind == QueueKeyed {
			q.perKey = map[string]int64{}
		}
		m.lanes = append(m.lanes, q)
		m.byName[l.Name] = i
	}
	return m
}

// Resolve returns the lanes named, as indexes in canonical order, or the
// error AcquireAll returns before taking anything.
func (m *Queue) Resolve(names []string, n int64) ([]int, QueueErr) {
	if m.closed {
		return nil, QueueClosed
	}
	if len(names) == 0 {
		return nil, QueueNoLanes
	}
	var idx []int
	for _, name := range names {
		i, ok := m.byName[name]
		if !ok {
			return nil, QueueUnknownLane
		}
		if slices.Contains(idx, i) {
			return nil, QueueDuplicateLane
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		if n < 1 {
			return nil, QueueInvalidWeight
		}
		if n > m.lanes[i].Capacity {
			return nil, QueueTooHeavy
		}
	}
	return idx, QueueOK
}

// blocked reports whether the pending request waits on lane i for key
// (a global or rate lane: for any key).
func (m *Queue) blocked(i int, key string) bool {
	p := m.pending
	if p == nil {
		return false
	}
	pi := m.byName[p.Lanes[p.At]]
	l := m.lanes[i]
	switch l.Kind {
	case QueueKeyed:
		return pi == i && p.Key == key
	case QueueGlobal:
		return pi == i
	}
	return false // rate lanes: the reservation already took the tokens
}

// fits reports whether n fits on lane i for key now (rate: tokens left).
func (m *Queue) fits(i int, key string, n int64) bool {
	l := m.lanes[i]
	switch l.Kind {
	case QueueKeyed:
		return l.perKey[key]+n <= l.Capacity
	case QueueGlobal:
		return l.held+n <= l.Capacity
	}
	return l.tokens >= n
}

func (m *Queue) take(i int, key string, n int64) {
	l := m.lanes[i]
	switch l.Kind {
	case QueueKeyed:
		l.perKey[key] += n
		l.held += n
	case QueueGlobal:
		l.held += n
	default:
		l.tokens -= n
	}
}

func (m *Queue) give(i int, key string, n int64) {
	l := m.lanes[i]
	switch l.Kind {
	case QueueKeyed:
		l.perKey[key] -= n
		if l.perKey[key] == 0 {
			delete(l.perKey, key)
		}
		l.held -= n
	case QueueGlobal:
		l.held -= n
	default:
		l.tokens += n // only for a rate reservation given back
	}
}

func (m *Queue) names(idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = m.lanes[i].Name
	}
	return out
}

func (m *Queue) grant(key string, idx []int, n int64) int {
	m.nextID++
	m.tickets[m.nextID] = &queueTicket{key: key, lanes: idx, n: n}
	return m.nextID
}

// TryAcquire models TryAcquireAll: it returns the new ticket's id and
// true, or false (holding nothing) when a lane has no room now, has a
// waiter ahead, or when Resolve fails (the error is returned too).
func (m *Queue) TryAcquire(key string, names []string, n int64) (int, bool, QueueErr) {
	idx, err := m.Resolve(names, n)
	if err != QueueOK {
		return 0, false, err
	}
	var rates []int
	for _, i := range idx {
		if m.lanes[i].Kind == QueueRate {
			rates = append(rates, i)
			continue
		}
		if m.blocked(i, key) || !m.fits(i, key, n) {
			return 0, false, QueueOK
		}
	}
	for _, i := range rates {
		if !m.fits(i, key, n) {
			return 0, false, QueueOK
		}
	}
	for _, i := range idx {
		m.take(i, key, n)
		if m.lanes[i].Kind == QueueRate {
			m.lanes[i].used = true
		}
	}
	return m.grant(key, idx, n), true, QueueOK
}

// Acquire models AcquireAll with a live context, when no request waits
// (it panics otherwise). It returns the new ticket's id and true when the
// request is granted at once; false with QueueOK when it now waits (see
// Pending); or the error it fails with at once.
func (m *Queue) Acquire(key string, names []string, n int64) (int, bool, QueueErr) {
	if m.pending != nil {
		panic("model: Acquire while a request waits")
	}
	idx, err := m.Resolve(names, n)
	if err != QueueOK {
		return 0, false, err
	}
	m.nextID++
	m.pending = &QueuePending{ID: m.nextID, Key: key, Lanes: m.names(idx), N: n}
	if m.advance() {
		return m.pending0(), true, QueueOK
	}
	return 0, false, QueueOK
}

// pending0 turns the pending request, just granted, into a ticket.
func (m *Queue) pending0() int {
	p := m.pending
	m.pending = nil
	idx := make([]int, len(p.Lanes))
	for j, name := range p.Lanes {
		idx[j] = m.byName[name]
	}
	m.tickets[p.ID] = &queueTicket{key: p.Key, lanes: idx, n: p.N}
	return p.ID
}

// advance moves the pending request on as far as it can go, and reports
// whether it now holds every lane. A request waiting on rate lanes never
// moves on: the model's limiters do not refill.
func (m *Queue) advance() bool {
	p := m.pending
	for p.At < len(p.Lanes) {
		i := m.byName[p.Lanes[p.At]]
		l := m.lanes[i]
		if l.Kind == QueueRate {
			if p.Reserved {
				return false // waiting for tokens that never come
			}
			return m.reserveRates()
		}
		if !m.fits(i, p.Key, p.N) {
			return false
		}
		m.take(i, p.Key, p.N)
		p.At++
	}
	return true
}

// reserveRates reserves the tokens of every rate lane of the pending
// request at once, and reports whether none had to go below zero (then
// the request is granted).
func (m *Queue) reserveRates() bool {
	p := m.pending
	p.Reserved = true
	short := false
	for _, name := range p.Lanes[p.At:] {
		i := m.byName[name]
		l := m.lanes[i]
		l.due, l.used = l.tokens >= p.N, false
		if !l.due {
			short = true
		}
		m.take(i, p.Key, p.N)
	}
	if !short {
		p.At = len(p.Lanes)
		return true
	}
	return false
}

// Pending returns the waiting request, if any.
func (m *Queue) Pending() (QueuePending, bool) {
	if m.pending == nil {
		return QueuePending{}, false
	}
	p := *m.pending
	p.Lanes = slices.Clone(p.Lanes)
	return p, true
}

// WaitingOn returns the name and kind of the lane the pending request
// waits on.
func (m *Queue) WaitingOn() (string, QueueKind, bool) {
	if m.pending == nil {
		return "", 0, false
	}
	name := m.pending.Lanes[m.pending.At]
	return name, m.lanes[m.byName[name]].Kind, true
}

// Cancel models the pending request's context ending: it gives back what
// the request took (rate reservations too, except the tokens of a rate
// lane that were there at once when the lane has granted tokens since)
// and forgets it. It reports whether a request was pending.
func (m *Queue) Cancel() bool {
	p := m.pending
	if p == nil {
		return false
	}
	m.rollback(p)
	m.pending = nil
	return true
}

func (m *Queue) rollback(p *QueuePending) {
	for j := p.At - 1; j >= 0; j-- {
		m.give(m.byName[p.Lanes[j]], p.Key, p.N)
	}
	if p.Reserved && p.At < len(p.Lanes) {
		for _, name := range p.Lanes[p.At:] {
			i := m.byName[name]
			if l := m.lanes[i]; l.due && l.used {
				continue // spent: see queueLane.due
			}
			m.give(i, p.Key, p.N)
		}
	}
}

// Release models Ticket.Release of ticket id: it reports whether this was
// the first release, and, if the pending request is granted as a result,
// its ticket id (0 if none).
func (m *Queue) Release(id int) (first bool, granted int) {
	t, ok := m.tickets[id]
	if !ok {
		return false, 0
	}
	delete(m.tickets, id)
	for j := len(t.lanes) - 1; j >= 0; j-- {
		if i := t.lanes[j]; m.lanes[i].Kind != QueueRate {
			m.give(i, t.key, t.n)
		}
	}
	if m.pending != nil && m.advance() {
		return true, m.pending0()
	}
	return true, 0
}

// Close models Queue.Close: later acquires fail, and the pending request
// (if any) fails and gives back what it took. Tickets stay out.
func (m *Queue) Close() {
	m.closed = true
	m.Cancel()
}

// Tickets returns the ids of the tickets out, in order.
func (m *Queue) Tickets() []int {
	ids := make([]int, 0, len(m.tickets))
	for id := range m.tickets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Held returns the weight held on a global or keyed lane (over all keys,
// the pending request's partial holds included).
func (m *Queue) Held(lane string) int64 { return m.lanes[m.byName[lane]].held }

// HeldBy returns the weight key holds on a keyed lane.
func (m *Queue) HeldBy(lane, key string) int64 { return m.lanes[m.byName[lane]].perKey[key] }

// Tokens returns the tokens left on a rate lane.
func (m *Queue) Tokens(lane string) int64 { return m.lanes[m.byName[lane]].tokens }

// Lanes returns the lanes in canonical order.
func (m *Queue) Lanes() []QueueLane {
	out := make([]QueueLane, len(m.lanes))
	for i, l := range m.lanes {
		out[i] = l.QueueLane
	}
	return out
}

// QueueHolder is one lane held by one ticket (rate lanes are not listed,
// as in lanequeue.Holders).
type QueueHolder struct {
	Lane   string
	Key    string
	Weight int64
}

// Holders returns what the tickets hold, and what the pending request
// holds already (lanequeue.Holders lists every permit out), sorted by
// lane, key, weight.
func (m *Queue) Holders() []QueueHolder {
	var out []QueueHolder
	for _, t := range m.tickets {
		for _, i := range t.lanes {
			if m.lanes[i].Kind != QueueRate {
				out = append(out, QueueHolder{m.lanes[i].Name, t.key, t.n})
			}
		}
	}
	if p := m.pending; p != nil {
		for _, name := range p.Lanes[:p.At] {
			if m.lanes[m.byName[name]].Kind != QueueRate {
				out = append(out, QueueHolder{name, p.Key, p.N})
			}
		}
	}
	SortQueueHolders(out)
	return out
}

// SortQueueHolders sorts holders by lane, key, weight.
func SortQueueHolders(hs []QueueHolder) {
	slices.SortFunc(hs, func(a, b QueueHolder) int {
		return cmp.Or(cmp.Compare(a.Lane, b.Lane), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Weight, b.Weight))
	})
}

// Check verifies the model's own invariants: on every global lane
// 0 <= held <= capacity; on every keyed lane 0 <= held-per-key <= per-key
// capacity, and the per-key figures add up to held; on every rate lane
// tokens <= burst. It returns the first violation found.
func (m *Queue) Check() error {
	for _, l := range m.lanes {
		switch l.Kind {
		case QueueGlobal:
			if l.held < 0 || l.held > l.Capacity {
				return fmt.Errorf("global lane %q: held %d outside [0, %d]", l.Name, l.held, l.Capacity)
			}
		case QueueKeyed:
			var sum int64
			for k, h := range l.perKey {
				if h < 0 || h > l.Capacity {
					return fmt.Errorf("keyed lane %q, key %q: held %d outside [0, %d]", l.Name, k, h, l.Capacity)
				}
				sum += h
			}
			if sum != l.held {
				return fmt.Errorf("keyed lane %q: per-key holds add up to %d, held is %d", l.Name, sum, l.held)
			}
		case QueueRate:
			if l.tokens > l.Capacity {
				return fmt.Errorf("rate lane %q: %d tokens above the burst %d", l.Name, l.tokens, l.Capacity)
			}
		}
	}
	return nil
}
