// Package waitq is the waiting engine of the lanes semaphores: the queue of
// waiters, the grant loop, leaving on cancellation, giving back a grant that
// came too late, failing waiters, the wake-up after unlocking, and the wait
// itself. Package semaphore and package keyedsem both wait through it; what
// is specific to each (a state word and its flags, tokens, references,
// bounds, counters) is supplied by the queue's [Owner].
//
// # Protocol
//
// Under the owner's lock a caller that cannot be served at once joins the
// queue ([Queue.Push]); then, without the lock, it calls [Wait] (or its
// parts, [Await], then [Outcome] or [End]; or [Receive], for a wait that
// nothing but the grant can end). A waker
// decides under the lock whom to serve: [Grant] serves waiters while they
// fit, claiming their permits through [Owner.Claim]; [Fail] fails them
// (Close, a shrink). A served waiter is off the queue, marked served, and
// linked into a [Chain], which the waker wakes after unlocking: one send
// on each waiter's channel. A waiter whose context (or maximum wait) ends
// takes the lock: if it was not served it leaves the queue, and if it was
// the head the ones behind it are served; if it was served, it receives its
// wake-up and gives a grant back ([Owner.Unclaim]), serving the ones behind.
//
// # Why it is right
//
// No waiter misses permits. Units come back either under the owner's lock,
// and the owner then calls Grant under the same hold, or by a lock-free
// atomic add to the owner's word. The owner sets a flag in that word (the
// semaphore's slow flag, an entry's queued bit) under the lock, with a
// compare-and-swap from the very word it found too short of permits, before
// it pushes the first waiter, and clears it ([Owner.Emptied]) only under
// the lock once the queue is empty. A release that lands before the
// compare-and-swap makes it fail, so the caller looks again and takes the
// permits instead of queueing; one that lands after finds the flag set and
// takes the lock to run Grant. A waiter that leaves from the head lets
// Grant look at the next one, which may fit where the head did not.
//
// A context that ended first wins. When a grant and the end of the wait
// are both ready, select picks one at random; so a woken waiter looks at
// its context (and its timer) once more, without blocking. If the context
// ended before the release that granted the waiter (it happens before the
// release, which happens before the grant's send, which happens before the
// receive), that look sees it, and the grant is given back as if the
// waiter had left before it: counted only as the ending, the permits and
// token back at the same generation, the waiters behind served
// (go.dev/issue/63615). An ending concurrent with the grant may go either
// way; either way the caller owns a permit if and only if it gets no error.
// A waiter failed by Close or a shrink returns that failure, also if its
// context ended meanwhile: the failure was decided first, under the lock.
//
// A pooled waiter never holds a stale wake-up. A waiter is served by one
// party only, under the lock, which marks it served and takes it off the
// queue; that party sends once on its channel, which has room for one,
// after unlocking. The waiter goes back to the pool only after receiving
// that send, or after taking itself off the queue under the lock while
// unserved, when no send can come. The wake-up reads the next link before
// it sends, since a woken waiter may be reused at once.
//
// # Order of service
//
// The order is the engine's policy, and the packages above never walk or
// reorder the queue: they push and call Grant, Fail and Wait. (Their
// release paths write Grant's loop out over [Queue.Head] and [Queue.Serve],
// see Head for why: a policy that changes whom Grant serves, not only
// where Push puts a waiter, must change those two loops too.) FIFO is the
// policy now, written in two places of order.go only: where a waiter joins
// (Push: at the tail) and whom Grant serves (the head, while it fits,
// stopping at the first that does not, so that a heavy head is never
// overtaken). The next policies plug in there:
//
//   - Priorities with aging (done: semaphore.WithPriorities): the owner
//     pushes every waiter with PushAt at key arrival - priority*step, on
//     its clock. Aging raises every waiter's effective priority,
//     (now - key)/step, at the same rate, so ascending keys are the order
//     of effective priority at every later instant: the list stays sorted
//     without re-sorting. A waiter of priority p is overtaken only by a
//     priority q > p arriving less than (q-p)*step after it, so its wait
//     is bounded by its priority deficit times the step plus the work
//     ahead of it then. Grant is unchanged; a newcomer whose key is below
//     the head's takes its permits at once if they are free, as from an
//     empty queue (the owner's check, not the engine's).
//   - Sequence order within a key: a waiter carries a sequence number and
//     Push inserts by it; Grant serves the head only when it carries the
//     next number expected, which a leaving waiter passes on (leave already
//     serves the next one when the head goes).
//   - Fair share across groups (done: semaphore.WithFairShare): the owner
//     pushes with PushAt at the waiter's start tag in start-time fair
//     queuing (the later of the virtual time and its group's last finish;
//     the group's finish then moves on by the request over the group's
//     weight). The groups' records live in the semaphore, not in an entry,
//     and the virtual time moves in the owner's grant loop.
//   - Bounded barging (done: semaphore and keyedsem WithBarging; barge.go):
//     a release may wake the head without granting it (Queue.Nudge: off the queue, served with neither a grant
//     nor a failure, so the protocol's rules hold), and the owners' check
//     that nobody waits before they take permits ahead of the queue
//     becomes the policy's answer to whether a newcomer may barge. A
//     nudged waiter takes free permits itself or goes back to the head
//     (Queue.Rejoin); the owner writes that wait loop out (see
//     semaphore/barging.go).
//
// The ordered policies share Waiter's key (PushAt) and nothing else; each
// keeps its state, if any, in the owner that chose it; the keyed entry keeps its one head
// pointer, and the owners' claim, locking and counting do not change.
package waitq
