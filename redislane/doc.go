// Package redislane provides a weighted semaphore and a keyed semaphore
// whose limits are shared, through Redis, by every process that uses them.
//
// [NewSemaphore] makes one instance of a global lane ("at most 10 calls to
// the model API at once, across the fleet"); [NewKeyed] makes one instance
// of a keyed lane ("one message of a Slack thread at a time, whichever
// instance received it"). Both accept any [redis.UniversalClient] (a single
// node, Sentinel or Cluster). [AsLane] and [AsKeyedLane] turn them into
// lanes of a lanequeue.Queue, so that one AcquireAll can take a local
// session lane and a Redis global lane together.
//
// # How it works
//
// A permit is a lease: an entry in a sorted set, with an expiry computed
// from the Redis server's clock (TIME) by Lua scripts, never from a
// client's clock. The instance that holds a permit refreshes all of its
// leases with one script call, a third of a lease apart. A holder that
// dies, hangs or is cut off stops refreshing, and its units come back at
// most one lease later. Each instance keeps one local FIFO line of waiters
// per bucket, and only its first waiter asks Redis; in Redis, the first
// waiters of all instances queue in arrival order, and a release hands the
// freed units to the queue directly and says so on a pub/sub channel (one
// subscription per process and client). Pub/sub drops messages across
// reconnects, so waiters also ask again after a hint from Redis (5-250 ms,
// jittered). Every call is idempotent: an acquire retried with the same
// permit id (after a timeout, a lost reply or a go-redis retry) returns the
// grant already made, never a second one.
//
// Uncontended, an Acquire is one Redis call and a Release is one. Under
// contention, a grant costs the waiter's call and the release that hands it
// over: two calls per grant, plus one refresh call per instance every third
// of a lease.
//
// # What is guaranteed
//
// While Redis keeps its state (one node, or a Cluster shard without a
// failover), and the clocks of the server and the holders run at the same
// rate (to within a fifth of a lease, the safety margin):
//
//   - the weight held by the holders whose leases are valid never exceeds
//     the limit;
//   - a holder's lease is valid until its [Permit.Deadline]: the send time
//     of its last successful grant or refresh call, plus the lease, minus
//     the margin. A reply that comes back later than the margin is not
//     used. When the deadline passes without a successful refresh, or a
//     refresh finds the permit gone, the permit's [Permit.Context] is
//     cancelled, with [ErrLeaseExpired] or [ErrLeaseLost] as its cause;
//   - every permit carries a fencing token ([Permit.Fence]), larger than the
//     token of every permit of the lane granted before it, also after Redis
//     lost its state (tokens are seeded from the server clock in
//     microseconds);
//   - after Redis lost the lane's state (a restart without persistence, a
//     flush, an eviction), the lane grants nothing for one quarantine
//     (default: one lease; see [WithQuarantine]), so that the holders from
//     before, whose refreshes now fail, see their leases end before anybody
//     else is granted. A new lane is quarantined too, as Redis cannot tell
//     it from a lost one.
//
// # What is not guaranteed
//
// A Redis lane protects a downstream service from overload. It is not a
// proof of mutual exclusion. Redis replication is asynchronous: after a
// failover, the new primary may have missed the latest grants, and two
// holders may overlap for up to one lease. A holder whose process pauses
// (garbage collection, SIGSTOP, a VM migration) past its deadline may still
// act before it looks at its context. A machine that suspends stops the
// monotonic clock of its processes. A call that the network delivers very
// late (after the caller gave up and released) can hold units for one lease
// with nobody using them: capacity is wasted, never exceeded. Where overlap must be impossible, pass
// the fencing token to the protected resource and have it reject any
// request whose token is lower than the highest it has accepted: that makes
// a stale holder harmless, whatever Redis did.
//
// Run Redis with maxmemory-policy noeviction (or without a memory limit):
// an eviction of a lane's keys loses permits like a restart, and is only
// detected when the lane's meta key goes too. Keys carry the hash tag
// {lanes:<name>}, so one lane lives in one Cluster slot.
//
// # Configuration
//
// Every instance of a lane must use the same limit: an instance whose limit
// differs from the one stored in Redis fails with [ErrLimitMismatch] rather
// than change it. To change the limit on purpose, stop the lane's users and
// delete the key {lanes:<name>}:meta. Instances should use the same lease
// ([WithLease]); if they do not, set [WithQuarantine] to the longest.
//
// Give the go-redis client ContextTimeoutEnabled: true. The lane puts a
// deadline on its own calls: a refresh gets one refresh interval
// ([WithRefreshEvery]), a TryAcquire the safety margin (a fifth of the
// lease), and the clean-up of a released or abandoned permit one lease. go-redis
// applies a context's deadline to the connection only with that option
// (and then the earlier of it and ReadTimeout); without it every call
// waits up to ReadTimeout, whatever its context. An Acquire is not held
// up either way: when its context ends, it returns and leaves its call in
// flight to a goroutine that cleans up after it, and that call is bounded
// by ReadTimeout alone.
//
// # Ownership, cancellation, memory ordering
//
// A permit is owned by whoever received it, until Release; Release is
// once-only, stops refreshing the lease first, then removes the permit from
// Redis. If Acquire returns an error, nothing is held: a grant that raced
// with the caller's cancellation is released in the background. The Redis
// call that releases a permit happens before the call that grants its units
// to a waiter, in any process.
//
// # Goroutines
//
// Each instance runs one refresher goroutine; each process runs one pub/sub
// receiver per Redis client while a lane on it is open; a waiter whose
// context ends during a call leaves the call to a goroutine that cleans up.
// Close stops them (the refresher once the permits still out are released).
package redislane
