package hist

import (
	"math/bits"
	"sync/atomic"
)

// A wait is timed on the system clock, two readings of it, which on a
// contended lane cost more than the rest of the timing (docs/internals.md,
// "hist: one wait in N"). So a lane times all its waits only at first;
// after that, one wait in SampleEvery, and its wait histogram is the
// sample's, scaled to the number of waits (Scale). A fake clock times
// every wait. Holds are sampled alike, with a Sampler of their own: a hold
// costs two coarse readings and a recording, which on a contended lane
// were most of what the histograms added ("hist: one hold in N").
const (
	// SampleEvery is N in "one wait in N".
	SampleEvery = 16
	// exactWaits is how many waits a lane times before it samples: a lane
	// that has waited this few times has an exact histogram.
	exactWaits = 1024
)

// Sampler picks which waits (or holds) of one lane are timed. The zero
// Sampler is ready to use; it is safe for concurrent use.
type Sampler struct {
	early atomic.Uint32 // waits timed as the lane's first ones, up to exactWaits
	every bool          // time every wait: the ablation's baseline (TimeEvery)
}

// TimeEvery makes s time every wait, as before sampling: the baseline of
// the ablation benchmark (semaphore's BenchmarkTimings, hist=on-every). It
// must be called before s is used.
func (s *Sampler) TimeEvery() { s.every = true }

// Timed reports whether a wait on clock c is timed. rot is a count that
// moves on by one for each wait of the caller's waiter (waitq.Waiter.Uses;
// for a hold, each grant through its token: the token's generation):
// waiters and tokens are reused in no order that a wait's or a hold's
// length decides, so one in SampleEvery of their uses is a fair sample,
// picked with no shared write.
// The lane's first exactWaits waits are all timed (at most a few more
// when they race), with one load of a word that is written no more once
// they have passed.
func (s *Sampler) Timed(c *Clock, rot uint32) bool {
	if c.fake != nil || rot%SampleEvery == 0 || s.every {
		return true
	}
	if s.early.Load() < exactWaits {
		s.early.Add(1)
		return true
	}
	return false
}

// Scale makes counts, with their sum (count and sum as Recorder.Read
// returned them), a histogram of `to` observations in the same
// proportions: the sample of timed waits scaled to every wait. The
// counts' total becomes exactly to (the remainders rounded by largest
// fraction, ties to the lower bucket); the sum is scaled alike. With
// count == to, or count == 0 (nothing to scale from), it changes nothing
// and returns count and sum.
func Scale(counts *[Buckets]uint64, count, sum, to uint64) (uint64, uint64) {
	if count == 0 || count == to {
		return count, sum
	}
	var rem [Buckets]uint64
	var total uint64
	for i, c := range counts {
		hi, lo := bits.Mul64(c, to)
		q, r := bits.Div64(hi, lo, count) // c <= count, so hi < count
		counts[i], rem[i] = q, r
		total += q
	}
	for total < to { // at most Buckets times: each remainder is under count
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		counts[best]++
		rem[best] = 0
		total++
	}
	hi, lo := bits.Mul64(sum, to)
	if hi >= count { // past 2^64 ns: Sum wraps, as documented
		return to, sum / count * to
	}
	s, _ := bits.Div64(hi, lo, count)
	return to, s
}

// ReadScaled is Read with the counts and sum scaled to `to` (Scale): the
// snapshot of a sample of `to` waits or holds.
func (r *Recorder) ReadScaled(counts *[Buckets]uint64, to uint64) (count, sum uint64) {
	count, sum = r.Read(counts)
	return Scale(counts, count, sum, to)
}
