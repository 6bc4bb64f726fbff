package redislane

import (
	"sync/atomic"

	"github.com/sessionlane/lanes/lanequeue"
)

type counters struct {
	acquired, released, cancelled, rejected, doubleRel atomic.Uint64
	lost, expired, late, redisErrs                     atomic.Uint64
	handoffs, polls                                    atomic.Uint64 // how queued waiters were granted / woke up
	stale                                              atomic.Uint64 // hand-over messages for an earlier queue entry
	maxHold                                            atomic.Uint64 // permits ended by WithMaxHold
}

func (c *core) stats() Stats {
	c.mu.Lock()
	waiters, keys := c.nwait, len(c.lines)
	c.mu.Unlock()
	return Stats{
		Name:           c.name,
		Limit:          c.capacity,
		Held:           c.held.Load(),
		Waiters:        waiters,
		Keys:           keys,
		Acquired:       c.st.acquired.Load(),
		Released:       c.st.released.Load(),
		Cancelled:      c.st.cancelled.Load(),
		Rejected:       c.st.rejected.Load(),
		DoubleReleases: c.st.doubleRel.Load(),
		LeasesLost:     c.st.lost.Load(),
		LeasesExpired:  c.st.expired.Load(),
		LateReplies:    c.st.late.Load(),
		RedisErrors:    c.st.redisErrs.Load(),
		Handoffs:       c.st.handoffs.Load(),
		Polls:          c.st.polls.Load(),
		StaleHandovers: c.st.stale.Load(),
		MaxHolds:       c.st.maxHold.Load(),
	}
}

// Stats is a snapshot of one instance of a lane. Held, Waiters and Keys
// count this instance only; the counters count its calls since it was made.
type Stats struct {
	Name    string
	Limit   int64 // the limit, or the per-key limit of a Keyed
	Held    int64 // weight of this instance's permits that are out
	Waiters int   // callers of this instance waiting now (TryAcquire calls in flight included)
	Keys    int   // buckets with local waiters now (keys of a Keyed)

	Acquired       uint64
	Released       uint64
	Cancelled      uint64 // acquires ended by their context
	Rejected       uint64 // acquires refused: bad weight, closed, limit mismatch, Redis error that retrying cannot fix
	DoubleReleases uint64 // Release calls that found the permit already released
	LeasesLost     uint64 // permits whose refresh found them gone
	LeasesExpired  uint64 // permits whose local deadline passed without a successful refresh
	LateReplies    uint64 // grants that came back too late to be used (asked again)
	RedisErrors    uint64 // failed Redis calls
	Handoffs       uint64 // grants handed over by a release, told by a pub/sub message
	Polls          uint64 // waits in the Redis queue that ended with no message: on the timer, or on a refresh that found the waiter granted
	StaleHandovers uint64 // hand-over messages ignored: made for an earlier queue entry of the waiter, which expired
	MaxHolds       uint64 // permits ended by WithMaxHold
}

func (s Stats) laneStats(k lanequeue.Kind) lanequeue.LaneStats {
	return lanequeue.LaneStats{
		Name: s.Name, Kind: k, Capacity: s.Limit, Held: s.Held, Waiters: s.Waiters, Keys: s.Keys,
		Acquired: s.Acquired, Released: s.Released, Cancelled: s.Cancelled, Rejected: s.Rejected,
	}
}
