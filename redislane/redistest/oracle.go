package redistest

import "sort"

// Span is one permit's time in use, for the oracle [MaxInUse]: from Start
// to End, in nanoseconds of a clock shared by every process that reports
// spans, and its weight W.
type Span struct {
	Start, End int64
	W          int64
}

// MaxInUse returns the most weight in use at once: the oracle that
// redislane's tests, fleetsim and lockbench hold against the capacity. At
// equal times a start counts before an end, so that touching spans count as
// overlapping (the oracle errs towards seeing too much, never too little).
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

// Percentile returns the q-quantile (0 <= q <= 1) of sorted, an ascending
// slice, by the nearest rank below; 0 for an empty slice.
func Percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
