package redislane

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/semaphore"
)

// Sentinel errors, for errors.Is. ErrClosed, ErrInvalidWeight, ErrTooHeavy
// and ErrInvalidConfig are the values of package semaphore, shared by every
// lanes package (errors.Is(err, semaphore.ErrClosed) holds for this
// package's errors too); the others are this package's own.
var (
	// ErrClosed is returned by acquire calls on a closed lane, and to the
	// callers waiting when it is closed. It is [semaphore.ErrClosed].
	ErrClosed = semaphore.ErrClosed
	// ErrInvalidWeight is returned for a request of zero or fewer permits. It
	// is [semaphore.ErrInvalidWeight].
	ErrInvalidWeight = semaphore.ErrInvalidWeight
	// ErrTooHeavy is returned for a request of more permits than the capacity
	// (the per-key capacity of a keyed lane). It is [semaphore.ErrTooHeavy].
	ErrTooHeavy = semaphore.ErrTooHeavy
	// ErrCapacityMismatch is returned by acquire calls when Redis already holds
	// the lane under the same name with another capacity, or as the other kind
	// (a [Weighted] and a [Keyed] may not share a name). The stored capacity
	// is never changed silently; see the package documentation for how to
	// change it on purpose.
	ErrCapacityMismatch = errors.New("redislane: lane exists in Redis with another capacity or kind")
	// ErrLeaseLost is the cause of a permit's context when a refresh found
	// that Redis no longer holds the permit: it expired and was reclaimed,
	// or Redis lost its state.
	ErrLeaseLost = errors.New("redislane: lease lost")
	// ErrLeaseExpired is the cause of a permit's context when no refresh
	// succeeded before the permit's local deadline (see [Permit.Deadline]).
	ErrLeaseExpired = errors.New("redislane: lease expired")
	// ErrReleased is the cause of a permit's context after Release.
	ErrReleased = errors.New("redislane: permit released")
	// ErrMaxHold is the cause of a permit's context when it has been held
	// for the time given with [WithMaxHold]: its lease is no longer
	// refreshed and runs out in Redis within one lease of its last refresh.
	ErrMaxHold = errors.New("redislane: permit held for its longest hold (WithMaxHold)")
	// ErrInvalidConfig is wrapped by the errors of [NewWeighted] and
	// [NewKeyed] for a nil client, a bad name, a capacity below 1 or
	// above [semaphore.MaxCapacity], or an option out of range. It is
	// [semaphore.ErrInvalidConfig].
	ErrInvalidConfig = semaphore.ErrInvalidConfig
)

// DefaultLease is the lease of a permit when no [WithLease] is given.
const DefaultLease = 10 * time.Second

// minLease keeps the margins and the refresh period at whole milliseconds,
// the permit of the server-side expiry times.
const minLease = 20 * time.Millisecond

// Option configures a [Weighted] or a [Keyed]. Options are applied in
// order to a configuration, which is then checked, once, by the
// constructor: a value out of range, or a nil Option, makes it return an
// error wrapping [ErrInvalidConfig], never clamped or ignored.
type Option func(*config)

type config struct {
	lease         time.Duration
	refreshEvery  time.Duration // refreshSet false: lease/3
	refreshSet    bool
	quarantine    time.Duration
	quarantineSet bool          // false: the quarantine is the lease
	maxHold       time.Duration // 0: no bound
	limitRefresh  time.Duration // a Fleet's refresh interval (limitSet false: DefaultLimitRefresh)
	limitSet      bool
	window        time.Duration // a Tokens lane's window (windowSet false: DefaultWindow)
	windowSet     bool

	classicPubSub bool

	seqOrder bool          // WithSequenceOrder: a Keyed's keys serve numbered calls in number order
	hold     time.Duration // WithReorderHold's bound (holdSet: given)
	holdSet  bool

	prioStep   time.Duration          // WithPriorities' step (prioSet: given)
	prioSet    bool                   //
	fairSet    bool                   // WithFairShare
	fairWeight func(group string) int // WithFairShare's weights (nil: equal)

	histograms bool   // WithHistograms
	hashTag    string // WithHashTag ("": the lane's name is its tag)
	hashTagSet bool
	quota      int64 // WithQuota's block
	quotaSet   bool
}

