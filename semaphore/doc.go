// Package semaphore provides a weighted semaphore with strict FIFO service
// and permits that release exactly once.
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
// [WithMaxWaitingWeight] and [WithMaxWait].
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
// semaphore keeps fifteen permit tokens inside itself for that (a Weighted
// is about 1 KB); the waiters of the slow path, and tokens beyond the
// inline ones, are pooled.
//
// The zero Weighted is not usable; a Weighted must not be copied after
// first use.
package semaphore
