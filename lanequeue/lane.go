package lanequeue

import (
	"context"

	"github.com/sessionlane/lanes/semaphore"
)

// Kind is a lane's place in the canonical acquisition order of
// [Queue.AcquireAll]: every keyed lane first, then every global lane, then
// every rate lane, whatever order the caller names them in.
type Kind int

const (
	// Keyed lanes serialise (or bound) work per key (per chat session, say).
	Keyed Kind = iota
	// Global lanes bound a budget shared by every key.
	Global
	// Rate lanes bound how often work starts; their permits give nothing
	// back on release.
	Rate
)

// String returns "keyed", "global" or "rate".
func (k Kind) String() string {
	switch k {
	case Keyed:
		return "keyed"
	case Global:
		return "global"
	case Rate:
		return "rate"
	}
	return "unknown"
}

// Lane is one named budget of a [Queue]. The lanes of this package, and
// lanes from other packages (the Redis lanes of redislane), implement it, so
// any of them can be registered with [Queue.Add] and mixed in one
// AcquireAll.
//
// Implementations must be safe for concurrent use, and must follow the
// permit ownership contract of package semaphore: Acquire returns a permit
// that the caller owns if and only if the error is nil, and a cancelled
// Acquire leaves the lane as it was.
type Lane[K comparable] interface {
	// Kind tells where the lane stands in the canonical order.
	Kind() Kind
	// MaxWeight is the largest weight the lane can ever grant to one key
	// (its capacity, or per-key capacity, or rate burst). AcquireAll
	// refuses heavier requests before taking anything.
	MaxWeight() int64
	// Acquire takes n permits for key, waiting if needed. Global lanes
	// ignore the key. A rate lane returns the zero Permit on success: a
	// spent rate token is not given back.
	//
	// Cancellation: when ctx ends while Acquire waits, Acquire must leave
	// at once and return an error (ctx.Err() or one wrapping it), holding
	// nothing. If permits were granted while the cancellation was in flight,
	// exactly one side owns them: Acquire either returns them with a nil
	// error, or gives them back itself before returning the error.
	Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error)
	// TryAcquire takes n permits for key if it can without waiting.
	TryAcquire(key K, n int64) (semaphore.Permit, bool)
	// Stats returns a snapshot of the lane.
	Stats() LaneStats
	// Close wakes the lane's waiters with an error and refuses later
	// acquires; permits out stay valid.
	Close()
}

// LaneStats is a snapshot of one lane.
type LaneStats struct {
	Name     string // the name the lane has in the queue (Queue.Stats sets it)
	Kind     Kind   // Keyed, Global or Rate
	Capacity int64  // capacity of a global lane, per-key capacity of a keyed lane, burst of a rate lane
	Held     int64  // weight held now, over all keys
	Waiters  int    // callers waiting now
	Keys     int    // entries alive (keyed lanes)
	Closed   bool   // the lane is closed (by the queue's Close, or on its own)

	// Counters of the lane's acquire calls, with the meanings that package
	// semaphore gives them: a global or keyed lane reports its semaphore's
	// counters as they are, a Redis lane its instance's. A call of
	// AcquireAll counts in every lane it reached: a grant that a later
	// lane's failure gave back counts as Acquired and Released in its lane.
	// A rate lane gives nothing back (Released and DoubleReleases stay 0)
	// and has no maximum wait (TimedOut stays 0); its Waited counts the
	// grants that waited for tokens, its Failed the waiters that Close
	// sent away, and a call whose tokens would come after its context's
	// deadline counts as Cancelled.
	semaphore.Counters
	// Timings are the wait-time and hold-time distributions of a global
	// or keyed lane whose semaphore was made WithHistograms (see
	// semaphore.Timings; a lane's options pass it on: AddGlobalLane's
	// semaphore options, AddKeyedLane's keyedsem options). Rate lanes
	// record none.
	semaphore.Timings
}
