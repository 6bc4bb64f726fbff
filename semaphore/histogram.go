package semaphore

import (
	"math"
	"time"

	"github.com/sessionlane/lanes/internal/hist"
)

// HistogramBuckets is the number of buckets of a [Histogram].
const HistogramBuckets = hist.Buckets

// HistogramBounds returns the inclusive upper bounds of every [Histogram]'s
// buckets: 1µs, 2µs, 5µs, 10µs, ... 100s, fixed so that histograms add up.
func HistogramBounds() [HistogramBuckets - 1]time.Duration { return hist.Bounds }

// Histogram is a snapshot of durations in the buckets of [HistogramBounds]
// and one above. The zero Histogram is empty.
type Histogram struct {
	Counts [HistogramBuckets]uint64
	Count  uint64
	Sum    time.Duration
}

// Quantile estimates the q-quantile by linear interpolation in its bucket,
// as Prometheus does (off by at most the bucket's width); 0 if empty.
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

// Timings are the wait and hold times of a lane made with histograms. Hold
// times come from a clock right to about 1ms, cheap on the fast path: a
// hold under 1ms counts as 0 or 1ms in proportion, right on average. Wait
// times come from the system clock. A lane times all its first waits and
// holds (about a thousand of each), then one in 16, and each histogram is
// that sample scaled to every wait or release: its Count exact once the
// calls have returned, its buckets and Sum in the sample's proportions
// (with a fake [WithClock] every wait and hold is timed). A hold is
// recorded by its Release after the permit went back, so a caller that
// the release unblocked may see it released before its hold is counted.
type Timings struct {
	Enabled  bool // the semaphore was made WithHistograms
	WaitTime Histogram
	HoldTime Histogram
}

// WithHistograms records [Timings], at a few atomic adds per call.
func WithHistograms() Option { return func(c *config) { c.histograms = true } }

// scaled returns the snapshot of r, a sample of `to` waits or holds (one in
// hist.SampleEvery, after a lane's first ones), scaled to them: its Count
// exact, its buckets and Sum in the sample's proportions (hist.Scale).
func scaled(r *hist.Recorder, to uint64) Histogram {
	var h Histogram
	count, sum := r.ReadScaled(&h.Counts, to)
	h.Count, h.Sum = count, time.Duration(sum)
	return h
}

// timingsOf returns the snapshot of tm, with zero waits counted in for
// the grants (acquired - waited) that did not queue; tm nil gives the zero
// Timings. released is the grants released.
func timingsOf(tm *hist.Timings, acquired, waited, released uint64) Timings {
	if tm == nil {
		return Timings{}
	}
	t := Timings{Enabled: true, WaitTime: scaled(&tm.Wait, waited), HoldTime: scaled(&tm.Hold, released)}
	if acquired > waited {
		t.WaitTime.Counts[0] += acquired - waited
		t.WaitTime.Count += acquired - waited
	}
	return t
}