// WithLease sets how long Redis keeps a permit without hearing from its
// holder (default [DefaultLease]). A holder that dies, hangs or loses its
// connection gives its permits back at most one lease later; a holder whose
// process is paused for longer than the lease loses its permit. Every
// instance of a lane should use the same lease (see [WithQuarantine]).
func WithLease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// WithRefreshEvery sets how often the permits held by this instance are
// refreshed, all of them with one Redis call (default: a third of the
// lease). It must be at least 5 ms (a refresh call's deadline is the
// period, at most a third of the lease, and a shorter one would fail on a
// healthy Redis) and shorter than the local validity of a lease (four
// fifths of it); the default survives one failed refresh.
func WithRefreshEvery(d time.Duration) Option {
	return func(c *config) { c.refreshEvery, c.refreshSet = d, true }
}

// minRefresh is the shortest refresh period: the deadline of a refresh
// call (refreshTimeout) must leave a round trip to a loaded Redis room.
// The default period of the shortest lease (minLease/3) is above it.
const minRefresh = 5 * time.Millisecond

// WithQuarantine sets how long the lane grants nothing after its state in
// Redis was created: on first use, and after Redis lost its state or
// restarted (without persistence, or from a snapshot or append-only file
// that lacks the latest grants; a failover to a replica; an eviction of
// the meta key). Holders from before the loss see their leases end within
// one lease, so the default, the lease, keeps them from overlapping with new
// holders. Set it to the longest lease used by any instance of the lane. 0
// turns quarantine off: only for a Redis that never loses a write it
// acknowledged (appendfsync always, no failover), or for a lane that may
// overlap after a loss. A negative d is refused.
func WithQuarantine(d time.Duration) Option {
	return func(c *config) { c.quarantine, c.quarantineSet = d, true }
}

// WithMaxHold bounds how long any permit of the instance may be held: d
// after its grant, the permit ends as if its lease had run out, with
// [ErrMaxHold] as the cause of its context, and its lease is no longer
// refreshed (it runs out in Redis within one lease of its last refresh, or
// at the permit's Release). [Permit.Deadline] is never later than the grant plus d. It
// keeps a permit that is never released (a leaked one, a holder stuck for
// ever) from holding its permits for as long as the process lives. 0, the
// default, sets no bound.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.maxHold = d } }

// WithClassicPubSub makes the lane wake its waiters with PUBLISH and
// SUBSCRIBE even where the server has sharded pub/sub (SPUBLISH and
// SSUBSCRIBE, Redis 7), which the lane uses by default so that a Cluster
// does not broadcast every hand-over to every node. Use it behind a proxy
// that does not pass the sharded commands. Every instance of a lane must
// make the same choice (and, by default, they do, as they ask the same
// server): a waiter that listens on the other kind misses the messages and
// is woken by its timer only (5-250 ms later).
func WithClassicPubSub() Option { return func(c *config) { c.classicPubSub = true } }

// WithHistograms makes the lane record the wait and hold times of this
// instance's grants, as package semaphore's WithHistograms does, in
// [Stats].Timings ([semaphore.Timings]): a grant's wait runs from its
// Acquire call to its grant, both read on the local clock (no Redis call
// is added), and a grant that did not wait (behind another caller of the
// instance, or queued in Redis) counts as 0, as in package semaphore; the
// round trip of its acquire call is not a wait. A hold runs from the grant
// to the first Release, read on the CPU's counter where Linux keeps its
// time on it (the local clock elsewhere). Off by default; off, the lane reads no clock for them.
func WithHistograms() Option { return func(c *config) { c.histograms = true } }

// WithHashTag puts the lane's keys in the Redis Cluster slot of tag
// rather than of its name: lanes made with the same tag share a slot, so
// that [TryAcquireAll] can take permits of several of them in one script.
// Every instance of a lane must use the same tag (the tag names the
// lane's state along with its name: a lane made without it, or with
// another, is another lane). The tag must be non-empty and contain no
// brace. See the package doc, "Keys and Cluster slots".
func WithHashTag(tag string) Option {
	return func(c *config) { c.hashTag, c.hashTagSet = tag, true }
}

