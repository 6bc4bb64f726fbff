// Package semaphore provides a weighted semaphore with strict FIFO service
// (or priorities with aging, opt-in) and permits that release exactly once.
//
// [New] makes a [Weighted] of a given capacity. [Weighted.Acquire] takes n
// permits, waiting in line when they are not available, and returns a
// [Permit]: a small handle whose Release gives the permits back the first
// time and does nothing (returning false, counted in [Stats]) ever after,
// through any copy, even once the handle's memory serves a later grant.
// [Weighted.Do] wraps acquire, the work and release, and releases on panic.
//
// Fairness: waiters are served strictly in arrival order. A request for
// many permits at the head of the queue is not overtaken by later lighter
// requests, nor by [Weighted.TryAcquire]; it waits until its permits are
// free. Bounded waiting is opt-in with [WithMaxWaiters],
// [WithMaxWaitingWeight] and [WithMaxWait]. [WithFairShare] serves the
// waiters by group (tenant) instead, each group's share in proportion to
// its weight, FIFO within a group (a call names its group with [Group]).
//
// Priorities are opt-in with [WithPriorities](step): callers pass
// [Priority](p) to [Weighted.Acquire], and the waiter of the
// highest priority plus steps waited is served first, FIFO among equals.
// The aging bound: a waiter of priority p is overtaken only by waiters of
// a priority q > p that arrive less than (q-p)*step after it, so once it
// has waited (P-p)*step, P the highest priority in use, nobody new gets
// ahead of it, and it waits only for the work then ahead of it. The head
// is still never overtaken by those behind it, heavy or not.
//
// Barging: where the order of service does not matter, [WithBarging] trades
// it for throughput, as sync.Mutex does: running callers take free permits
// ahead of the waiters, and a release wakes the oldest waiter to compete
// instead of handing it the permits, until a waiter has waited the bound;
// then service is FIFO again until no waiter that old is left.
//
// Ownership: exactly one party owns a granted permit at a time, and it may
// hand the Permit to another goroutine. If Acquire returns a nil error, the
// caller owns the permit; if it returns an error, nothing was taken. The
// invariant Available + Held == Capacity holds in every [Stats] snapshot.
//
// Memory ordering: a Release happens before the Acquire that it unblocks
// returns, as with a mutex.
//
// Speed: uncontended Acquire and Release are one atomic compare-and-swap
// and two atomic read-modify-writes, with no lock and no allocation. A
// semaphore keeps fourteen permit tokens inside itself for that (a Weighted
// is about 1 KB); the waiters of the slow path, and tokens beyond the
// inline ones, are pooled.
//
// Observability: [Weighted.Stats] gives the counters, and with
// [WithHistograms] the wait-time and hold-time distributions in fixed
// buckets ([Timings], [Histogram]), kept with atomic adds, without a lock
// or an allocation; off by default, when their cost is one predictable
// branch on the fast paths.
//
// The zero Weighted is not usable; a Weighted must not be copied after
// first use.
package semaphore
