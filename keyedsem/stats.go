package keyedsem

import (
	"time"

	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/semaphore"
)

// Stats is a snapshot of a keyed semaphore.
type Stats struct {
	Keys     int   // entries alive (Len)
	Capacity int64 // per-key capacity: one key's, not the sum over the keys
	Held     int64 // weight of the permits out, over all keys (so it may pass Capacity)
	Waiters  int   // callers waiting, over all keys
	Closed   bool  // Close has been called

	// Counters since New, as package semaphore defines them. Keyed
	// semaphores have no maximum wait: TimedOut stays 0.
	semaphore.Counters
	semaphore.Timings        // WithHistograms: the wait and hold times, over all keys
	Created           uint64 // entries made
	Evicted           uint64 // entries removed: idle ones evicted, and with idle timeout 0 those dropped at their last release
	HoldsRunOut       uint64 // WithReorderHold: callers that went when their hold ran out, a predecessor still missing
}

// Stats returns a snapshot, in time proportional to the entries. Under
// concurrent use its fields are not read at one instant; once the calls
// have returned, Acquired - Released permits are out, weighing Held, and
// Created - Evicted == Keys.
func (s *Keyed[K]) Stats() Stats {
	s.mustBeMade()
	st := Stats{Capacity: s.capacity, Closed: s.closed.Load()}
	s.m.RangeRelaxed(func(_ K, e *entry[K]) bool {
		if w := e.state.Load(); w&(busyBit|deadBit) == busyBit {
			st.Held += s.capacity - avail(w)
		}
		return true
	})
	for i := range s.stripes {
		st.Released += s.stripes[i].released.Load()
	}
	for i := range s.stripes {
		st.Acquired += s.stripes[i].acquired.Load()
		st.Waited += s.stripes[i].waited.Load()
	}
	st.Keys = s.Len()
	st.Waiters = int(s.waiters.Load())
	st.Cancelled = s.cancelled.Load()
	st.Rejected = s.rejected.Load()
	st.Failed = s.failed.Load()
	st.Evicted = s.evicted.Load()
	st.Created = s.created.Load()
	st.DoubleReleases = s.doubleRel.Load()
	st.HoldsRunOut = s.holdsOut.Load()
	if s.tm != nil {
		st.Timings = semaphore.Timings{Enabled: true, WaitTime: scaled(&s.tm.Wait, st.Waited), HoldTime: scaled(&s.tm.Hold, st.Released)}
		if st.Acquired > st.Waited { // the grants that did not queue waited 0
			st.WaitTime.Counts[0] += st.Acquired - st.Waited
			st.WaitTime.Count += st.Acquired - st.Waited
		}
	}
	return st
}

// scaled returns the snapshot of r, a sample of `to` waits or holds,
// scaled to them (see hist.Sampler and hist.Scale).
func scaled(r *hist.Recorder, to uint64) semaphore.Histogram {
	var h semaphore.Histogram
	count, sum := r.ReadScaled(&h.Counts, to)
	h.Count, h.Sum = count, time.Duration(sum)
	return h
}
