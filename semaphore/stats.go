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
	Closed        bool

	// Counters since New. A grant taken back because the waiter's context
	// or max wait ended first counts only in Cancelled or TimedOut, as if
	// the waiter had left before the grant; waiters failed by Close or by
	// a shrink below their weight count in none of them.
	Acquired       uint64 // grants, with or without waiting
	Released       uint64 // first releases of granted permits
	Waited         uint64 // grants that had to wait in the queue
	Cancelled      uint64 // acquires that ended with a context error
	TimedOut       uint64 // acquires that ended with ErrWaitTooLong
	Rejected       uint64 // acquires refused at once: invalid weight, too heavy, closed, queue full
	DoubleReleases uint64 // Release calls on permits already released
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
		released += s.gens[i].Uint64.Load()
	}
	released += s.spareFreed
	out := uint64(inlineTokens-bits.OnesCount64(st&tokenMask)) + uint64(s.spareOut)
	c := s.capacity.Load()
	a := avail(st)
	return Stats{
		Capacity:       c,
		Available:      a,
		Held:           c - a,
		Waiters:        s.waiters,
		WaitingWeight:  s.waitingWeight(),
		Closed:         s.closed,
		Acquired:       released + out,
		Released:       released,
		Waited:         s.grantedWait,
		Cancelled:      s.cancelled,
		TimedOut:       s.timedOut,
		Rejected:       s.rejected,
		DoubleReleases: s.doubleRel.Load(),
	}
}
