package model

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// TooManyKeys is the outcome of an acquire of a new key that the keyed
// model's hard key cap refused. It is numbered apart from the semaphore
// outcomes so that both lists can grow.
const TooManyKeys Err = 100

// KeyedOrder is the order in which a key of the keyed model serves its
// waiters.
type KeyedOrder int

// The orders of keyedsem: FIFO, WithPriorities(Step), WithSequenceOrder(),
// and KeyedPriorities|KeyedSequence for both, which compose: bands with
// aging, sequence order within a band (see Overtakes).
const (
	KeyedFIFO KeyedOrder = iota
	KeyedPriorities
	KeyedSequence
)

// KeyedConfig is the configuration of a [Keyed] model, as the options of
// keyedsem.New set it.
type KeyedConfig struct {
	Capacity         int64         // per key
	IdleTimeout      time.Duration // 0: an entry goes with its last reference
	MaxKeys          int
	Hard             bool
	MaxWaitersPerKey int // 0: no bound
	Order            KeyedOrder
	Step             time.Duration // KeyedPriorities: the aging step
	MaxPriority      int           // KeyedPriorities: priorities beyond ±MaxPriority are refused
}

// KeyedStats mirrors the real keyed semaphore's Stats.
type KeyedStats struct {
	Keys     int
	Capacity int64
	Held     int64
	Waiters  int
	Closed   bool

	Counters // the real Stats' Timings are not modelled
	Created  uint64
	Evicted  uint64
}

// keyedEntry is one key's semaphore in the model.
type keyedEntry struct {
	avail int64
	refs  int           // holders and waiters
	queue []keyedWaiter // in ascending place, equal places in arrival order
	idle  time.Duration
	// tied is set on an idle entry that an eviction pass may or may not
	// have evicted (it went idle at the same time as the last one the pass
	// had to evict); Reconcile settles it.
	tied bool
	// fresh: the entry was made for one reference and none has been
	// raised on it since (see Keyed).
	fresh bool
}

// keepFresh reports whether the c-th entry made (counted by Created) is
// not fresh: one in 16, by the top four bits of c times 2^64 divided by
// the golden ratio, as keyedsem picks it.
func keepFresh(c uint64) bool { return (c*0x9E3779B97F4A7C15)>>60 == 0 }

// keyedWaiter is a waiter of the keyed model: with priorities its
// Priority and Arrived, with sequence order its number as Key.
type keyedWaiter struct {
	Waiter
}

type keyedHeld[K comparable] struct {
	key      K
	n        int64
	released bool
}

// Keyed is a sequential model of a keyed semaphore: per key a weighted FIFO
// semaphore, made on first use, which is dropped when its last reference
// goes (idle timeout 0) or kept idle until an eviction pass takes it.
//
// Its time is a duration since the start, moved by Advance, like the fake
// clock of the real one's tests. An eviction pass evicts every idle entry
// idle for at least the timeout, then, when over the cap, the oldest idle
// entries until the count is the cap less a quarter (at least one). Passes
// run by themselves: an expiry pass at an idle transition or a new key
// once the oldest idle entry the last pass kept is due (but no sooner
// than an eighth of the timeout after that pass), and a pass that makes
// room when a new key takes the count over the cap (unless the last such
// pass found nothing idle and nothing went idle since). Over the soft cap,
// an entry that goes idle is evicted at once. So is a fresh one at three
// quarters of the cap or more (the eviction target): an entry made for one
// call (with an idle timeout, and not one that keepFresh keeps) on which no
// other reference was raised. After Close, only Sweep evicts. When
// several entries went idle at the same instant, which of them a pass
// evicts is the implementation's choice: the model leaves them pending, and
// Reconcile adopts the implementation's choice after checking that the
// number is right.
type Keyed[K comparable] struct {
	cfg      KeyedConfig
	now      time.Duration
	entries  map[K]*keyedEntry
	ids      map[int]*keyedHeld[K] // permits and waiters by id
	waiting  map[int]K             // ids still queued
	next     int
	closed   bool
	st       KeyedStats
	tiedGone int // how many tied entries the last pass evicted
	// due is the time from which the next expiry pass runs, at an idle
	// transition or a new key; starved says that the last pass that had to
	// make room found nothing idle and no entry has gone idle since.
	due     time.Duration
	starved bool
}