func newConfig(opts []Option) (config, error) {
	c := config{lease: DefaultLease}
	for i, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: option %d is nil", ErrInvalidConfig, i)
		}
		o(&c)
	}
	if c.lease < minLease {
		return c, fmt.Errorf("%w: lease %v is below %v", ErrInvalidConfig, c.lease, minLease)
	}
	if !c.refreshSet {
		c.refreshEvery = c.lease / 3
	}
	if c.refreshEvery < minRefresh || c.refreshEvery >= c.validity() {
		return c, fmt.Errorf("%w: refresh period %v must be at least %v and below %v (lease %v minus its safety margin)",
			ErrInvalidConfig, c.refreshEvery, minRefresh, c.validity(), c.lease)
	}
	if c.quarantineSet && c.quarantine < 0 {
		return c, fmt.Errorf("%w: quarantine %v is negative", ErrInvalidConfig, c.quarantine)
	}
	if !c.quarantineSet {
		c.quarantine = c.lease
	}
	if c.maxHold < 0 {
		return c, fmt.Errorf("%w: longest hold %v is negative", ErrInvalidConfig, c.maxHold)
	}
	if c.hashTagSet && (c.hashTag == "" || strings.ContainsAny(c.hashTag, "{}")) {
		return c, fmt.Errorf("%w: hash tag %q must be non-empty and contain no brace", ErrInvalidConfig, c.hashTag)
	}
	if err := c.checkOrder(); err != nil {
		return c, err
	}
	if err := c.checkPlaceOrder(); err != nil {
		return c, err
	}
	if !c.limitSet {
		c.limitRefresh = DefaultLimitRefresh
	}
	if c.limitRefresh < minLimitRefresh {
		return c, fmt.Errorf("%w: limit refresh interval %v is below %v", ErrInvalidConfig, c.limitRefresh, minLimitRefresh)
	}
	return c, nil
}

// margin is what a holder subtracts from its lease to cover the time a
// reply takes to come back and any difference in the rate of the server's
// and the holder's clocks: a fifth of the lease.
func (c config) margin() time.Duration { return c.lease / 5 }

// validity is how long after the send time of a successful call a holder
// relies on its lease.
func (c config) validity() time.Duration { return c.lease - c.margin() }

// refreshTimeout is the deadline of a refresh call: the refresh period, at
// most a third of the lease (with the default period, a refresh that takes
// that long still leaves time for another before the deadline).
func (c config) refreshTimeout() time.Duration { return min(c.refreshEvery, c.lease/3) }

// releaseWait is how long Release waits for its call to Redis before it
// leaves the call to the background: a margin, at most maxWait.
func (c config) releaseWait() time.Duration { return min(c.margin(), maxWait) }

func checkArgs(client redis.UniversalClient, name string, capacity int64) error {
	switch {
	case nilptr.Is(client): // also a (*redis.Client)(nil), whose first call would panic
		return fmt.Errorf("%w: nil Redis client", ErrInvalidConfig)
	case name == "":
		return fmt.Errorf("%w: empty lane name", ErrInvalidConfig)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%w: lane name %q contains a brace (it goes inside a Redis hash tag)", ErrInvalidConfig, name)
	case capacity < 1 || capacity > semaphore.MaxCapacity:
		// Redis scripts count in doubles: above 2^53 two capacities, or a
		// count and a capacity, can compare equal. The bound of a local
		// semaphore keeps every count exact, and a lane and its local
		// counterpart take the same capacities.
		return fmt.Errorf("%w: capacity %d out of range [1, %d] (semaphore.MaxCapacity)", ErrInvalidConfig, capacity, int64(semaphore.MaxCapacity))
	case !contextTimeouts(client):
		return fmt.Errorf("%w: the Redis client lacks ContextTimeoutEnabled: without it go-redis ignores the deadlines "+
			"the lane puts on its calls, and a call may block for the client's ReadTimeout times its retries "+
			"(set ContextTimeoutEnabled: true in the client's options)", ErrInvalidConfig)
	}
	return nil
}

// contextTimeouts reports whether client applies a context's deadline to
// its connections. A client of another type (a wrapper) is taken at its
// word: it cannot be asked.
func contextTimeouts(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

func ms(d time.Duration) int64 { return int64(d / time.Millisecond) }

// msDur is a server's reply in milliseconds as a Duration, saturated: a
// cooldown "for good" (until 2262) is as many milliseconds as the largest
// Duration holds, and one more would wrap to a negative time.
func msDur(v int64) time.Duration {
	if v > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(v) * time.Millisecond
}

var errBadRefresh = errors.New("redislane: refresh script returned a reply of the wrong length")
