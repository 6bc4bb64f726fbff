package keyedsem

import "github.com/sessionlane/lanes/semaphore"

// Stats is a snapshot of a keyed semaphore.
type Stats struct {
	Keys     int   // entries alive (Len)
	Capacity int64 // per-key capacity
	Held     int64 // weight of the permits out, over all keys
	Waiters  int   // callers waiting, over all keys
	Closed   bool  // Close has been called

	// Counters since New, as package semaphore defines them. Keyed
	// semaphores have no maximum wait: TimedOut stays 0.
	semaphore.Counters
	Created uint64 // entries made
	Evicted uint64 // entries removed: idle ones evicted, and with idle timeout 0 those dropped at their last release
}

// Stats returns a snapshot of the semaphore. Held is summed over the
// entries and the counters are striped, so under concurrent use the fields
// are not read at one instant: a release in flight may be counted as
// released and still held. Once the calls have returned, Acquired -
// Released is the number of permits out, Created - Evicted == Keys, and
// Held is the weight they hold. Stats takes time in proportion to the
// number of entries.
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
	return st
}