// NewKeyed returns a model with no entries.
func NewKeyed[K comparable](cfg KeyedConfig) *Keyed[K] {
	return &Keyed[K]{
		cfg:     cfg,
		entries: map[K]*keyedEntry{},
		ids:     map[int]*keyedHeld[K]{},
		waiting: map[int]K{},
		st:      KeyedStats{Capacity: cfg.Capacity},
		due:     cfg.IdleTimeout,
	}
}

// Advance moves the model's time on by d.
func (m *Keyed[K]) Advance(d time.Duration) { m.now += d }

// AcquireDone is an acquire whose context had already ended: it fails with
// the context's error and nothing changes but the count of cancellations.
func (m *Keyed[K]) AcquireDone() { m.st.Cancelled++ }

func (m *Keyed[K]) target() int { return m.cfg.MaxKeys - max(1, m.cfg.MaxKeys/4) }

// Acquire takes n permits of key, or queues for them. It returns the id of
// the grant or of the waiter (which keeps its id when served), whether it
// queued, and the outcome: OK, or the error of a refusal at once. It is
// AcquireTurn with the zero Turn.
func (m *Keyed[K]) Acquire(key K, n int64) (id int, queued bool, err Err) {
	return m.AcquireTurn(key, n, Turn{})
}

// AcquireTurn is Acquire with a place in line: a waiter joins its key's
// queue behind every waiter whose place is not greater (see keyedWaiter),
// and a caller whose place is below the head's takes the permits at once
// if they fit, as one that finds nobody waiting does. A Turn field the
// order does not use (or a Group, or a priority beyond
// KeyedConfig.MaxPriority) is refused at once with InvalidTurn. The model
// computes places in plain int64: its callers keep priorities and steps
// small.
func (m *Keyed[K]) AcquireTurn(key K, n int64, t Turn) (id int, queued bool, err Err) {
	if !m.turnOK(t) {
		m.st.Rejected++
		return 0, false, InvalidTurn
	}
	switch {
	case n <= 0:
		m.st.Rejected++
		return 0, false, InvalidWeight
	case m.closed:
		m.st.Rejected++
		return 0, false, Closed
	case n > m.cfg.Capacity:
		m.st.Rejected++
		return 0, false, TooHeavy
	}
	e := m.entries[key]
	if e == nil {
		if e = m.create(key); e == nil {
			m.st.Rejected++
			return 0, false, TooManyKeys
		}
		return m.grant(key, e, n), false, OK
	}
	e.refs++
	e.fresh = false
	w := m.place(t)
	ahead := len(e.queue) == 0 || m.overtakes(w, e.queue[0].Waiter)
	if ahead && e.avail >= n {
		return m.grant(key, e, n), false, OK
	}
	if m.cfg.MaxWaitersPerKey > 0 && len(e.queue) >= m.cfg.MaxWaitersPerKey {
		m.unref(key, e)
		m.st.Rejected++
		return 0, false, QueueFull
	}
	id = m.newID(key, n)
	w.ID, w.N = id, n
	at := len(e.queue)
	for at > 0 && m.overtakes(w, e.queue[at-1].Waiter) {
		at--
	}
	e.queue = slices.Insert(e.queue, at, keyedWaiter{w})
	m.waiting[id] = key
	return id, true, OK
}

// turnOK reports whether the model's order uses every field t sets.
func (m *Keyed[K]) turnOK(t Turn) bool {
	switch {
	case t.Group != "":
		return false
	case t.Priority != 0 && (m.cfg.Order&KeyedPriorities == 0 || t.Priority > m.cfg.MaxPriority || t.Priority < -m.cfg.MaxPriority):
		return false
	case t.Sequence != 0 && m.cfg.Order&KeyedSequence == 0:
		return false
	}
	return true
}

