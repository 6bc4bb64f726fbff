package semaphore

import (
	"math/bits"
)

// Stats is a snapshot of a semaphore.
type Stats struct {
	Capacity      int64 // current capacity
	Available     int64 // permits free now (negative after a shrink, until holders release)
	Held          int64 // weight of the permits out: Capacity - Available
	Waiters       int   // callers waiting
	WaitingWeight int64 // total weight they wait for (math.MaxInt64 if more)
	Closed        bool  // Close has been called

	Counters // since New
	Timings  // WithHistograms: the wait-time and hold-time distributions
}

// Counters are the event counts of every lanes package. An acquire call is
// counted in exactly one of Acquired, Cancelled, TimedOut, Rejected and
// Failed; TryAcquire's false in none.
type Counters struct {
	Acquired       uint64 // grants that reached the caller (not those given back)
	Released       uint64 // first releases
	Waited         uint64 // grants, of Acquired, that waited in line
	Cancelled      uint64 // calls ended by their context, grants given back included
	TimedOut       uint64 // calls ended by ErrWaitTooLong
	Rejected       uint64 // calls refused without waiting
	Failed         uint64 // waiters failed by Close or a shrink
	DoubleReleases uint64 // Release calls on permits released already
}

// Stats returns a snapshot; a release in flight may show as released and
// held, and its hold in Timings only once its Release has returned (the
// hold is recorded after the permit went back: a caller that the release
// unblocked may take a snapshot before).
func (s *Weighted) Stats() Stats {
	s.mustBeMade()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	var released uint64
	for i := range s.gens {
		released += s.gens[i].Load()
	}
	released += s.spareFreed
	out := uint64(inlineTokens-bits.OnesCount64(st&tokenMask)) + uint64(s.spareOut)
	c := s.capacity.Load()
	a := avail(st)
	return Stats{
		Capacity:      c,
		Available:     a,
		Held:          c - a,
		Waiters:       s.waiters,
		WaitingWeight: s.waitingWeight(),
		Closed:        s.closed,
		Counters: Counters{
			Acquired:       released + out,
			Released:       released,
			Waited:         s.grantedWait + s.bargeWaited(),
			Cancelled:      s.cancelled,
			TimedOut:       s.timedOut,
			Rejected:       s.rejected,
			Failed:         s.failed,
			DoubleReleases: s.doubleRel.Load(),
		},
		Timings: timingsOf(s.tm, released+out, s.grantedWait+s.bargeWaited(), released),
	}
}
