// Package semaphore provides a weighted semaphore whose permits are served
// in FIFO order by default and released exactly once.
//
// [New] makes a [Weighted]: [Weighted.Acquire] waits for permits,
// [Weighted.TryAcquire] does not, [Weighted.Do] runs a function under
// them, and [Weighted.Join] takes a [Place] in line to wait for later.
// The zero Weighted is not usable (its methods but Capacity panic); a
// Weighted is safe for concurrent use and must not be copied after first
// use. Packages keyedsem and lanequeue
// keep the contract below.
//
// Ownership: an acquire call that returns a nil error gives the caller a
// [Permit] (or a Place), to be released once, by any goroutine it is
// handed to; one that returns an error took nothing. A second
// [Permit.Release], through any copy, frees nothing and returns false
// (counted in DoubleReleases), even once the handle's memory serves a
// later grant. Every [Stats] has Available + Held == Capacity.
//
// Cancellation: a context that has ended fails the call at once, even if
// permits are free. A waiter whose context ends leaves the line at once. A
// context that ended before the grant wins even if the grant follows at
// once: the grant is given back to the waiters behind (counted in
// Cancelled, not Acquired) and the call returns ctx.Err(). [WithMaxWait]
// ends a wait in the same way, with [ErrWaitTooLong]; if Close or a shrink
// failed the waiter first, it gets that error. The caller owns a permit if
// and only if the error is nil.
//
// Happens-before: a Release happens before the acquire it unblocks returns.
//
// Order: FIFO by default. Two options order the line otherwise, alone or
// together, each level within the one before:
//   - [WithPriorities]: by [Priority], aged: a waiter of priority p is
//     overtaken only by those of a priority q > p that arrive less than
//     (q-p)*step after it.
//   - [WithFairShare]: within a priority, by [Group]: while groups wait,
//     each is granted permits in proportion to its weight, give or take
//     one largest request; a group that stops waiting keeps no credit and
//     no debt. A group's calls are charged in their own priority only: its
//     backlog at a low priority does not delay its calls at a high one.
//     Within a group, FIFO.
//
// A newcomer is placed once, as it joins, and passes only waiters it goes
// ahead of by these rules; one that meets a waiter it may not pass (of a
// higher band, or of a lower band aged up to its own) queues behind it,
// and so behind everyone ahead of it, whatever its group's turn. With
// both options, an aged low-band waiter thus holds a group's newcomers
// behind another group's backlog (TestEngineAgedBandHoldsBackFairShare in
// examples/chatgateway, whose lane uses weighted groups in one band). A request at the head that does not fit
// is not overtaken by anyone behind it, nor by TryAcquire: it holds back
// every band and group, and is itself passed only by newcomers whose turn
// comes before its own (a higher band within the aging bound, a group
// whose turn comes first). [WithBarging] instead lets
// running callers take free permits ahead of the line, as with
// sync.Mutex, until a waiter has waited the bound, then FIFO until no
// waiter that old is left; it orders nothing, so it takes neither option.
//
// Errors: context errors as they are, else the sentinels below, for
// errors.Is. Waiting is bounded only by [WithMaxWaiters],
// [WithMaxWaitingWeight] and [WithMaxWait].
package semaphore