// place returns a waiter of Turn t arriving now, with what its key's order
// uses.
func (m *Keyed[K]) place(t Turn) Waiter {
	var w Waiter
	if m.cfg.Order&KeyedPriorities != 0 {
		w.Priority, w.Arrived = t.Priority, m.now
	}
	if m.cfg.Order&KeyedSequence != 0 {
		w.Key = t.Sequence
	}
	return w
}

// overtakes reports whether a newcomer w goes ahead of x, queued, by the
// key's order (FIFO: never).
func (m *Keyed[K]) overtakes(w, x Waiter) bool {
	return m.cfg.Order != KeyedFIFO && Overtakes(w, x, m.cfg.Step)
}

// TryAcquire takes n permits of key if they are free and nobody waits for
// the key, and returns the grant's id.
func (m *Keyed[K]) TryAcquire(key K, n int64) (id int, ok bool) {
	if n <= 0 || n > m.cfg.Capacity || m.closed {
		return 0, false
	}
	e := m.entries[key]
	if e == nil {
		if e = m.create(key); e == nil {
			return 0, false
		}
		return m.grant(key, e, n), true
	}
	if len(e.queue) != 0 || e.avail < n {
		return 0, false
	}
	e.refs++
	e.fresh = false
	return m.grant(key, e, n), true
}

// Release releases the permit with the given id. It reports whether this
// was its first release, and returns the waiters it served, in order.
func (m *Keyed[K]) Release(id int) (first bool, granted []Served) {
	h := m.ids[id]
	if h == nil || h.released {
		m.st.DoubleReleases++
		return false, nil
	}
	if _, queued := m.waiting[id]; queued {
		panic(fmt.Sprintf("model: release of waiter %d", id))
	}
	h.released = true
	m.st.Released++
	e := m.entries[h.key]
	e.avail += h.n
	granted = m.serve(h.key, e)
	m.unref(h.key, e)
	return true, granted
}

// Cancel takes the waiter with the given id out of its queue, as its
// context ends, and returns the waiters served because it left.
func (m *Keyed[K]) Cancel(id int) (granted []Served) {
	key, ok := m.waiting[id]
	if !ok {
		panic(fmt.Sprintf("model: cancel of %d, which is not waiting", id))
	}
	delete(m.waiting, id)
	delete(m.ids, id)
	m.st.Cancelled++
	e := m.entries[key]
	for i, w := range e.queue {
		if w.ID == id {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			if i == 0 {
				granted = m.serve(key, e)
			}
			break
		}
	}
	m.unref(key, e)
	return granted
}

// Sweep is an eviction pass that evicts the expired idle entries (and the
// oldest idle ones if over the cap). It returns the number evicted.
func (m *Keyed[K]) Sweep() int {
	n := m.pass(false)
	m.starved = false
	return n
}

// Close fails every waiter with Closed and refuses later acquires. It
// returns the failed waiters.
func (m *Keyed[K]) Close() (failed []Served) {
	if m.closed {
		return nil
	}
	m.closed = true
	m.st.Closed = true
	keys := make([]K, 0, len(m.entries))
	for k := range m.entries {
		keys = append(keys, k)
	}
	for _, k := range keys {
		e := m.entries[k]
		q := e.queue
		e.queue = nil
		for _, w := range q {
			delete(m.waiting, w.ID)
			delete(m.ids, w.ID)
			m.st.Failed++
			failed = append(failed, Served{ID: w.ID, Err: Closed})
			m.unref(k, e)
		}
	}
	return failed
}

