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

// Counters are the counts of events that every lanes package keeps, each
// field with the same meaning in every package's Stats (a package that has
// no such event leaves its field at 0). Each acquire call that returns ends
// in exactly one of Acquired, Cancelled, TimedOut, Rejected or Failed;
// TryAcquire's false is counted in none (it is an answer, not a failure).
type Counters struct {
	// Acquired counts grants that reached the caller, with or without
	// waiting. A grant taken back because the waiter's context or
	// maximum wait ended first is not counted here (see Cancelled).
	Acquired uint64
	// Released counts first releases of granted permits.
	Released uint64
	// Waited counts the grants (of those in Acquired) that had to wait in
	// a queue.
	Waited uint64
	// Cancelled counts acquire calls that ended with their context's
	// error: before waiting, while waiting, or granted after the context
	// had ended (the grant is then given back, as if the waiter had left
	// first).
	Cancelled uint64
	// TimedOut counts acquire calls that ended with ErrWaitTooLong, the
	// package's own bound on waiting, counted like Cancelled.
	TimedOut uint64
	// Rejected counts acquire calls refused without waiting: invalid
	// weight, too heavy, closed, queue full, too many keys, a NaN key.
	Rejected uint64
	// Failed counts waiters failed while they waited: by Close, or by a
	// shrink of the capacity below their weight.
	Failed uint64
	// DoubleReleases counts Release calls on permits already released.
	DoubleReleases uint64
}

// Stats returns a snapshot of the semaphore. The capacity, available count,
// waiters and the counters of the slow path are read together under the
// lock. Grants and releases on the lock-free fast path are counted through
// the tokens' generations: under concurrent use, a release in flight may be
// seen as released and still held for an instant; once the calls have
// returned, Acquired - Released is the number of permits out.
func (s *Weighted) Stats() Stats {
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
		Timings: timingsOf(s.tm, released+out, s.grantedWait+s.bargeWaited()),
	}
}
