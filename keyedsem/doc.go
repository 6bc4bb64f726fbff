// Package keyedsem provides a weighted semaphore per key, made on first use
// and evicted when idle.
//
// [New] makes a [Keyed] for any comparable key type, such as a struct
// {Channel, Thread}. Callers of one key share the key's capacity, one at a
// time by default ([WithPerKeyCapacity]); callers of different keys never
// wait for each other, and no lock shared by keys is held while a caller
// waits. [Keyed.Acquire], [Keyed.TryAcquire], [Keyed.Do] and [Keyed.Join]
// are package semaphore's calls, per key. The zero Keyed is not usable
// (its methods panic); a Keyed must not be copied after first use.
//
// Ownership, cancellation and errors: as in package [semaphore], per key;
// a grant given back goes to the key's next waiters, and a context that
// has ended comes before any refusal. Per key, available + held ==
// capacity (Stats sums Held over the keys; the property tests check the
// invariant key by key against a model).
//
// Happens-before: a Release happens before the acquire of the same key
// that it unblocks returns.
//
// Order: per key as package semaphore's FIFO (a heavy head is not
// overtaken); nothing orders different keys. [WithPriorities]
// ([semaphore.Priority], aged as in package semaphore) and
// [WithSequenceOrder] ([semaphore.Sequence]) order each key's line, alone
// or together: number order within a priority, except that a newcomer
// never passes a waiter it does not go ahead of (a higher priority that an
// older, lower one has aged past keeps later numbers of that lower one
// behind it). [WithBarging], which orders nothing, takes neither. With [WithReorderHold](d) too, a caller numbered n waits,
// even on a free key, until the key has granted n-1 or more, or until one
// of the key's waiters has waited d: its line then goes in number order,
// each such grant counted in [Stats].HoldsRunOut. A number at or below the
// highest granted is not held, nor is a caller without a number (a
// TryAcquire that would be held returns false); a new entry (a key evicted
// when idle) knows no number, so its first caller goes at once.
//
// Keys are compared with ==, as in a Go map. A key not equal to itself (a
// NaN, or a struct, array or interface value holding one) could never find
// its entry again, and is refused with [ErrNaNKey].
//
// Eviction: an entry counts its holders, waiters and places, and the
// callers between looking it up and acquiring, raising the count in the
// same atomic step as the lookup; it is evicted only by one atomic step
// to dead, from idle with no references, or by the release of its last
// reference (idle timeout 0, or a key used once near [WithMaxKeys]). So an
// entry in use is never evicted, and two callers of one key never end up
// on two entries. Idle entries are kept for [WithIdleTimeout] and evicted
// by normal use (no goroutine or timer per key), [WithJanitor] or
// [Keyed.Sweep]; oldest first when they pass [WithMaxKeys]. An idle entry
// holds no goroutine, timer or channel: about 140 bytes with a 38-byte
// string key.
package keyedsem