// Reconcile settles the entries that the last eviction pass may or may
// not have evicted with has, which tells whether the implementation has an
// entry for a key, and then checks that the implementation has an entry
// for exactly the keys of keys that the model has. An entry with
// references missing is reported as an eviction of an entry in use.
func (m *Keyed[K]) Reconcile(keys []K, has func(K) bool) error {
	gone := 0
	for k, e := range m.entries {
		if !e.tied {
			continue
		}
		e.tied = false
		if !has(k) {
			delete(m.entries, k)
			gone++
		}
	}
	if gone != m.tiedGone {
		return fmt.Errorf("eviction pass evicted %d of the entries that went idle last, want %d", gone, m.tiedGone)
	}
	m.tiedGone = 0
	for _, k := range keys {
		e := m.entries[k]
		switch got := has(k); {
		case e != nil && e.refs > 0 && !got:
			return fmt.Errorf("entry of key %v evicted with %d references", k, e.refs)
		case e != nil && !got:
			return fmt.Errorf("idle entry of key %v evicted, model keeps it", k)
		case e == nil && got:
			return fmt.Errorf("key %v has an entry, model has none", k)
		}
	}
	return nil
}

// Stats returns the model's counters and state in the shape of the real
// Stats.
func (m *Keyed[K]) Stats() KeyedStats {
	st := m.st
	st.Keys = len(m.entries)
	for _, e := range m.entries {
		st.Held += m.cfg.Capacity - e.avail
		st.Waiters += len(e.queue)
	}
	return st
}

// Len returns the number of entries.
func (m *Keyed[K]) Len() int { return len(m.entries) }

// Referenced returns the number of entries with holders or waiters: an
// eviction must never take one of them.
func (m *Keyed[K]) Referenced() int {
	c := 0
	for _, e := range m.entries {
		if e.refs > 0 {
			c++
		}
	}
	return c
}

// Queue returns the waiters of key in the order they are to be served
// (oldest first, for FIFO).
func (m *Keyed[K]) Queue(key K) []Waiter {
	var out []Waiter
	if e := m.entries[key]; e != nil {
		for _, w := range e.queue {
			out = append(out, w.Waiter)
		}
	}
	return out
}

// Waiting reports whether id is a waiter still queued.
func (m *Keyed[K]) Waiting(id int) bool {
	_, ok := m.waiting[id]
	return ok
}

// Check verifies the model's own invariants: per key, available plus held
// equals the capacity and stays within [0, capacity]; a key's references
// are its holders plus its waiters; nobody waits while the head's request
// fits.
func (m *Keyed[K]) Check() error {
	holders := map[K]int{}
	heldW := map[K]int64{}
	for id, h := range m.ids {
		if _, q := m.waiting[id]; q || h.released {
			continue
		}
		holders[h.key]++
		heldW[h.key] += h.n
	}
	for k, e := range m.entries {
		if e.avail+heldW[k] != m.cfg.Capacity {
			return fmt.Errorf("key %v: available %d + held %d != capacity %d", k, e.avail, heldW[k], m.cfg.Capacity)
		}
		if e.avail < 0 || e.avail > m.cfg.Capacity {
			return fmt.Errorf("key %v: available %d out of [0, %d]", k, e.avail, m.cfg.Capacity)
		}
		if e.refs != holders[k]+len(e.queue) {
			return fmt.Errorf("key %v: %d references, %d holders, %d waiters", k, e.refs, holders[k], len(e.queue))
		}
		if len(e.queue) > 0 && e.queue[0].N <= e.avail {
			return fmt.Errorf("key %v: head waiter fits but waits", k)
		}
		if err := checkOvertaking(e.queue, func(w keyedWaiter) Waiter { return w.Waiter }, m.overtakes); err != nil {
			return fmt.Errorf("key %v: %w", k, err)
		}
		if m.cfg.IdleTimeout == 0 && e.refs == 0 {
			return fmt.Errorf("key %v: idle entry kept with idle timeout 0", k)
		}
	}
	return nil
}

func (m *Keyed[K]) newID(key K, n int64) int {
	m.next++
	m.ids[m.next] = &keyedHeld[K]{key: key, n: n}
	return m.next
}

