// Package oracle computes, from the spans in which permits were held, the
// most weight that was ever in use at once: the figure that the Redis
// lanes' tests and fleetsim hold against the limit.
package oracle

import "sort"

// Span is one permit's time in use, in nanoseconds of a clock shared by
// every process that reports spans, and its weight.
type Span struct {
	Start, End int64
	W          int64
}

// MaxInUse returns the most weight in use at once. At equal times a start
// counts before an end, so that touching spans count as overlapping (the
// oracle errs towards seeing too much, never too little).
func MaxInUse(spans []Span) int64 {
	type ev struct{ t, d int64 }
	evs := make([]ev, 0, 2*len(spans))
	for _, s := range spans {
		evs = append(evs, ev{s.Start, s.W}, ev{s.End, -s.W})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d > evs[j].d
	})
	var cur, top int64
	for _, e := range evs {
		cur += e.d
		top = max(top, cur)
	}
	return top
}
