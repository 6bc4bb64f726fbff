// Package hist records the wait-time and hold-time distributions of the
// lanes semaphores: fixed buckets counted with atomic adds, no lock and no
// allocation. The snapshot type users see is semaphore.Histogram; this
// package holds what package semaphore and package keyedsem share to fill
// it.
package hist

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/stripe"
)

// Buckets is the number of buckets: one per bound, and one above the last.
const Buckets = len(Bounds) + 1

// Bounds are the buckets' upper bounds, inclusive, in 1-2-5 steps from
// 1µs to 100s: round numbers on a dashboard, a factor of 2 to 2.5 between
// neighbours, so that a quantile read off the buckets is within that
// factor whatever the scale of the lane (microsecond hand-offs, or
// requests of a minute).
var Bounds = [...]time.Duration{
	1 * time.Microsecond, 2 * time.Microsecond, 5 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
	1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2 * time.Second, 5 * time.Second,
	10 * time.Second, 20 * time.Second, 50 * time.Second,
	100 * time.Second,
}

// first[b] is the first bucket whose bound is at least 1<<(b-1), the
// smallest duration of bits.Len64 b. Neighbouring bounds are at least a
// factor of 2 apart, so the durations of one bit length, which span less
// than a factor of 2, meet at most one bound: a duration of length b is in
// bucket first[b] or the one after it.
var first = func() (f [65]uint8) {
	for b := range f {
		lo := time.Duration(0)
		if b > 0 {
			lo = time.Duration(uint64(1) << (b - 1))
		}
		i := 0
		for i < len(Bounds) && lo > 0 && Bounds[i] < lo {
			i++
		}
		f[b] = uint8(i)
	}
	return f
}()

// Bucket returns the bucket of d: the first whose bound is at least d, or
// the last one. A negative d counts as 0.
func Bucket(d int64) int {
	if d <= 0 {
		return 0
	}
	i := int(first[bits.Len64(uint64(d))])
	if i < len(Bounds) && d > int64(Bounds[i]) {
		i++
	}
	return i
}

// Recorder counts durations into the buckets. Its methods are safe for
// concurrent use; the zero Recorder is empty.
//
// It is striped: a goroutine counts in the stripe that a hash of its stack
// address picks, so that goroutines observing at once on different cores
// rarely write to one cache line (a shared line would cross between the
// cores on every observation of a contended semaphore). Read adds the
// stripes up.
type Recorder struct {
	stripes [stripes]stripeCounts
}

// stripes is the number of stripes of a Recorder, picked by stripe.Hint.
const (
	stripeBits = 3
	stripes    = 1 << stripeBits
)

// stripeCounts is one stripe of a Recorder, padded to whole cache lines.
type stripeCounts struct {
	counts [Buckets]atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
	_      [(64 - (Buckets+1)*8%64) % 64]byte
}

// Observe counts one duration of d nanoseconds (a negative one as 0).
func (r *Recorder) Observe(d int64) {
	d = max(d, 0)
	st := &r.stripes[stripe.Hint(stripeBits)]
	st.counts[Bucket(d)].Add(1)
	st.sum.Add(uint64(d))
}

// Read copies the counts into counts and returns their total and the sum
// of the durations, in nanoseconds. Under concurrent Observe the counts
// and the sum are read one after the other, not at one instant.
func (r *Recorder) Read(counts *[Buckets]uint64) (count, sum uint64) {
	*counts = [Buckets]uint64{}
	for i := range r.stripes {
		st := &r.stripes[i]
		for j := range st.counts {
			c := st.counts[j].Load()
			counts[j] += c
			count += c
		}
		sum += st.sum.Load()
	}
	return count, sum
}

// epoch is the origin of the real clocks' readings.
var epoch = time.Now()

// Timings are a semaphore's two recorders. A semaphore made with
// histograms has one (a nil *Timings means off).
type Timings struct {
	Wait, Hold Recorder
	// Sampler picks the waits timed into Wait, and Holds the holds
	// timed into Hold (see Sampler); a snapshot scales each to the number
	// of waits or releases (Scale).
	Sampler, Holds Sampler
}

// Clock is the time source of waits and holds: the real clocks, or a fake
// one (tests). The zero Clock is the real clocks.
//
// Two real clocks: a wait is timed on the system clock (a waiter parks and
// is woken, which costs far more than the two readings), a hold, and a
// waiter's arrival, on the CPU's counter where the kernel keeps its time on
// it (see Arrival; the system clock elsewhere). A fake clock times all
// three.
type Clock struct {
	fake    clock.Clock // nil: the real clocks
	epoch   time.Time   // the fake clock's origin
	precise bool        // arrivals are Precise readings (the ablation's knob; see Arrival)
}

// PreciseArrivals makes c's arrivals Precise readings, as they were
// before the counter, for the ablation benchmarks.
func (c *Clock) PreciseArrivals() { c.precise = true }

// NewClock returns the clock of a semaphore on cl (nil or clock.Real: the
// real clocks).
func NewClock(cl clock.Clock) Clock {
	if _, real := cl.(clock.Real); cl == nil || real {
		return Clock{}
	}
	return Clock{fake: cl, epoch: cl.Now()}
}

// Precise returns the time for a wait's start and end, in nanoseconds
// since an origin of the clock's.
func (c *Clock) Precise() int64 {
	if c.fake != nil {
		return int64(c.fake.Now().Sub(c.epoch))
	}
	return int64(time.Since(epoch)) // one monotonic reading
}

// Stamp returns the time for a hold's start and end, in nanoseconds since
// Precise's origin: the counter's reading, as an arrival's (see Arrival), so
// a Stamp may be a little behind a Precise reading taken before it.
//
// Holds were stamped on a coarse clock (package coarse), an atomic load
// that a timer moves on every millisecond while it is read often. Sampled
// one hold in SampleEvery, they no longer need it, and its timer cost every
// scheduling round of a contended lane a timer check (a clock read), more
// than the counter's two reads in SampleEvery holds cost (docs/internals.md,
// "hold stamps from the counter").
func (c *Clock) Stamp() int64 {
	if c.fake != nil {
		return int64(c.fake.Now().Sub(c.epoch))
	}
	return counterNow()
}

// Time turns a reading of Precise or Stamp back into a time.
func (c *Clock) Time(reading int64) time.Time {
	if c.fake != nil {
		return c.epoch.Add(time.Duration(reading))
	}
	return epoch.Add(time.Duration(reading))
}
