package redislane

import (
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/semaphore"
)

type counters struct {
	acquired, released, waited, cancelled, rejected, failed, doubleRel atomic.Uint64
	lost, expired, late, redisErrs                                     atomic.Uint64
	handovers, polls                                                   atomic.Uint64 // how queued waiters were granted / woke up
	stale                                                              atomic.Uint64 // hand-over messages for an earlier queue entry
	maxHold                                                            atomic.Uint64 // permits ended by WithMaxHold
	batched                                                            atomic.Uint64 // grants made in the call of the head of the line
}

func (c *core) stats() Stats {
	c.mu.Lock()
	waiters, keys, closed := c.nwait, len(c.lines), c.closed
	c.mu.Unlock()
	st := Stats{
		Name:     c.name,
		Capacity: c.limit(),
		Held:     c.held.Load(),
		Waiters:  waiters,
		Keys:     keys,
		Closed:   closed,
		Counters: semaphore.Counters{
			Acquired:       c.st.acquired.Load(),
			Released:       c.st.released.Load(),
			Waited:         c.st.waited.Load(),
			Cancelled:      c.st.cancelled.Load(),
			Rejected:       c.st.rejected.Load(),
			Failed:         c.st.failed.Load(),
			DoubleReleases: c.st.doubleRel.Load(),
		},
		LeasesLost:     c.st.lost.Load(),
		LeasesExpired:  c.st.expired.Load(),
		LateReplies:    c.st.late.Load(),
		RedisErrors:    c.st.redisErrs.Load(),
		Handovers:      c.st.handovers.Load(),
		Polls:          c.st.polls.Load(),
		StaleHandovers: c.st.stale.Load(),
		MaxHolds:       c.st.maxHold.Load(),
		Batched:        c.st.batched.Load(),
		HoldsRunOut:    c.holdsOut.Load(),
	}
	if c.tm != nil {
		// Each grant is observed once by its own call (one that did not
		// wait at 0), so the counts never go back between snapshots.
		st.Timings = semaphore.Timings{Enabled: true, WaitTime: histogramOf(&c.tm.Wait), HoldTime: histogramOf(&c.tm.Hold)}
	}
	if f := c.fleet; f != nil {
		f.mu.Lock()
		st.Leader = f.leaderLocked(time.Now())
		f.mu.Unlock()
		st.Term = f.term.Load()
		st.LimitCalls = f.calls.Load()
		st.LimitReads = f.reads.Load()
		st.LimitWrites = f.writes.Load()
		st.LimitsDropped = f.dropped.Load()
	}
	return st
}

// histogramOf returns the snapshot of r.
func histogramOf(r *hist.Recorder) semaphore.Histogram {
	var h semaphore.Histogram
	count, sum := r.Read(&h.Counts)
	h.Count, h.Sum = count, time.Duration(sum)
	return h
}

// Stats is a snapshot of one instance of a lane. Held, Waiters and Keys
// count this instance only; the counters count its calls since it was made.
// With [WithQuota] they count what the instance does in Redis: Held is the
// weight of the blocks it leases (the units it took from the fleet's
// capacity, used or not), Waiters a block lease in flight (at most one:
// the callers waiting for units are not counted), and the counters its
// block leases, but for DoubleReleases, which also counts the grants
// made from the blocks in process that were released twice.
type Stats struct {
	Name     string // the lane's name, as given to NewWeighted or NewKeyed
	Capacity int64  // the capacity, the per-key capacity of a Keyed, or a Fleet's limit as last read
	Held     int64  // weight of this instance's permits that are out
	Waiters  int    // callers of this instance waiting now (TryAcquire calls in flight included)
	Keys     int    // buckets with local waiters now (keys of a Keyed)
	Closed   bool   // Close has been called

	// Counters of this instance's calls, as package semaphore defines
	// them. Waited counts the grants that waited behind another caller of
	// this instance or in the Redis queue; Failed, the waiters that Close
	// sent away, and those a fleet's shrink failed (their weight above its
	// new limit); Rejected also counts the calls that ended on a capacity
	// mismatch or on a Redis error that retrying cannot fix. A lane has no
	// maximum wait: TimedOut stays 0.
	semaphore.Counters

	// WithHistograms: this instance's wait and hold times (see
	// [WithHistograms]); Enabled is false without it. WaitTime counts
	// every grant (Acquired), HoldTime every first release (Released).
	semaphore.Timings

	LeasesLost     uint64 // permits whose refresh found them gone
	LeasesExpired  uint64 // permits whose local deadline passed without a successful refresh
	LateReplies    uint64 // grants that came back too late to be used (asked again)
	RedisErrors    uint64 // failed Redis calls
	Handovers      uint64 // grants handed over by a release, told by a pub/sub message
	Polls          uint64 // waits in the Redis queue that ended with no message: on the timer, or on a refresh that found the waiter granted
	StaleHandovers uint64 // hand-over messages ignored: made for an earlier queue entry of the waiter, which expired
	MaxHolds       uint64 // permits ended by WithMaxHold
	Batched        uint64 // grants to a waiter behind the first of its line, made by the first's call (see [Weighted.Acquire])
	HoldsRunOut    uint64 // a sequenced Keyed's grants that went when their reorder hold ran out, a predecessor still missing (see [WithReorderHold])

	// A Fleet's only (zero for the others):
	Leader        bool   // the instance is the fleet's leader now
	Term          int64  // the highest term of a leadership seen (never goes back)
	LimitCalls    uint64 // fleet script calls made (one per refresh interval, and one per write)
	LimitReads    uint64 // fleet script calls that went through: the limit was read
	LimitWrites   uint64 // limits this instance wrote as the leader
	LimitsDropped uint64 // SetCapacity values never written: made on a follower, or in a term that ended
}
