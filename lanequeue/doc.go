// Package lanequeue provides a queue of named lanes that callers take
// together, all or nothing, so that work for one key runs in order while
// work for other keys runs in parallel within shared budgets.
//
// A [Queue] holds named lanes, each registered by [Queue.Add]: keyed lanes
// ([NewKeyedLane] over a [keyedsem.Keyed]: a budget per key), global lanes
// ([NewGlobalLane], [NewFairLane] over a [semaphore.Weighted] shared by
// every key), rate lanes ([NewRateLane], [NewTokenLane]) and any other
// [Lane], such as package redislane's. [Queue.Lanes] resolves names once
// into a [LaneSet]; [Queue.AcquireAll] takes every lane of a set for one
// key and returns a [Ticket]; [Queue.Do] runs a function under one:
//
//	q := lanequeue.New[string]()
//	err := q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]()))
//	err = q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(16)))
//	chat, err := q.Lanes("session", "global")
//	...
//	err = q.Do(ctx, threadID, chat, func(ctx context.Context) error { ... })
//
// Ownership, cancellation, happens-before: package [semaphore]'s, for a
// ticket of several lanes. The caller owns a ticket if and only if the
// call returned a nil error, and releases it once, from any goroutine; a
// Release happens before the calls it unblocks return. A context that
// ended before the last grant wins, as do a lane's refusal and a panic in
// code the call runs (a hook, a tenant function, a Lane): the call then
// holds nothing, its lanes given back newest first, rate tokens as far as
// the limiter allows ([NewRateLane]). Errors known in advance come before
// any lane is taken; a lane's come as a [*LaneError].
//
// Order: lanes are taken keyed first, then global, then rate, each kind by
// name, whatever order they were named in. So two callers never wait for
// each other in a cycle, a caller waiting for its key holds no global
// permit, and a rate token is spent only once the rest is held. Each lane
// serves in its own order, using the call's [semaphore.Priority],
// [semaphore.Sequence] or [semaphore.Group] if it orders by one.
//
// One key's messages in order: a goroutine per message loses their order;
// give each call its [semaphore.Sequence] on a keyed lane made
// [keyedsem.WithSequenceOrder], or take a key's messages from one goroutine.
//
// Work that may outlive a permit: a fleet lane's permit (package redislane)
// can end before its release, when its lease in Redis is lost, and the
// lane may then grant it to another holder. Such a lane is [Leased], and
// the work a ticket admits gets a context that ends with the permit
// ([WorkContext]; [Queue.Do] gives it to fn): work that watches its
// context stops before the permit's next holder starts.
//
// Re-entry: [Queue.Do] gives its function a context carrying the ticket
// ([WithTicket]); an AcquireAll with it that would wait for that ticket
// fails with [ErrReentrant] rather than wait for itself: for the same key
// on a keyed or global lane the ticket holds, whatever its room (the
// key's work nests inside itself), or for another key on a global or fair
// lane of this package that the ticket holds and whose capacity, as it
// stands, cannot hold the ticket's permits and the call's. Rate lanes
// hold nothing and never refuse.
// The check looks at each ticket of the context alone: calls that wait for
// each other's permits (two tickets in one context that together fill a
// lane, a caller queued ahead, a lane full of handlers whose nested calls
// wait) are not refused, and wait as any call does. During a [Queue.Drain],
// which refuses new work, such a call is admitted as the ticket's work.
//
// Errors: the sentinels are package semaphore's, defined there once:
// semaphore.ErrClosed (the queue or a lane closed; [ErrDraining] wraps
// it), ErrQueueFull, ErrWaitTooLong, ErrInvalidWeight, ErrTooHeavy,
// ErrPlaceUsed (Place.Wait), and ErrInvalidConfig, which every bad
// setting wraps: a lane name unknown, repeated or empty, a budget
// registered twice, another queue's LaneSet or the zero one, a LaneWeight
// off the set; and keyedsem's ErrNaNKey and ErrTooManyKeys. This package
// adds only what a caller must tell apart at run time: [ErrDraining] and
// [ErrReentrant].
//
// An AcquireAll costs its lanes' acquires, a lock and a coarse clock read,
// and allocates once per 64 calls. A Queue is made by New or Default, and
// must not be copied.
package lanequeue