// grant gives n permits of e to a caller that holds a reference on it.
func (m *Keyed[K]) grant(key K, e *keyedEntry, n int64) int {
	e.avail -= n
	m.st.Acquired++
	return m.newID(key, n)
}

// create makes key's entry with one reference (its creator's), applying
// the key cap; nil if the hard cap refuses it.
func (m *Keyed[K]) create(key K) *keyedEntry {
	if m.cfg.Hard && len(m.entries) >= m.cfg.MaxKeys {
		if m.starved {
			return nil
		}
		if m.pass(true) == 0 {
			m.starved = true
			return nil
		}
	}
	m.st.Created++
	e := &keyedEntry{avail: m.cfg.Capacity, refs: 1, fresh: m.cfg.IdleTimeout != 0 && !keepFresh(m.st.Created)}
	m.entries[key] = e
	switch {
	case m.cfg.IdleTimeout == 0:
	case !m.cfg.Hard && len(m.entries) > m.cfg.MaxKeys:
		if !m.starved && m.pass(true) == 0 {
			m.starved = true
		}
	case m.now >= m.due:
		m.pass(false)
	}
	return e
}

// serve grants the head waiters of key while their requests fit.
func (m *Keyed[K]) serve(key K, e *keyedEntry) (granted []Served) {
	for len(e.queue) > 0 && e.queue[0].N <= e.avail {
		w := e.queue[0]
		e.queue = e.queue[1:]
		e.avail -= w.N
		delete(m.waiting, w.ID)
		m.st.Acquired++
		m.st.Waited++
		granted = append(granted, Served{ID: w.ID, Err: OK})
	}
	return granted
}

// unref drops a reference on key's entry: the last one makes it idle, or
// drops it with idle timeout 0.
func (m *Keyed[K]) unref(key K, e *keyedEntry) {
	e.refs--
	if e.refs > 0 {
		return
	}
	if m.cfg.IdleTimeout == 0 || (!m.closed && !m.cfg.Hard && len(m.entries) > m.cfg.MaxKeys) ||
		(!m.closed && e.fresh && len(m.entries) >= m.target()) {
		delete(m.entries, key)
		m.st.Evicted++
		return
	}
	e.idle = m.now
	m.starved = false
	if !m.closed && m.now >= m.due {
		m.pass(false)
	}
}

// pass is an eviction pass; see Keyed. It returns the number evicted.
// Entries tied at the boundary of the oldest ones stay in the map, marked,
// until Reconcile; Len and Stats are meant to be compared after it.
func (m *Keyed[K]) pass(overCap bool) int {
	type cand struct {
		key  K
		idle time.Duration
	}
	var keep []cand
	evicted := 0
	oldest := m.now
	defer func() {
		if m.cfg.IdleTimeout > 0 {
			step := max(m.cfg.IdleTimeout/8, 1)
			m.due = max(addSat(m.now, step), addSat(oldest, m.cfg.IdleTimeout))
		}
	}()
	for k, e := range m.entries {
		if e.tied {
			panic("model: eviction pass before Reconcile")
		}
		if e.refs > 0 {
			continue
		}
		if m.now-e.idle >= m.cfg.IdleTimeout {
			delete(m.entries, k)
			evicted++
			continue
		}
		keep = append(keep, cand{k, e.idle})
		oldest = min(oldest, e.idle)
	}
	alive := len(m.entries)
	if over := alive - m.target(); over > 0 && len(keep) > 0 && (overCap || alive > m.cfg.MaxKeys) {
		k := min(over, len(keep))
		sort.Slice(keep, func(i, j int) bool { return keep[i].idle < keep[j].idle })
		boundary := keep[k-1].idle
		older := 0
		for _, c := range keep {
			switch {
			case c.idle < boundary:
				delete(m.entries, c.key)
				older++
			case c.idle == boundary:
				m.entries[c.key].tied = true
			}
		}
		m.tiedGone = k - older
		evicted += k
	}
	m.st.Evicted += uint64(evicted)
	return evicted
}

// addSat returns a+b for b >= 0, or the largest Duration if that overflows.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
