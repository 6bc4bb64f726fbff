package lanequeue

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"
)

// setCacheSize is the number of lists of lane names that a table
// remembers, resolved. A gateway names a handful of lists ({session,
// global}, {scheduler, session}, ...), each usually written as one literal
// in the code; 16 slots hold them with room for hash collisions.
const setCacheSize = 16

// setCache maps lists of lane names to their resolution. It is a
// direct-mapped cache, by a hash of the names, whose slots are filled once
// and never replaced, so it allocates at most setCacheSize times per table
// (a new table, made by Add, starts empty), and a list that collides with
// another takes the slower path through the name map instead of evicting
// it.
//
// In front of it, bySrc finds a set by the address of the list it was made
// from, for callers that pass the same slice again (a package-level
// variable): one multiplication and a comparison of the strings' pointers
// and lengths, without hashing the names or reading their bytes. A set
// goes there when it is stored, over whatever set had the slot: bySrc
// allocates nothing of its own.
type setCache[K comparable] struct {
	slots [setCacheSize]atomic.Pointer[laneSet[K]]
	bySrc [setCacheSize]atomic.Pointer[laneSet[K]]
}

// laneSet is a list of lane names resolved against one table: the lanes in
// canonical order, with the facts AcquireAll checks. Immutable.
type laneSet[K comparable] struct {
	names []string        // as the caller gave them (sharing their bytes)
	lanes []*laneEntry[K] // canonical order
	// src is the address of the first element of the slice the set was
	// made from: a number, not a pointer, since the slice may be on a
	// stack; a stale address that happens to match is caught by sameNames.
	src uintptr
	// fixedMax is the smallest fixed MaxWeight of the lanes, or -1 if a
	// lane's MaxWeight may change (it must be asked each time).
	fixedMax int64
	// plain is the number of lanes before the first rate lane (an int:
	// a list may name any number of lanes).
	plain int
}

// slot returns the cache slot of a list of names, from a hash of the list's
// length and each name's length and first and last byte: cheap, and
// different for the lists one program uses.
func (c *setCache[K]) slot(names []string) *atomic.Pointer[laneSet[K]] {
	h := uint64(len(names))
	for _, n := range names {
		h = h*31 + uint64(len(n))
		if len(n) > 0 {
			h = (h*31+uint64(n[0]))*31 + uint64(n[len(n)-1])
		}
	}
	return &c.slots[(h*0x9E3779B97F4A7C15)>>(64-4)]
}

// srcOf returns the address of the first element of names.
func srcOf(names []string) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(names)))
}

// srcSlot returns the bySrc slot of the list at address src.
func (c *setCache[K]) srcSlot(src uintptr) *atomic.Pointer[laneSet[K]] {
	return &c.bySrc[(uint64(src)*0x9E3779B97F4A7C15)>>(64-4)]
}

// sameNames reports whether a and b hold the same strings by pointer and
// length: if so they are equal; if not they may still be.
func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) || unsafe.StringData(a[i]) != unsafe.StringData(b[i]) {
			return false
		}
	}
	return true
}

// lookup returns the resolved set for names, or nil.
func (c *setCache[K]) lookup(names []string) *laneSet[K] {
	// The same slice again, unchanged (its strings are checked, since the
	// caller may have changed them in place).
	src := srcOf(names)
	if s := c.srcSlot(src).Load(); s != nil && s.src == src && sameNames(s.names, names) {
		return s
	}
	s := c.slot(names).Load()
	if s == nil || len(s.names) != len(names) {
		return nil
	}
	for i, n := range names {
		// Equal strings that share their bytes (a literal, or the same
		// slice again) compare by pointer, without reading the bytes.
		if s.names[i] != n {
			return nil
		}
	}
	return s
}

// store remembers the resolution of names if its slot is free, in the
// slot and in bySrc.
func (c *setCache[K]) store(names []string, lanes []*laneEntry[K]) {
	p := c.slot(names)
	if p.Load() != nil {
		return
	}
	src := srcOf(names)
	s := &laneSet[K]{names: slices.Clone(names), lanes: lanes, src: src, fixedMax: -1, plain: plainLanes(lanes)}
	for i, e := range lanes {
		m := e.fixedMax.Load()
		if m < 0 {
			s.fixedMax = -1
			break
		}
		if i == 0 || m < s.fixedMax {
			s.fixedMax = m
		}
	}
	if p.CompareAndSwap(nil, s) {
		c.srcSlot(src).Store(s)
	}
}

