// Package redislane provides a weighted semaphore, a keyed semaphore and a
// budget per window (tokens or requests per minute) whose capacities are
// shared, through Redis, by every process that uses them.
//
// [NewWeighted] makes one instance of a global lane ("at most 10 calls to
// the model API at once, across the fleet"); [NewKeyed] makes one instance
// of a keyed lane ("one message of a Slack thread at a time, whichever
// instance received it"). Both accept any [redis.UniversalClient] (a single
// node, Sentinel or Cluster). [AsLane] and [AsKeyedLane] turn them into
// lanes of a lanequeue.Queue, so that one AcquireAll can take a local
// keyed lane and a Redis global lane together.
//
// # How it works
//
// A permit is a lease: an entry in a sorted set, with an expiry computed
// from the Redis server's clock (TIME) by Lua scripts, never from a
// client's clock. The instance that holds a permit refreshes all of its
// leases with one script call, a third of a lease apart. A holder that
// dies, hangs or is cut off stops refreshing, and its permits come back at
// most one lease later. Each instance keeps one local FIFO line of waiters
// per bucket, and only its first waiter asks Redis, for itself and for the
// waiters behind it (up to 256 of them, as far as the capacity goes): one
// call grants the first waiter and then, in line order, each of the others
// as long as it fits and nobody is queued in Redis, stopping at the first
// that does not, so that the granted ones are always a prefix of the line
// and the local line stays FIFO. The others go on waiting in the line, and
// the next call of its first waiter carries them; so an instance whose
// callers wait together uses as much of the capacity as is free in one
// round trip, not one grant per round trip. In Redis, the first
// waiters of all instances queue in arrival order (on a lane made to
// order by priority or group, every waiter, in that order: see
// "Priorities and fair share"), and a release hands the
// freed permits to the queue directly and says so on a pub/sub channel (one
// subscription per process and client). The message names the queue entry
// it was made for (its arrival number), and a waiter takes it only for the
// entry it is waiting with: a message that reaches it late, after that
// entry expired and it queued again, is ignored. Where the server has
// sharded pub/sub (Redis 7), the lanes use SPUBLISH and SSUBSCRIBE, so that
// a Cluster delivers a message on the lane's node only (see
// [WithClassicPubSub]); when a reshard moves the lane's slot to another
// node, the subscription follows it (the node that lost the slot drops its
// subscribers, and the process subscribes again where the slot is now).
// Pub/sub drops messages across reconnects, and those published while a
// slot moves, so waiters also ask again after a hint from Redis (5-250 ms,
// jittered).
// Every call is idempotent: an acquire retried with the same permit id
// (after a timeout, a lost reply or a go-redis retry) returns the grant
// already made, never a second one.
//
// Uncontended, an Acquire is one Redis call and a Release is one. Under
// contention, a grant costs the waiter's call and the release that hands it
// over: two calls per grant, plus one refresh call per instance every third
// of a lease. Callers of one instance that wait or release together share
// calls: a first waiter's call grants it and the waiters behind it that fit,
// and the releases made while a release call of the bucket is in flight go
// to Redis together in the next one (up to 256 ids a call).
//
// # What is guaranteed
//
// While Redis keeps its state (one node, or a Cluster shard without a
// failover), and the clocks of the server and the holders run at the same
// rate (to within a fifth of a lease, the safety margin):
//
//   - the weight held by the holders whose leases are valid never exceeds
//     the capacity;
//   - a holder's lease is valid until its [Permit.Deadline]: the send time
//     of its last successful grant or refresh call, plus the lease, minus
//     the margin. A grant whose reply comes back later than the margin is
//     not used (the lane asks again); the reply of a refresh is used
//     whenever it comes within its deadline, as it counts from its send
//     time too. When the deadline passes without a successful refresh, or
//     a refresh finds the permit gone, the permit's [Permit.Context] is
//     cancelled, with [ErrLeaseExpired] or [ErrLeaseLost] as its cause;
//   - every permit carries a fencing token ([Permit.Fence]), larger than the
//     token of every permit of the lane granted before it, also after Redis
//     lost its state (tokens are seeded from the server clock in
//     microseconds);
//   - after Redis lost the lane's state, or restarted whatever its
//     persistence (see below), the lane grants nothing for one quarantine
//     (default: one lease; see [WithQuarantine]), so that the holders from
//     before, whose refreshes now fail, see their leases end before anybody
//     else is granted. A new lane is quarantined too, as Redis cannot tell
//     it from a lost one.
//
// # What is not guaranteed
//
// A Redis lane protects a downstream service from overload. It is not a
// proof of mutual exclusion. Redis replication is asynchronous: after a
// failover, the new primary may have missed the latest grants. The lane is
// quarantined there (see below), which keeps those holders apart from new
// ones only if the old primary stopped granting before the new one began;
// Redis does not promise that (a primary cut off from its replicas accepts
// writes until it notices), so two holders may overlap for up to one lease.
// A holder whose process pauses
// (garbage collection, SIGSTOP, a VM migration) past its deadline may still
// act before it looks at its context. A machine that suspends stops the
// monotonic clock of its processes. A call that the network delivers very
// late (after the caller gave up and released) can hold permits for one lease
// with nobody using them: capacity is wasted, never exceeded. Where overlap must be impossible, pass
// the fencing token to the protected resource and have it reject any
// request whose token is lower than the highest it has accepted: that makes
// a stale holder harmless, whatever Redis did.
//
// Run Redis with maxmemory-policy noeviction (or without a memory limit):
// an eviction of a lane's keys loses permits like a restart, and is only
// detected when the lane's meta key goes too. Keys carry a hash tag, so
// one lane lives in one Cluster slot (see Keys and Cluster slots below).
//
// # Persistence, restarts and failover
//
// Every persistence setting is safe for the guarantees above, none
// included, because the lane treats every restart of Redis as a loss of
// its state. A restart that
// loads an RDB snapshot (Debian's default configuration has save points)
// or an append-only file written with appendfsync everysec (up to a second
// of writes, or more when a disk stalls) brings the lane back without its
// latest grants, with its meta hash; the holders of those grants cannot be
// told, and they go on until their leases run out. So the scripts read the
// run_id of the server process (INFO server: a random id drawn at each
// start of redis-server, which no snapshot or append-only file restores)
// and its replication id (INFO replication's master_replid, drawn anew at
// each promotion of a replica), and keep the pair in the lane's meta hash.
// A script that finds the state written by another server process, or by
// this one before it resynced from another and was promoted again (a
// master demoted after a partition, then back), takes the path of a lost
// state: the
// lane is quarantined, holders whose grants came back with leases still
// running keep them (their refreshes find them), the others' refreshes
// fail (cause [ErrLeaseLost]). The settings only change what comes back,
// never the bound: with no persistence the lane starts empty; with
// appendfsync always no acknowledged grant is lost, but the lane cannot
// tell and is quarantined all the same. Whatever the setting, each restart
// costs one quarantine in which the lane grants nothing (and so does the
// first call on a lane whose state was written by a version of this
// package that did not store the run_id). WithQuarantine(0) is safe only
// on a Redis that never loses a write it acknowledged (appendfsync always
// and no failover).
//
// The pair is compared on the node that holds the lane's keys: the
// lane's node in a Cluster (each node has its own run_id). A failover to a
// replica (another run_id, a new replication id), and a slot migration
// that moves the lane to another node, quarantine the lane too, although
// the keys may be complete: the lane cannot tell them from a restore, and
// errs on the safe side. A lane needs one writable primary: on servers
// that replicate writes both ways (active-active), each primary would find
// the other's pair and quarantine at every switch. The scripts need INFO:
// a Redis user whose ACL forbids it (INFO is in @dangerous) gets an error
// from every call of the lane, rather than a lane that cannot see
// restarts. Reading it costs each acquire, refresh and fleet call, and
// each release made while callers wait, some ten microseconds of the
// server's thread (Redis 7.0 on a loaded 2-core VM).
//
// A fleet lane ([Fleet]) whose state was lost or restored also gets a new
// term: above the stored one, above every term that the instance making
// the call has seen ([Fleet.Term], which never goes back), and above the
// server clock in microseconds; a leadership that the leader key brought
// back from an earlier term is void. Each limit is stored with the term in
// which the leader wrote it, and each instance sends the term of the limit
// it last read: the lane keeps the stored limit unless the calling
// instance's was written in a later term (a write that Redis lost), so
// that a follower that has not read the leader's last write yet, or a new
// instance with its initial limit, never brings an older limit back. A
// lane re-created from nothing takes the calling instance's limit. An
// acquire or a refresh that finds the loss first does not know the terms
// the instances saw, so the term it gives may be below one of them; that
// instance's next call moves the term past it, without another quarantine
// (the loss was already found).
// After a loss, fencing tokens go on above every token granted before it:
// the first grant comes after the quarantine, with a token seeded from the
// server clock (this needs the server's clock not to step back by more
// than the quarantine).
//
// # Configuration
//
// Every instance of a lane must use the same capacity: an instance whose capacity
// differs from the one stored in Redis fails with [ErrCapacityMismatch] rather
// than change it. To change the capacity on purpose, stop the lane's users and
// delete the key {lanes:<name>}:meta, or use a [Fleet], whose capacity is
// changed at run time. Instances should use the same lease
// ([WithLease]); if they do not, set [WithQuarantine] to the longest.
//
// The go-redis client must have ContextTimeoutEnabled: true; [NewWeighted]
// and [NewKeyed] refuse a [redis.Client], [redis.ClusterClient] or
// [redis.Ring] without it (an error wrapping [ErrInvalidConfig]). go-redis
// applies a context's deadline to the connection only with that option;
// without it every call waits up to ReadTimeout (times its retries),
// whatever its context, and the bounds below could not hold. A client of
// another type is taken at its word.
//
// # Sequence order: a thread's messages in order across the fleet
//
// A [Keyed] made [WithSequenceOrder] serves each key's waiters, whichever
// instance they came to, by ascending [semaphore.Sequence] number, then
// arrival, as keyedsem.WithSequenceOrder does in one process: give each
// message of a thread its number and, with round-robin routing over the
// replicas, message 2 runs before 3 if both wait. A call without a number
// waits at 0. The order is decided in Redis, by the scripts, for the
// waiters queued there: each waiter of a sequenced key asks Redis itself
// (no local line in front, no batch), so a caller that finds its key free
// takes it, whatever its number, and a caller queued behind others is
// served as soon as it is the lowest and fits. Numbers must lie within
// ±2^53 (Redis scripts count in doubles); another is refused with an error
// wrapping [ErrInvalidConfig], as is any other per-call option but
// [semaphore.Weight].
//
// With [WithReorderHold](d) too, a caller numbered n waits, even on a free
// key, until the key has granted n-1 or more, or until the key's oldest
// waiter has waited d (on the server's clock): the key's queue then goes in
// number order, and each grant made so is counted in [Stats].HoldsRunOut
// of the instance whose caller it was. A number at or below the highest
// granted is not held (a late or repeated message goes in number order),
// nor is a caller without a number; a [Keyed.TryAcquire] that would be held
// gets false. A key remembers its highest number while its keys live in
// Redis: they expire two longest leases or more after its last entry
// ended, and a key that knows no number lets its first caller go at once,
// whatever its number. A held waiter asks Redis again when its hold runs
// out (and otherwise after 5-250 ms, jittered, as any waiter); it
// keeps its queue entry by the refreshes of its instance, so a hold may be
// longer than the lease.
//
// The order covers the first 256 waiters of a key in arrival order (a
// script reads them each time it picks the next; keys are meant for the
// messages of one thread, a handful at a time): a later arrival is
// considered once one of those is served. A cancelled or closed waiter's
// entry leaves the queue, as a FIFO waiter's does, and the key goes on to
// the next number; a holder whose lease lapses hands the key on in number
// order at the next call that sees the lapse (a waiter's poll, within its
// hint). The order and the hold are part of the lane's kind in Redis:
// every instance of the name must use the same ones (a FIFO instance, or
// one with another hold, fails with [ErrCapacityMismatch]). A FIFO Keyed
// (the default) runs the same scripts as without this option, at the same
// cost; a [Weighted], [Fleet] or [Tokens] lane refuses the option. A
// lanequeue.Queue passes a call's semaphore.Sequence to a sequenced lane
// made by [AsKeyedLane] (and so does lanehttp's middleware, from the
// request's number), in AcquireAll and TryAcquireAll alike.
//
// # Priorities and fair share: one order for the fleet's callers
//
// A [Weighted] or a [Fleet] made [WithPriorities](step), [WithFairShare]
// or both serves its waiters, whichever instance they came to, in the
// order of package semaphore's lanes ([semaphore.WithPriorities],
// [semaphore.WithFairShare]; the contract is package semaphore's, "Order"):
// a band, the call's [semaphore.Priority], aged (a waiter's band rises by
// one per whole step it has waited, and a newcomer passes only waiters
// whose aged band is below its own, so a waiter of priority p is passed
// only by priorities q > p arriving less than (q-p)*step after it); within
// a band, fair share across [semaphore.Group]s by weight (start-time fair
// queuing: a waiter's tag is the later of the lane's virtual time and its
// group's last finish, so while groups wait each is granted in proportion
// to its weight, give or take one largest request, and a group that stops
// waiting keeps no credit and no debt); within a group, FIFO. A head that
// does not fit holds back everyone behind it, and is passed only by
// newcomers whose turn comes before its own. [Weighted.Acquire] and
// [Weighted.Do] take the two options (another that sets something is
// refused, as is either on a lane not made to order by it); a
// lanequeue.Queue passes a call's Priority and Group to a lane made by
// [AsLane], and a [Budget] passes its Acquire's.
//
// The order is decided in Redis, by the scripts: each waiter of an
// ordered lane asks Redis itself (no local line in front, no batch), and
// the acquire script places it once, as it joins, as the in-process queue
// does: compared with the queued waiters from the newest back, ahead of
// those it goes ahead of, behind the first it does not. The queue's scores
// are positions, so serving the head, on a release's hand-over, costs
// what it costs on a FIFO lane; placing a newcomer costs a comparison per
// waiter it passes, in the server's one thread (in
// BenchmarkContendedFleetOrdered, 100 callers over 3 priorities and 4
// groups, a newcomer passed some 66 waiters, and the scripts took about
// 3.5 times FIFO's server time per call: the lane granted about half as
// many permits a second). Under fair share the groups' records live in one more
// key of the lane ({lanes:<name>}:g:r), which expires with the others.
// What differs from one process:
//
//   - Aging runs on the Redis server's clock (TIME, in microseconds), from
//     a waiter's arrival: when its first acquire call reached Redis, not
//     when Acquire was called. The step is 1 ms or more.
//   - A newcomer is compared with the 1024 newest waiters at most: one
//     that would pass more is placed behind the 1024th.
//   - Tags count in doubles, exact up to 2^53, and saturate there (some
//     10^10 grants without a break in the queue), as the in-process ones
//     do at 2^63: then equal tags go in arrival order.
//   - A group's weight is read on the instance where its call is made
//     (weight is called once per Acquire): give every instance the same
//     function. The step and whether fair share is on are part of the
//     lane's kind in Redis: an instance made otherwise (or FIFO) fails
//     with [ErrCapacityMismatch].
//   - The bands share one virtual time: a group is charged in its calls'
//     band only, as in one process, but one that starts waiting in a band
//     after the other bands' grants moved the time on is tagged behind
//     that band's waiters tagged before it (in one process each band keeps
//     its own time, and starts it again when its last waiter leaves;
//     keeping a count of each band's waiters in Redis, at every way an
//     entry leaves the queue, is what that would take).
//   - A grant that its waiter gives back (its context ended as the grant
//     came) is released, and leaves the virtual time where the grant put
//     it (in one process it goes back).
//   - TryAcquire is granted only when nobody is queued in Redis, as on a
//     FIFO lane, whatever the call's place.
//
// A FIFO lane (the default) runs the same scripts as without the options,
// at the same cost: one call per Acquire uncontended, batches, no
// added key. [WithQuota] (grants in process from blocks), a [Keyed] (its
// order is FIFO or [WithSequenceOrder]) and a [Tokens] lane refuse the
// options.
//
// # A limit changed at run time: Fleet
//
// [NewFleet] makes one instance of a global lane whose capacity, the
// fleet's limit, a limit controller changes at run time through
// [Fleet.SetCapacity] ([Fleet] has the Capacity and SetCapacity of the
// controller's target). One instance, elected in Redis, writes it; the
// others' SetCapacity calls are dropped. Every grant is decided in Redis
// against the stored limit, in the same script that reads it, so exactly
// one limit is in force at any instant, fleet-wide; each instance's
// Capacity, which decides only the weights it refuses at once, is the
// limit in force or, for at most one refresh interval plus one call after
// a change, the one before it ([WithLimitRefresh], default 1 s). A
// leader that stops renewing is replaced within three intervals plus one;
// a write is fenced by the leader's term, so a replaced leader never
// writes. Shrinking never preempts a holder: the holders over the new
// limit drain, and a waiter heavier than it fails with [ErrTooHeavy].
// While Redis is unreachable the limit does not change (nobody can raise
// it), each instance keeps the last limit it read, and the leader's value
// is held until Redis answers, then written if its term still lasts, else
// dropped. An adaptive.Controller over a Fleet moves the limit only on
// the leader; a follower's takes the fleet's limit, and a new leader's
// continues from it (adaptive.Shared). Each fleet call also reads the
// weight the whole fleet holds: the leader's controller grows the limit
// only if the fleet held half of it at one of those samples in the round
// trip ([Fleet.FleetInUse], adaptive.UseSharer), and counts the overloads
// the followers shared ([Fleet.ShareOverload]), but not those shared while
// the follower held a permit granted before the limit's last cut, which
// that cut answered. [AsBudget] gives Controller.Do the fleet's permits.
// See [Fleet] for the details.
//
// # Cooldown: a provider's retry time, for the whole fleet
//
// [Weighted.Cooldown] (so a [Fleet]'s and a [Budget]'s too) and
// [Tokens.Cooldown] close a lane until d from now on the Redis server's
// clock: one "closed until" in the lane's meta hash (field cu), which a
// cooldown only ever extends (a later end replaces it, an earlier one
// never shortens it) and which every script that grants compares with
// the server's TIME, as it does the quarantine: an acquire, the waiters
// behind a first waiter in its call, a release's hand-over, a refresh and
// a Fleet's raise grant nothing while it lasts, so no instance is granted
// before it ends, whichever instance set it. It ends by itself: the first
// call after it grants as usual (the waiters queued in Redis, in their
// order). Waiters keep their place, in their instance's line and in the
// Redis queue. The reply of each acquire call tells the instance how
// long the lane stays closed, which it counts from the call's send time
// (so never later than the server's end): a caller whose context's
// deadline comes before the reopening fails at once with a [*LateError]
// (Err [ErrCoolingDown], RetryAfter: until the reopening), whether it
// asks Redis, waits behind its instance's first waiter (it is told when
// the instance learns of the cooldown) or arrives after; nothing is held.
// A caller whose deadline has room waits. Cooldown is one call, bounded
// by a fifth of the lease; it returns the time until the reopening as
// Redis has it. The end is lane state like any other: a Redis that loses
// the lane's state loses it (the lane is then quarantined). Through a
// lanequeue.Queue the refusal is the cause of the lane's LaneError
// (errors.As reaches the LateError), whose RetryAfter is the LateError's.
// Queue.Cooldown of a lane made by AsLane, AsKeyedLane (every key) or
// AsRateLane pauses the queue's callers and, through the lane, the
// fleet. Every instance of the lane must run a version of this package
// that has cooldowns: an older one's scripts do not read the end, and
// grant through it.
//
// # Tokens: a budget per window for a fleet
//
// [NewTokens] makes one instance of a budget of units in any window (a
// minute and two seconds by default, [WithWindow]): a provider's tokens per minute, or
// its requests per minute at one unit each, shared by every instance of
// the name. An acquire is one script call: it drops the charges that left
// the window and, if the lane is open and the window's count plus the
// estimate fits the budget, charges the estimate at the server's time
// (no charge waits in Redis; a retried call with the same id returns the
// same charge). A charge counts until its time plus the window, on the
// server's clock. [Charge.Settle] then sets what the charge counts to the
// actual count of the call (absolute, so a repeated or retried settle
// changes nothing more): below the estimate, the difference is refunded
// from the charge while it is in the window (never more than it holds);
// above, the excess is charged as a debt at the settle's time, which
// later callers wait out. Each admission is decided against the count of
// the window that ends at it, so the units charged in any window (each
// call's estimate, or its actual count once settled) never pass the
// budget at its last admission; what can pass it is the debts settled
// after that. Counted at the provider by admission time, a window holds
// at most the budget plus what the estimates of the calls unsettled at
// its last admission fell short by: one estimate's error per call in
// flight, whatever the number of instances (the bound of one process
// running those calls; estimates that are never low leave none). A caller
// whose room comes
// after its context's deadline fails at once with a [*LateError] (Err
// [ErrWindowFull]); callers of one instance ask Redis one at a time, in
// arrival order, but instances do not queue in Redis, so a heavy charge
// may be passed by lighter ones of other instances. After Redis lost the
// lane's state, and when it is new, the lane grants nothing for one
// window by default (its quarantine: a caller whose deadline comes first
// fails at once with Err [ErrQuarantined]). [AsRateLane] puts a Tokens lane in a lanequeue.Queue as a
// rate lane: a ticket's Settle settles the lane's charge as Charge.Settle
// does, and a call that a later lane refused, or whose context ended, gives
// its estimate back (each one Redis call, bounded as Charge.Settle is). A
// charge the call held while it waited for another of its rate lanes is
// moved to the end of that wait, keeping its units (one Redis call), so
// that the fleet counts the call when it is let through, as a provider
// does (lanequeue's rate tail: docs/api-details.md).
//
// # Quota leasing: grants in process, from blocks of the capacity
//
// With [WithQuota](block), a [Weighted] instance leases the capacity in
// blocks and grants from them in process, with no Redis call per grant.
// A block is an ordinary permit of the lane, of weight block: it is taken
// through the acquire script (waiting in the Redis queue like any
// waiter), refreshed by the instance's refresher with its other permits,
// and released by the release path. The instance grants from the blocks
// it holds through an in-process semaphore (package semaphore) whose
// capacity is the units of its blocks; the permits it returns are
// [*Permit] values, as without quota. The instance leases a block (one at
// a time) while callers wait in its local line and it holds less than
// the capacity, and returns a block when for a whole return interval
// (100 ms) at least a block's units were idle and no caller waited. A
// lane may have instances with quota and instances without.
//
//   - The fleet never exceeds the capacity: the blocks are permits of it,
//     and an instance grants at most the units of the blocks whose leases
//     it holds. The capacity must be a multiple of the block, and an
//     Acquire takes at most a block ([ErrTooHeavy] above).
//   - A lapsed block ends every permit granted from the instance's blocks
//     until then (the in-process semaphore does not say which block's
//     units a grant took, so all of them: more than needed, never less):
//     their contexts derive from the blocks' and are cancelled with the
//     block's cause ([ErrLeaseLost], [ErrLeaseExpired]). Its units leave
//     the instance's capacity first, so units still held by those
//     holders are granted to nobody until they release. A permit's
//     [Permit.Deadline] is the earliest of the blocks' deadlines. A
//     crashed instance's blocks come back within one lease.
//   - Order: FIFO within the instance only. Across instances, the block
//     requests queue in Redis in arrival order, one per instance: fleet-wide
//     FIFO among callers is given up.
//   - Waiting for units idle elsewhere: an instance does not know that
//     another waits. Units left idle in one instance go back within two
//     return intervals (200 ms) and reach an instance waiting for them
//     with the hand-over's wake-up (a pub/sub message, or its poll within
//     250 ms): 450 ms at most, on top of Redis's own time. Units kept busy
//     are not returned: an instance whose callers keep all the capacity in
//     use keeps it, and the others wait until its load drops.
//   - Fencing: a local permit carries the fencing token of the instance's
//     newest block, shared by every grant from it; it is no fencing token
//     across instances. Quota suits budgets, not mutual exclusion.
//   - Calls: a block costs an acquire and a release, and the one refresh
//     call of the instance each third of a lease carries all its blocks.
//     TryAcquire grants from the blocks held, or, if they are short and no
//     caller of the instance waits, leases one block with one call.
//   - Close ends the local permits ([ErrClosed]) and gives every block
//     back at once (within 250 ms more than Close's bound without quota),
//     so the fleet gets the units without waiting for a lease.
//   - [Weighted.Stats] counts the blocks (as permits of the block's
//     weight), not the grants made from them. A cooldown stops the leasing
//     of blocks: the blocks held go on granting until they are returned,
//     so use a lane without quota where a cooldown must stop every
//     instance at once.
//
// # Keys and Cluster slots: several lanes in one call
//
// The hash-tag rule: every key of a lane starts with {lanes:<name>}, or,
// for a lane made [WithHashTag](tag), with {lanes:<tag>}{<name>}. Redis
// Cluster hashes only what is inside the first braces, so a lane's keys
// are all in one slot, two lanes share a slot when they were made with the
// same tag, and two lanes without a tag are, in general, on different
// slots (their names are their tags). A lane's tag is part of its state's
// name: every instance of a lane must use the same tag, and changing it
// starts a new lane (the old keys expire or stay idle). A name holds no
// brace, and neither does a tag, so no two lanes ever share a key. A
// Tokens lane takes no tag.
//
// [TryAcquireAll] takes permits of several lanes that share a slot (a key
// of a [Keyed] and a [Weighted], say: a per-user and a global limit) in
// one script, all or none: the script reads each lane as an acquire does,
// hands each lane's queue what is free first, and grants every request
// only if each would be granted to a TryAcquire at that moment (the lane
// open: no quarantine, no cooldown; nobody queued in Redis; the weight
// fits), else none. Redis runs a script alone, so no call of any instance
// ever sees some of the requests granted and not the others, and a
// refused call leaves nothing held or queued. It never jumps a lane's
// queue, nor a caller of the instance waiting on a request's bucket. Each
// permit it returns is an ordinary permit of its lane: its own fencing
// token (two keys of one Keyed take two tokens of the lane's counter), a
// lease refreshed with the instance's others, released on its own
// ([Permit.Release]), one call each. On a Cluster (any client other than
// a *redis.Client), lanes with different tags are refused with an error
// wrapping [ErrInvalidConfig], before any call (Redis would refuse the
// script's keys: CROSSSLOT), also two whose tags happen to hash to one
// slot: the rule is the tag, so that it holds on every Cluster, whatever
// its slots. On a *redis.Client every key is on one server and any lanes
// of the client go together. A lane made [WithQuota],
// [WithPriorities], [WithFairShare] or [WithSequenceOrder] cannot take
// part: its grants are not the plain acquire's.
//
// [AcquireAll] waits: it tries all at once, and when a lane refuses it
// waits for that lane alone, in the lane's queue like any Acquire, holding
// nothing of the others; once granted there it tries the others all at
// once again, keeping that permit (the script renews its lease rather than
// grant it again), and on a refusal gives it back and waits on the lane
// that refused now. So it never holds one lane while it waits for another,
// and never jumps a queue; what it gives up is a place: it holds the lane
// it waited for, alone, for the one call that tries the others, and a
// caller whose lanes are busy by turns may wait long.
//
// # Bounds
//
// Every Redis call of a lane has a deadline: the margin, a fifth of the
// lease (2 s with [DefaultLease]), for an acquire call, the release or
// clean-up of a permit or of a waiter that left, and the subscription of
// the first waiter of a channel; the refresh period, at most a third of the
// lease, for a refresh. The blocking calls return:
//
//   - Acquire: when the permits are granted, when its context ends (at once,
//     even with a call in flight, its own or the call of the first waiter
//     of its line that carries its request: the call goes on in the
//     background and what it granted the caller is released), or at Close (with [ErrClosed]: at
//     once, but an Acquire whose context can never end, such as
//     context.Background(), first waits for its call in flight, within one
//     margin). It has no bound of its own: give it a context with a
//     deadline.
//   - TryAcquire: within the margin (one call).
//   - [Permit.Release]: within the margin and at most 250 ms, whatever Redis
//     does. A release that did not get through by then is tried once more
//     in the background, and the lease runs out anyway.
//   - Close: within a third of the lease plus 250 ms (3.6 s with the
//     default lease; 250 ms more with [WithQuota]), whatever Redis does: the longest a refresh call in
//     flight may take, and a subscription's connection. With several lanes
//     on one client, the lease is the longest of theirs.
//   - Do: as Acquire, then fn, then Release.
//   - Cooldown, and a [Tokens] lane's TryAcquire and [Charge.Settle]: one
//     call each, within the margin. A Tokens lane's Acquire: as a lane's
//     (no bound of its own); its Close: within one margin (the refunds it
//     runs in the background).
//
// The other methods (Stats, Capacity, Name, a Fleet's SetCapacity, Leader
// and Term, and a permit's Fence, Context, Deadline, Weight) make no call
// and never block. A permit's context ends
// at the latest at its [Permit.Deadline]; with [WithMaxHold] no permit is
// held for longer than the bound given.
//
// # Metrics
//
// Stats is a snapshot of one instance: its permits held, its waiters and
// its calls' counters, and with [WithHistograms] its grants' wait and hold
// times ([semaphore.Timings], timed on the local clock: no Redis call is
// added). Its Capacity is the lane's, the same on every instance. As a
// queue's lane ([AsLane], [AsKeyedLane], [AsRateLane]) a lane says so
// (lanequeue.LaneStats.Fleet), so that the exporters of the nested module
// github.com/sessionlane/lanes/exporters report its capacity once over a
// fleet, not once per instance, beside each instance's use.
//
// # Ownership, cancellation, memory ordering
//
// A permit is owned by whoever received it, until Release; Release is
// once-only, stops refreshing the lease first, then removes the permit from
// Redis. Close ends every permit of the instance (cause [ErrClosed]); their
// leases are no longer refreshed and run out in Redis within one lease of
// their last refresh (one in flight at Close may still go through). If
// Acquire returns an error, nothing is held: a grant that raced with the
// caller's cancellation, or with Close, is released in the background. A
// context that ended before a grant reached the waiter wins: the grant is
// released and Acquire returns the context's error. The Redis call that
// releases a permit happens before the call that grants its permits to a
// waiter, in any process.
//
// # Goroutines
//
// Each instance runs one refresher goroutine (a [Fleet] one more: the
// call that reads the limit and keeps the leadership; a [Weighted] with
// [WithQuota] one more, which leases and returns its blocks, and one
// while it asks Redis for a block); each process runs one pub/sub
// receiver per Redis client while a lane on it that has had a waiter is
// open (on a Cluster client, one per shard channel; on a Ring, one per channel); a waiter whose context ends during a call
// leaves the call to a goroutine that cleans up (which also settles the
// outcome of the waiters behind it that the call carried), a Release whose
// call takes long leaves it to one, and the releases made while a release
// call of a bucket is in flight are sent by one per bucket, while there
// are any. Close stops them all before it returns,
// within its bound, including the receiver and the subscription call that
// its lane set off when other lanes still use the client.
package redislane
