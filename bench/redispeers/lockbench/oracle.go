package lockbench

import "github.com/sessionlane/lanes/redislane/redistest"

// Span is one holder's time in the critical section, in nanoseconds of
// [Now]: from the return of its lock call to the earlier of its unlock call
// and the end of the validity the lock promised.
type Span struct{ Start, End int64 }

// MostInUse returns the most spans that overlap at any instant. At equal
// times a start counts before an end, so spans that touch count as
// overlapping: the oracle errs towards seeing two holders, never towards
// missing them. It is redistest.MaxInUse with every weight 1.
func MostInUse(spans []Span) int {
	ws := make([]redistest.Span, len(spans))
	for i, s := range spans {
		ws[i] = redistest.Span{Start: s.Start, End: s.End, W: 1}
	}
	return int(redistest.MaxInUse(ws))
}