// plainLanes returns the number of lanes before the first rate lane
// (lanes is in canonical order: rate lanes come last).
func plainLanes[K comparable](lanes []*laneEntry[K]) int {
	n := 0
	for n < len(lanes) && lanes[n].kind != Rate {
		n++
	}
	return n
}

// resolve fills g with the lanes named, in canonical order, with
// their weights, and refuses what could never be granted. It takes nothing.
// A list already resolved against the current table comes from its cache;
// another is looked up name by name, sorted, and cached if its slot is
// free. resolve allocates only on a cache miss, for more than inlineLanes
// lanes, or on error.
//
// Names are sorted as ranks (their indexes in the table's canonical order)
// in a local array: moving pointers would cost a write barrier each while
// the GC runs. Only the final list is written to the grant.
func (q *Queue[K]) resolve(g *grant[K], names []string, opts []AcquireOption) error {
	if q.closed.Load() {
		return ErrClosed
	}
	if len(names) == 0 {
		return ErrNoLanes
	}
	w := int64(1)
	laneWeights := false
	for _, o := range opts {
		if o.lane == "" {
			w = o.n
		} else {
			laneWeights = true
		}
	}
	g.weight = w
	tbl := q.table.Load()
	var lanes []*laneEntry[K]
	fixedMax := int64(-1)
	if s := tbl.sets.lookup(names); s != nil {
		lanes, fixedMax, g.plain = s.lanes, s.fixedMax, s.plain
	} else {
		var err error
		if lanes, err = tbl.sort(names); err != nil {
			return err
		}
		g.plain = plainLanes(lanes)
	}
	var hs []held[K]
	if len(lanes) > inlineLanes {
		// A variable of its own: escape analysis is flow-insensitive, and
		// storing hs, which may point into g, in g would move g to the heap.
		more := make([]held[K], len(lanes))
		g.more, hs = more, more
	} else {
		hs = g.inline[:len(lanes)]
		g.n = uint8(len(lanes))
	}
	for i, e := range lanes {
		hs[i].e, hs[i].n = e, w
	}
	if laneWeights {
		if err := applyLaneWeights(hs, opts); err != nil {
			return err
		}
	} else if w < 1 || fixedMax < 0 || w > fixedMax {
		return checkWeights(hs)
	}
	return nil
}

// sort resolves names through the name map and sorts them into canonical
// order; it caches the result if the slot is free.
func (tbl *laneTable[K]) sort(names []string) ([]*laneEntry[K], error) {
	var rankBuf [inlineLanes]int
	ranks := rankBuf[:0]
	if len(names) > inlineLanes {
		ranks = make([]int, 0, len(names))
	}
	for _, name := range names {
		r, ok := tbl.byName[name]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownLane, name)
		}
		// Insertion sort: lists are short.
		i := len(ranks)
		ranks = append(ranks, 0)
		for i > 0 && ranks[i-1] > r.rank {
			ranks[i] = ranks[i-1]
			i--
		}
		if i > 0 && ranks[i-1] == r.rank {
			return nil, fmt.Errorf("%w: %q named twice", ErrDuplicateLane, name)
		}
		ranks[i] = r.rank
	}
	lanes := make([]*laneEntry[K], len(ranks))
	for i, r := range ranks {
		lanes[i] = tbl.ordered[r]
	}
	tbl.sets.store(names, lanes)
	return lanes, nil
}

// applyLaneWeights sets the weights of WithLaneWeight and checks every
// lane's weight.
func applyLaneWeights[K comparable](hs []held[K], opts []AcquireOption) error {
	for _, o := range opts {
		if o.lane == "" {
			continue
		}
		found := false
		for i := range hs {
			if hs[i].e.name == o.lane {
				hs[i].n, found = o.n, true
			}
		}
		if !found {
			return fmt.Errorf("%w: %q has a weight but is not named", ErrUnknownLane, o.lane)
		}
	}
	return checkWeights(hs)
}

// checkWeights refuses a weight below 1 or above a lane's MaxWeight.
func checkWeights[K comparable](hs []held[K]) error {
	for i := range hs {
		h := &hs[i]
		if h.n < 1 {
			return fmt.Errorf("lanequeue: lane %q: weight %d: %w", h.e.name, h.n, ErrInvalidWeight)
		}
		if m := h.e.lane.MaxWeight(); h.n > m {
			return fmt.Errorf("lanequeue: lane %q: weight %d above %d: %w", h.e.name, h.n, m, ErrTooHeavy)
		}
	}
	return nil
}
