package lanequeue

import (
	"fmt"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// LaneSet is lanes of one Queue, resolved once by [Queue.Lanes] so that
// calls look up no names. It keeps the lanes it resolved, works only on its
// queue and is immutable, safe to share. The zero LaneSet names no lanes.
// Calls refuse another queue's set and the zero set with an error wrapping
// semaphore.ErrInvalidConfig.
type LaneSet[K comparable] struct {
	s *laneSet[K]
}

// laneSet is what a LaneSet points to. Immutable.
type laneSet[K comparable] struct {
	q     *Queue[K]       // the queue it belongs to
	lanes []*laneEntry[K] // canonical order
	// plain is the number of lanes before the first rate lane (an int: a
	// set may name any number of lanes).
	plain int
}

// errForeignSet is returned for a LaneSet that another queue prepared. A
// variable, so that a TryAcquireAll refused for it allocates nothing.
var errForeignSet = fmt.Errorf("lanequeue: the lane set was prepared by another queue: %w", semaphore.ErrInvalidConfig)

// Lanes resolves names into a [LaneSet], whatever their order. It returns
// an error wrapping semaphore.ErrInvalidConfig for no names, a name
// unknown or given twice, and semaphore.ErrClosed after Close.
func (q *Queue[K]) Lanes(names ...string) (LaneSet[K], error) {
	if q.closed.Load() {
		return LaneSet[K]{}, semaphore.ErrClosed
	}
	if len(names) == 0 {
		return LaneSet[K]{}, errNoLanes
	}
	tbl := q.tbl()
	// Ranks (indexes in the table's canonical order), insertion-sorted:
	// lists are short, and a duplicate shows as two equal neighbours.
	ranks := make([]int, 0, len(names))
	for _, name := range names {
		r, ok := tbl.byName[name]
		if !ok {
			return LaneSet[K]{}, fmt.Errorf("lanequeue: unknown lane %q: %w", name, semaphore.ErrInvalidConfig)
		}
		i := len(ranks)
		ranks = append(ranks, 0)
		for i > 0 && ranks[i-1] > r.rank {
			ranks[i] = ranks[i-1]
			i--
		}
		if i > 0 && ranks[i-1] == r.rank {
			return LaneSet[K]{}, fmt.Errorf("lanequeue: lane %q named twice: %w", name, semaphore.ErrInvalidConfig)
		}
		ranks[i] = r.rank
	}
	s := &laneSet[K]{q: q, lanes: make([]*laneEntry[K], len(ranks))}
	for i, r := range ranks {
		s.lanes[i] = tbl.ordered[r]
	}
	for s.plain < len(s.lanes) && s.lanes[s.plain].kind != Rate {
		s.plain++
	}
	return LaneSet[K]{s: s}, nil
}

// Names returns the names in canonical order, nil for the zero LaneSet.
func (ls LaneSet[K]) Names() []string {
	if ls.s == nil {
		return nil
	}
	out := make([]string, len(ls.s.lanes))
	for i, e := range ls.s.lanes {
		out[i] = e.name
	}
	return out
}

// resolve fills g with the lanes of ls, in canonical order, with their
// weights, and refuses what could never be granted: a set of no lanes or
// of another queue, a closed queue, a weight no lane could grant. It takes
// nothing, and allocates only for a set of more than inlineLanes lanes, or
// on error.
func (q *Queue[K]) resolve(g *grant[K], ls LaneSet[K], opts []semaphore.AcquireOption) error {
	s := ls.s
	if s == nil {
		return errNoLanes
	}
	if s.q != q {
		return errForeignSet
	}
	if q.closed.Load() {
		return semaphore.ErrClosed
	}
	w := int64(1)
	laneWeights := false
	for _, o := range opts {
		switch {
		case call.KindOf(o) != call.KindWeight: // the call's place in line: see turnOf
		case call.LaneOf(o) == "":
			w = call.NOf(o)
		default:
			laneWeights = true
		}
	}
	g.weight = w
	g.plain = s.plain
	var hs []held[K]
	if len(s.lanes) > inlineLanes {
		// A variable of its own: escape analysis is flow-insensitive, and
		// storing hs, which may point into g, in g would move g to the heap.
		more := make([]held[K], len(s.lanes))
		g.more, hs = more, more
	} else {
		hs = g.inline[:len(s.lanes)]
		g.n = uint8(len(s.lanes))
	}
	// fits: w is within every lane's MaxWeight as known without asking
	// the lane, so no lane need be asked. It is read on every call, not
	// when the set was made: a global lane's capacity may change at any
	// time.
	fits := w >= 1
	for i, e := range s.lanes {
		hs[i].e, hs[i].n = e, w
		if m := e.maxWeight(); m < 0 || w > m {
			fits = false
		}
	}
	if laneWeights {
		return applyLaneWeights(hs, opts)
	}
	if !fits {
		return checkWeights(hs)
	}
	return nil
}

// applyLaneWeights sets the weights of LaneWeight and checks every lane's
// weight.
func applyLaneWeights[K comparable](hs []held[K], opts []semaphore.AcquireOption) error {
	for _, o := range opts {
		if call.LaneOf(o) == "" || call.KindOf(o) != call.KindWeight {
			continue
		}
		found := false
		for i := range hs {
			if hs[i].e.name == call.LaneOf(o) {
				hs[i].n, found = call.NOf(o), true
			}
		}
		if !found {
			return fmt.Errorf("lanequeue: lane %q has a weight but is not in the set: %w", call.LaneOf(o), semaphore.ErrInvalidConfig)
		}
	}
	return checkWeights(hs)
}

// checkWeights refuses a weight below 1 or above a lane's MaxWeight.
func checkWeights[K comparable](hs []held[K]) error {
	for i := range hs {
		h := &hs[i]
		if h.n < 1 {
			return fmt.Errorf("lanequeue: lane %q: weight %d: %w", h.e.name, h.n, semaphore.ErrInvalidWeight)
		}
		if m := h.e.lane.MaxWeight(); h.n > m {
			// A LaneError, so that the lane's kind tells a caller whether a
			// retry may mend it (a global lane a controller shrank).
			return &LaneError{Lane: h.e.name, Kind: h.e.kind, Err: fmt.Errorf("weight %d above %d: %w", h.n, m, semaphore.ErrTooHeavy)}
		}
	}
	return nil
}
