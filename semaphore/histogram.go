package semaphore

import (
	"math"
	"time"

	"github.com/sessionlane/lanes/internal/hist"
)

// HistogramBuckets is the number of buckets of a [Histogram]: one per
// bound of [HistogramBounds], and one for the durations above the last.
const HistogramBuckets = hist.Buckets

// HistogramBounds returns the upper bounds of the buckets of every
// [Histogram] of the lanes packages, ascending, each inclusive: 1µs, 2µs,
// 5µs, 10µs and on in 1-2-5 steps to 100s (25 bounds). The bounds are
// fixed, so that histograms of different lanes and processes add up
// bucket by bucket, and a bucket's count is one atomic add.
func HistogramBounds() [HistogramBuckets - 1]time.Duration { return hist.Bounds }

// Histogram is a snapshot of a distribution of durations in the fixed
// buckets of [HistogramBounds]: Counts[i] counts the durations d with
// bound[i-1] < d <= bound[i] (Counts[0] those up to 1µs, 0 included), and
// Counts[HistogramBuckets-1] those above 100s. Count is the sum of Counts,
// Sum the total of the durations (it wraps past 2^63 ns, 292 years, in
// all). The zero Histogram is empty. It is a value: copying it copies the
// counts.
//
// A Histogram read while the semaphore is in use is not taken at one
// instant: an observation in flight may be in Count and not yet in Sum.
type Histogram struct {
	Counts [HistogramBuckets]uint64
	Count  uint64
	Sum    time.Duration
}

// Bounds returns [HistogramBounds], for code that has a Histogram at hand.
func (h *Histogram) Bounds() [HistogramBuckets - 1]time.Duration { return hist.Bounds }

// Add adds the counts and sum of o to h: the histogram of two lanes, or of
// two processes, taken together.
func (h *Histogram) Add(o Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Count += o.Count
	h.Sum += o.Sum
}

// Mean returns Sum/Count, or 0 for an empty histogram.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Quantile estimates the q-quantile (0 <= q <= 1; 0.99 is the 99th
// percentile) of the durations: it finds the bucket that holds the rank
// q*Count and interpolates linearly within it, as Prometheus'
// histogram_quantile does, so the estimate is off by at most the bucket's
// width (a factor of 2 to 2.5). A rank in the last bucket, above 100s,
// returns 100s. It returns 0 for an empty histogram, and NaN q or one out
// of [0, 1] is clamped into it.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	if math.IsNaN(q) || q < 0 {
		q = 0
	}
	q = min(q, 1)
	rank := q * float64(h.Count)
	var below uint64 // observations in the buckets before i
	for i, c := range h.Counts {
		if c == 0 || float64(below+c) < rank {
			below += c
			continue
		}
		if i == len(hist.Bounds) {
			return hist.Bounds[i-1]
		}
		lo := time.Duration(0)
		if i > 0 {
			lo = hist.Bounds[i-1]
		}
		hi := hist.Bounds[i]
		frac := (rank - float64(below)) / float64(c)
		return lo + time.Duration(frac*float64(hi-lo))
	}
	return hist.Bounds[len(hist.Bounds)-1]
}

// Timings are the wait-time and hold-time distributions of a semaphore
// made [WithHistograms] (also of a keyed semaphore and a lane of package
// lanequeue, which embed them in their Stats likewise). Without the option
// Enabled is false and both histograms are empty.
//
// WaitTime holds one observation per grant that reached its caller (its
// Count is Acquired once the calls have returned): the time it waited in
// line, on the system clock, and 0 for a grant that did not queue. It
// counts no wait that ended without a grant (those are Cancelled,
// TimedOut or Failed). HoldTime holds one observation per first release
// (its Count is Released): the time from the grant to the release, read
// from a clock that is right to about a millisecond, so that timing a
// hold costs the uncontended path an atomic load where the system clock
// would cost more than the acquire and release themselves. Below a
// millisecond a hold is therefore counted as 0 or about 1ms, in
// proportion to its length: the Sum stays right on average, the
// quantiles below 1ms do not. With a fake clock ([WithClock]) both are
// exact.
type Timings struct {
	Enabled  bool // the semaphore was made WithHistograms
	WaitTime Histogram
	HoldTime Histogram
}

// WithHistograms records the wait-time and hold-time distributions of the
// semaphore, reported in [Stats].Timings. Off by default; on, each
// acquire and release costs a clock read and a few atomic adds, and no
// allocation.
func WithHistograms() Option { return func(c *config) { c.histograms = true } }

// histogramOf returns the snapshot of r.
func histogramOf(r *hist.Recorder) Histogram {
	var h Histogram
	count, sum := r.Read(&h.Counts)
	h.Count, h.Sum = count, time.Duration(sum)
	return h
}

// timingsOf returns the snapshot of tm, with zero waits counted in for
// the grants (acquired - waited) that did not queue; tm nil gives the zero
// Timings.
func timingsOf(tm *hist.Timings, acquired, waited uint64) Timings {
	if tm == nil {
		return Timings{}
	}
	t := Timings{Enabled: true, WaitTime: histogramOf(&tm.Wait), HoldTime: histogramOf(&tm.Hold)}
	if acquired > waited {
		t.WaitTime.Counts[0] += acquired - waited
		t.WaitTime.Count += acquired - waited
	}
	return t
}
