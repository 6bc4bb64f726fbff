package lanequeue

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
)

// Waiter is one caller waiting for one lane, listed by [Queue.Waiters].
type Waiter[K comparable] struct {
	Lane   string // the lane waited for
	Kind   Kind   // the lane's kind
	Key    K      // the key of the call
	Weight int64  // the permits asked of the lane
	// Position is 1 for the first to come of the lane's waiters (of the
	// key, on a keyed lane), 0 on a rate lane and for a caller waiting out
	// the lane's cooldown (which holds the lane, in no line): the order of
	// service on a FIFO lane only.
	Position int
	Since    time.Time // when the caller began to wait for the lane, to about a millisecond
	// Holding is the lanes the caller holds already: the ones before this
	// one in the canonical order, or, waiting out this lane's cooldown,
	// its keyed and global lanes (this one among them, if it is one).
	Holding int
}

// watch is what a queue keeps to list its callers and to report on them:
// its hooks, the arrival count of waits, and a test's clock.
type watch[K comparable] struct {
	hooks atomic.Pointer[Hooks[K]] // nil: no hooks (SetHooks)
	seq   atomic.Uint64            // arrivals at a lane on the slow path, for Waiter.Position
	fake  clock.Clock              // a test's clock; nil: the queue's coarse clock
	epoch time.Time                // the test clock's origin
}

// stamp reads the queue's clock: the coarse clock, or a test's.
func (q *Queue[K]) stamp() int64 {
	if f := q.watch.fake; f != nil {
		return int64(f.Now().Sub(q.watch.epoch))
	}
	return q.clock.Read()
}

// timeOf turns a reading of stamp into a time.
func (q *Queue[K]) timeOf(reading int64) time.Time {
	if q.watch.fake != nil {
		return q.watch.epoch.Add(time.Duration(reading))
	}
	return q.clock.Time(reading)
}

// tryFirst reports whether acquireFrom tries e without waiting before it
// lists the call as waiting: the lanes of this package, whose try costs
// what the fast path of their acquire does. A lane of another package
// (Redis) may pay a round trip for a try: the call is listed before it
// asks.
func (e *laneEntry[K]) tryFirst() bool {
	if e.keyed != nil || e.global != nil {
		return true
	}
	_, fair := e.lane.(*fairLane[K])
	return fair
}

// waitFor lists the call of g, for key, as waiting for its lane i, the
// lanes before i held: the slow path of acquireFrom, taken once a lane
// could not be had at once. With cool, the call waits out lane i's
// cooldown instead, holding every lane before the rate lanes (lane i too,
// if it is one of them). The first time it takes a record for the call
// (the one publish will fill), later it moves the record on. It returns
// the reading of the clock that starts the wait.
func (q *Queue[K]) waitFor(key K, g *grant[K], i int, cool bool) int64 {
	now := q.stamp()
	seq := q.watch.seq.Add(1)
	if r := g.rec; r != nil {
		r.home.mu.Lock()
		r.at, r.cool, r.atSince, r.seq = i, cool, now, seq
		r.home.mu.Unlock()
		return now
	}
	st := &q.holders.stripes[stripeHint()]
	st.mu.Lock()
	r := st.take(q)
	r.key, r.since = key, now
	r.pending, r.at, r.cool, r.atSince, r.seq = true, i, cool, now, seq
	r.g.weight, r.g.n, r.g.plain, r.g.more = g.weight, g.n, g.plain, g.more
	for j := range g.n {
		r.g.inline[j] = g.inline[j]
	}
	st.mu.Unlock()
	g.rec = r
	return now
}

// noWait is the start of the wait of a lane that did not wait (see
// takeRateTail): no reading of the clock.
const noWait = math.MinInt64

// abandon gives back the record of a call that failed after waitFor.
func (q *Queue[K]) abandon(g *grant[K]) {
	r := g.rec
	if r == nil {
		return
	}
	g.rec = nil
	r.home.mu.Lock()
	r.pending, r.cool = false, false
	r.home.retire(r)
	r.home.mu.Unlock()
}

// Waiters lists this queue's callers waiting now, one per caller and lane,
// by lane and position; a call is listed while a lane makes it wait, or
// while it waits out a lane's cooldown ([Queue.Cooldown]), from a moment
// before the lane has it in line (the lane's [Queue.Stats] count it once
// it has). It is gathered stripe by stripe, not at one instant.
func (q *Queue[K]) Waiters() []Waiter[K] {
	type entry struct {
		w    Waiter[K]
		seq  uint64
		rank int  // the lane's place in the canonical order
		cool bool // waiting out the lane's cooldown: in no line
	}
	var found []entry
	for i := range q.holders.stripes {
		st := &q.holders.stripes[i]
		st.mu.Lock()
		for r := st.all; r != nil; r = r.next {
			if !r.pending {
				continue
			}
			hs := r.g.held()
			since := q.timeOf(r.atSince)
			at, end, holding := r.at, r.at+1, r.at
			switch {
			case r.cool: // the cooling lane alone
				holding = r.g.plain
			case at >= r.g.plain: // the rate lanes, reserved together
				end = len(hs)
			}
			for j := at; j < end && j < len(hs); j++ {
				h := &hs[j]
				found = append(found, entry{
					w:    Waiter[K]{Lane: h.e.name, Kind: h.e.kind, Key: r.key, Weight: h.n, Since: since, Holding: holding},
					seq:  r.seq,
					cool: r.cool,
				})
			}
		}
		st.mu.Unlock()
	}
	t := q.tbl()
	for i := range found {
		found[i].rank = slices.IndexFunc(t.ordered, func(e *laneEntry[K]) bool { return e.name == found[i].w.Lane })
	}
	slices.SortStableFunc(found, func(a, b entry) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	// Positions, in the order of arrival at each line: a keyed lane has
	// a line per key, a global lane one.
	type line struct {
		lane string
		key  K
	}
	lens := map[line]int{}
	first := map[line]int{} // a keyed line's first caller, to list each line together
	for i := range found {
		w := &found[i].w
		l := line{lane: w.Lane}
		if w.Kind == Keyed {
			l.key = w.Key
		}
		if w.Kind == Rate || found[i].cool {
			continue
		}
		lens[l]++
		w.Position = lens[l]
		if _, ok := first[l]; !ok {
			first[l] = i
		}
	}
	lineOf := func(w *Waiter[K]) int {
		if w.Kind != Keyed {
			return 0
		}
		return first[line{w.Lane, w.Key}]
	}
	slices.SortStableFunc(found, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(lineOf(&a.w), lineOf(&b.w)), cmp.Compare(a.w.Position, b.w.Position))
	})
	out := make([]Waiter[K], len(found))
	for i := range found {
		out[i] = found[i].w
	}
	return out
}
