// Package lanequeue provides a queue of named lanes that callers acquire
// together, all or nothing, so that work for one key runs in order while
// work for other keys runs in parallel within shared budgets.
//
// A [Queue] holds lanes of three kinds ([Kind]): keyed lanes (a
// [keyedsem.Keyed]: one budget per key, by default one caller at a
// time per key), global lanes (a [semaphore.Weighted] shared by every key)
// and rate lanes (a golang.org/x/time/rate Limiter: how often work may
// start). [Queue.AddKeyedLane], [Queue.AddGlobalLane] and [Queue.AddRateLane]
// build them; [Queue.Add] registers any other implementation of [Lane],
// such as the Redis lanes of package redislane. [Default] builds the usual
// gateway pair "session" + "global".
//
// [Queue.Lanes] resolves a list of lane names once, when the program sets
// up, into a [LaneSet]. [Queue.AcquireAll] takes a permit on each lane of a
// set, for one key, and returns them as one [Ticket]; [Ticket.Release]
// gives them all back, once. [Queue.TryAcquireAll] does the same without
// waiting, and [Queue.Do] wraps acquire, the work and release:
//
//	q := lanequeue.Default[string](lanequeue.DefaultGlobalCapacity)
//	chat, err := q.Lanes(lanequeue.SessionLane, lanequeue.GlobalLane)
//	...
//	err = q.Do(ctx, threadID, chat, func(ctx context.Context) error { ... })
//
// A set belongs to its queue and keeps the lanes it resolved (see
// [LaneSet]); it is immutable and may be shared by every goroutine.
//
// All or nothing: on any failure (a context ending, a closed lane, a full
// wait queue) every permit already taken is released, newest first, before
// AcquireAll returns, and rate tokens reserved are given back as far as
// the limiter can without granting more than its bucket allows (see
// [NewRateLane]: tokens already due may stay spent). So too when code of
// the program that a call runs panics: a hook ([Queue.SetHooks]), the
// tenant function of [Queue.AddFairLane], the weight function of a lane's
// semaphore.WithFairShare, a [Lane] of another package. A call that
// returns no ticket holds nothing: AcquireAll, TryAcquireAll and
// [Place.Wait] give back everything they took, count the call out for
// [Queue.Drain], and let the panic go on to the caller ([Ticket.Release]
// likewise gives the ticket's permits back when a hook or an [Observer]
// panics). Errors that can be known in advance are returned before
// anything is taken: an unknown or repeated lane or an empty list by
// Lanes, at set-up; a weight no lane could grant or a closed queue by
// each call.
//
// Canonical order: whatever order the caller names the lanes in, they are
// taken keyed lanes first, then global lanes, then rate lanes, each group
// by name. Two callers therefore never wait for each other in a cycle; a
// caller that waits for its key holds no global permit, so a busy thread
// does not shrink the shared budget for everyone else; and a rate token is
// spent only once every other permit is held.
//
// Fairness: each lane serves its waiters in arrival order (the FIFO of
// package semaphore, per key for keyed lanes), unless its semaphore was
// built to order them by a call's [semaphore.Priority], [semaphore.Sequence] or
// [semaphore.Group]. A caller queues on one lane at a time; AcquireAll adds no
// queue of its own.
//
// Keeping one key's messages in order: callers are served in the order
// they join a lane's line, which is the order their AcquireAll calls reach
// it, not the order the messages came in. Starting one goroutine per
// message does not keep arrival order: the goroutines race to join, and
// the lane serves whichever joins first (a trial with a goroutine per
// message saw 82 to 408 of 1000 messages of one key handled out of order).
// Give the keyed lane [keyedsem.WithSequenceOrder] (AddKeyedLane's
// options) and each call its message's number with [semaphore.Sequence]: the
// key's waiting callers are then served in ascending sequence, whichever
// joined first, so message 2 runs before message 3 even when 3 reached the
// server first. It reorders only the callers waiting at the same time: a
// message that arrives after its successor already started runs after it
// (nothing holds the key back for a missing number). For strict order,
// read each key's messages in sequence and take the lanes in that order,
// from one goroutine per key: it takes the lanes for one message, runs it
// (or hands the ticket to a worker that releases it, as Example_gateway
// does), then takes them for the next. The session lane makes it wait for
// the key's previous message, so the key's messages run one at a time in
// the order read, while other keys' readers go on.
//
// A webhook that must answer at once cannot wait for the key's previous
// message: [Queue.Join] takes the message's place in the key's line (its
// first keyed lane) at once, in the order the handler calls it, and
// returns a [Place] that a worker waits for later ([Place.Wait] returns
// the ticket) or gives up ([Place.Leave]); see Example_webhook. The order
// is that of the Join calls, so of the requests' arrival at the server;
// or, on a keyed lane made keyedsem.WithSequenceOrder, that of the
// messages' numbers: Join takes the call's [semaphore.Sequence] (and
// [semaphore.Priority], [semaphore.Group]) as AcquireAll does, so that message 2's
// place goes ahead of message 3's when 3 reached the server first, as
// long as both still stand in line. The lanes that Wait takes after the
// keyed lane are given the options when Wait reaches them.
//
// Priorities: [semaphore.Priority] serves a call ahead of lower ones on the
// lanes built with priorities ([keyedsem.WithPriorities], and
// semaphore.WithPriorities for global lanes), with aging, so that lower
// priorities still run within the bound the option states (see
// Example_cronYieldsToUsers). Each lane takes only the options its
// semaphore orders by and ignores the others, counting nothing for them,
// so one call may carry a priority, a sequence and a group across lanes
// of different orders.
//
// Priorities and fair share together: a lane's semaphore takes one
// ordering option (priorities, fair share among groups, sequence, or
// barging), so no single lane orders by both. Two global lanes over the
// same work, one with semaphore.WithPriorities and one with
// semaphore.WithFairShare, do not combine either: a call waits on its
// global lanes one at a time, in name order, so the first decides who
// waits and in what order, and the second sees only the calls the first
// let through (its line is mostly empty, and its order decides little).
// Instead, give each lane the order for its own question: priorities on
// the keyed lane (keyedsem.WithPriorities: a key's waiting calls by
// priority) and fair share on the global lane (tenants' shares of the
// shared budget, with [semaphore.Group]); or choose the one order that matters
// on the lane that is the bottleneck.
//
// Keys: any comparable type. A key that is not equal to itself (a float
// NaN, or a struct, array or interface value holding one) is refused with
// [ErrNaNKey] (TryAcquireAll returns false), whatever the lanes: the
// re-entry check below compares keys, and a keyed lane could never find
// its entry again. The check costs nothing for key types that cannot hold
// a NaN (strings, integers, structs of them); [New] decides once.
//
// Re-entry: a goroutine that holds a ticket and acquires again for the
// same key and lane would wait for itself. [Queue.Do] gives its function a
// context that carries the ticket ([WithTicket] does it by hand), and
// AcquireAll with such a context fails at once with [ErrReentrant]. The
// check covers the same key only: a holder of the whole capacity of a
// global lane that acquires it again for another key (a sub-agent started
// from inside a handler, say) still waits for itself; give sub-agents a
// lane of their own, as the sub-agents example does.
//
// Ownership: the caller owns a ticket if and only if AcquireAll returned a
// nil error; it may hand the ticket to another goroutine, which then
// releases it. A second Release returns false and frees nothing, also
// once the queue has reused the ticket's record for another ticket. A
// released ticket answers as the zero [Ticket] does (no key, no lanes), so
// read what you need from it before releasing it.
//
// Memory ordering: a Release happens before the AcquireAll calls that it
// unblocks return, as with a mutex.
//
// The semaphores behind the lanes: [Queue.GlobalSemaphore] returns the
// [semaphore.Weighted] of a global lane, to resize it with SetCapacity
// (the queue honours the new capacity at once), and [Queue.KeyedSemaphore]
// the [keyedsem.Keyed] of a keyed lane, to Sweep its idle keys,
// also for the lanes that [Default] and the Add methods build;
// [Queue.SetRate] changes a rate lane's limit and burst.
//
// Errors: a call that fails on a lane returns a [*LaneError] that names
// the lane and why ("session" busy for the key, "global" full, a rate
// lane out of tokens until RetryAfter, a lane's refusal) and unwraps to
// the cause, so errors.Is(err, context.DeadlineExceeded) and the
// sentinels hold.
//
// Shutdown: [Queue.Drain] refuses new calls ([ErrDraining]), lets the work
// admitted finish (tickets out, callers in line, places), then closes the
// queue; package lanehttp serves HTTP requests through a queue's lanes.
//
// Nested work in a drain: the work admitted goes on with what it calls on
// the queue. An AcquireAll (or Do) whose context carries a ticket of the
// queue that is still held ([WithTicket]: Do gives its function such a
// context, and so does package lanehttp to a handler) is part of that
// ticket's work, not new work: while the queue drains it is admitted as a
// call before the drain was, whatever its key and lanes (a model call for
// a tenant, made by the handler of a thread's message). It waits in each
// lane's line in its turn, behind the callers already there (only admitted
// work stands in line while draining), is listed by [Queue.Holders] and
// [Queue.Waiters] like any call, and Drain waits for it and for its ticket.
// It stays admitted if the ticket it came with is released while it waits.
// Everything else is new work and is refused with ErrDraining: a call
// whose context carries no ticket of the queue, or only released ones (or
// tickets of another queue), and the calls that take no context
// (TryAcquireAll returns false, Join fails, Check says ErrDraining). A
// closed queue, also one that Drain closed, refuses every call
// ([ErrClosed]): Drain closes it only once no ticket is held, so nested
// work in progress keeps it open.
//
// Outcomes: [Queue.ObserveLane] gives a lane an [Observer] (an adaptive
// limit controller of package adaptive, driving a global lane's
// semaphore), which [Queue.Do] and [Ticket.Finish] tell the work's error
// and the time held before the permits go back.
//
// Diagnostics: [Queue.Holders] lists the permits out (lane, key, weight,
// since when), oldest first, also those of calls still waiting for a later
// lane; [Queue.Waiters] lists who waits for which lane, for which key, in
// which position, and [Queue.LineLen] one key's line; [Queue.Stats] gives
// each lane's counters and, for lanes made with their package's
// WithHistograms, its wait-time and hold-time histograms
// ([semaphore.Timings]). [Queue.SetHooks] reports slow waits, long holds
// and refusals as they happen, and [LogHooks] logs them with log/slog.
// All of it is off or idle until asked for: a call that takes its lanes
// at once is not listed anywhere but in Holders.
//
// Cost: an AcquireAll of a keyed and a global lane, and its Release, cost
// the lanes' own acquire and release, a copy of the set's lanes into the
// ticket (no lookup of names: the set did that once), and the bookkeeping
// of the ticket: one uncontended lock on one of 32 stripes at each end,
// which takes a record for the permits from the stripe's free records
// (four lanes inline) and gives it back, and a read of a coarse clock (an
// atomic load). The ticket's handle is 8 bytes, carved from a 512-byte
// block: AcquireAll allocates once per 64 calls (0 allocs/op as the
// benchmarks count), and 8 bytes per call for the GC to pace itself by. A
// TryAcquireAll that fails allocates nothing. See bench_test.go for the
// figures.
//
// Memory: a stripe keeps up to 8 free records (a few hundred bytes each)
// for reuse, and a ticket kept for long keeps its 512-byte block of
// handles alive.
//
// A Queue must be made with [New] or [Default]; the zero Queue is not
// usable (its methods panic with "lanequeue: the zero Queue is not usable:
// use New or Default"), and a Queue must not be copied.
package lanequeue
