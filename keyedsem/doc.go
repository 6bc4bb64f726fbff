// Package keyedsem provides a weighted FIFO semaphore per key, made on first
// use and evicted when idle.
//
// [New] makes a [Keyed] for any comparable key type: a string, or
// a struct such as {Channel, ChannelID, Sender, Thread} (no string
// building). Callers of the same key share the key's capacity, one at a
// time by default ([WithPerKeyCapacity] for more); callers of different
// keys never wait for each other. [Keyed.Acquire] returns a
// [semaphore.Permit], with the same once-only Release as package semaphore;
// [Keyed.Do] wraps acquire, the work and release, and releases on
// panic.
//
// Keys are compared with ==, as in a Go map. A key that is not equal to
// itself, a float NaN or a struct, array or interface value holding one,
// is refused with [ErrNaNKey] (TryAcquire returns false): its entry could
// never be found or removed again.
//
// Fairness: per key, waiters are served strictly in arrival order; a heavy
// request at the head of a key's queue is not overtaken by later lighter
// ones, nor by [Keyed.TryAcquire]. Nothing orders different keys. Two
// options order each key's waiters otherwise, by the per-call options of
// [Keyed.Acquire] and [Keyed.Join]: [WithPriorities] ([semaphore.Priority]:
// higher first, with aging, so that every waiter is served within a
// stated bound) and [WithSequenceOrder] ([semaphore.Sequence]: a thread's
// messages in the order they were sent, among those waiting at the same
// time).
//
// Parallelism: the map of keys is an xsync map, locked per bucket only for
// the instant a key's entry is made, joined or removed; no lock shared by
// keys is held while a caller waits for a key.
//
// Eviction safety: an entry counts references: its holders, its waiters,
// and every caller between looking the key up and acquiring. The reference
// is raised in the same atomic step as the lookup, and an entry is evicted
// only by one atomic step from the exact idle state an eviction saw (no
// references) to dead, so an entry in use is never evicted, and two callers
// of one key can never end up on two entries. Callers that find a dead
// entry make a new one under the map's lock. The count has 31 bits: a key
// with 2^31-1 references refuses the next caller with [ErrQueueFull]
// rather than wrap.
//
// Memory: with [WithIdleTimeout] 0 an entry goes as soon as it is not used;
// otherwise idle entries are kept for the timeout (default one hour), which
// makes the next use of a key allocation-free, and are then evicted by
// normal use (an eviction pass, amortised over releases and new keys; no
// goroutine or timer per key) or by [Keyed.Sweep]; and, oldest
// first, whenever the entries exceed [WithMaxKeys] (default 4096; only
// entries in use may exceed it). With
// [WithHardMaxKeys] a new key over the cap fails with [ErrTooManyKeys]
// instead, for keys from untrusted input. An idle entry holds no goroutine,
// timer or channel: about 140 bytes per idle key in all with a 38-byte
// string key, the key included.
//
// A place in line now, the wait later: [Keyed.Join] takes a caller's
// place in a key's line at once and returns a [Place], which is waited
// for later ([Place.Wait]) or given up ([Place.Leave]), so that a webhook
// can answer at once and its worker wait for the key's turn. With
// [WithSequenceOrder] and [semaphore.Sequence], a message's place is by its
// number, so that messages that reach the server out of order are served
// in order while they wait.
//
// Ownership: exactly one party owns a granted permit at a time, and it may
// hand the Permit to another goroutine. If an acquire returns a nil error,
// the caller owns the permit; if it returns an error, nothing was taken.
// Per key, available + held == capacity at all times.
//
// Cancellation: a caller whose context ends while it waits leaves the
// key's line at once, and if it was the head the ones behind are served if
// they fit. A context that ended before the permits came free wins: a
// grant that raced with it is given back to the waiters behind (counted
// only in Stats.Cancelled) and the call returns the context's error. This
// holds without waiting too: the context is looked at after the key's
// state is read and before free permits are taken. A context that had
// ended comes before any refusal.
//
// Memory ordering: a Release happens before the acquire of the same key
// that it unblocks returns, as with a mutex.
//
// The zero Keyed is not usable (its methods panic with
// "keyedsem: use New"); a Keyed must not be copied after first
// use.
package keyedsem
