package lockbench

import "sort"

// Span is one holder's time in the critical section, in nanoseconds of
// [Now]: from the return of its lock call to the earlier of its unlock call
// and the end of the validity the lock promised.
type Span struct{ Start, End int64 }

// MostInUse returns the most spans that overlap at any instant. At equal
// times a start counts before an end, so spans that touch count as
// overlapping: the oracle errs towards seeing two holders, never towards
// missing them.
func MostInUse(spans []Span) int {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(spans))
	for _, s := range spans {
		evs = append(evs, ev{s.Start, 1}, ev{s.End, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d > evs[j].d
	})
	cur, top := 0, 0
	for _, e := range evs {
		cur += e.d
		top = max(top, cur)
	}
	return top
}
