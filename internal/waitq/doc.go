// Package waitq is the waiting engine of the lanes semaphores: admission,
// the queue of waiters, the grant loop, leaving on cancellation, giving
// back a grant that came too late, failing waiters, the wake-up after
// unlocking, and the wait itself. Package semaphore and package keyedsem
// both wait through it; what is specific to each (a state word and its
// flags, tokens, references, bounds, counters) is supplied by the queue's
// [Owner], and, for admission, as data ([Gate]).
//
// # Protocol
//
// Under the owner's lock a caller is admitted ([Admit]): given its permits
// at once, refused, or told to wait; a caller that waits joins the queue
// ([Queue.Push]); then, without the lock, it calls [Wait] (or its parts,
// [Await], then [Outcome] or [End]; or [Receive], for a wait that nothing
// but the grant can end). A waker decides under the lock whom to serve:
// [Grant] serves waiters while they fit, claiming their permits through
// [Owner.Claim]; [Fail] fails them (Close, a shrink). A served waiter is
// off the queue, marked served, and linked into a [Chain], which the waker
// wakes after unlocking: one send on each waiter's channel. A waiter whose
// context (or maximum wait) ends takes the lock: if it was not served it
// leaves the queue, and if it was the head the ones behind it are served;
// if it was served, it receives its wake-up and gives a grant back
// ([Owner.Unclaim]), serving the ones behind.
//
// # Why it is right
//
// No waiter misses permits. Units come back either under the owner's lock,
// and the owner then calls Grant under the same hold, or by a lock-free
// atomic add to the owner's word. Admit sets a flag in that word (the
// semaphore's slow flag, an entry's queued bit) under the lock, with a
// compare-and-swap from the very word it found too short of permits (or the
// caller not first), before the owner pushes the first waiter, and the
// owner clears it ([Owner.Emptied]) only under the lock once the queue is
// empty. A release that lands before the compare-and-swap makes it fail, so
// the caller looks again and takes the permits instead of queueing; one
// that lands after finds the flag set and takes the lock to run Grant. An
// owner may also let a release look at the flag before it gives its units
// back (the semaphore's inline tokens): one that sees it set gives nothing
// back without the lock, but takes the lock and there either hands the
// units, token and all, to the head if it fits in them alone ([Hand]: a
// grant as Grant's, the rest given back and Grant run when the ones behind
// may fit in what is free besides), or gives them back and runs Grant; one
// that sees it clear adds them, and a flag set between its look and its add
// is found by the add, as above. A waiter that leaves from the head lets
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
// The order is the engine's, and the packages above never walk or reorder
// the queue: they push and call Grant, Fail and Wait, and Hand, Grant's
// step for a release that gives its own token to the head; they look at
// the head ([Queue.Head]) to decide. It is one order, in order.go, that
// composes three levels, the same on every lane:
//
//   - A band, the priority, with aging: a waiter's band rises by one for
//     each whole step it has waited, and a newcomer passes only waiters
//     whose aged band is below its own. So a waiter of band p is overtaken
//     only by a band q > p arriving less than (q-p)*step after it, which
//     bounds its wait: its priority deficit times the step, plus the work
//     ahead of it then.
//   - Within a band, a rank, lower first: a fair-share start tag
//     (semaphore.WithFairShare: start-time fair queuing, the tag the later
//     of the virtual time and the group's last finish; the groups' records
//     and the virtual time live in the semaphore, which moves it in its
//     grant loop), or a sequence number (keyedsem.WithSequenceOrder), or 0.
//   - Within a rank, arrival: FIFO.
//
// FIFO is every place zero and pays nothing for the rest: Push, not
// PushOrdered. The owner gives each waiter its [Place] before pushing; the
// decision is made once, as it joins ([Ahead]), and the list is never
// sorted again (two waiters of one band age alike, and no rank changes).
// PushOrdered finds the place as a walk from the newest, one waiter at a
// time, would, but passes a run of waiters of one lower band in one step
// when the newcomer goes ahead of all of them (see [Queue.PushOrdered]).
// Ahead is not transitive across bands: a waiter of band 1 behind an older
// one of band 0 that has aged past it cannot be passed by a later waiter
// of band 0, which therefore stays behind it whatever its rank. The rule
// kept is the bound (nobody is passed by a waiter that does not go ahead
// of it); rank order within a band holds between waiters that no such
// higher-band waiter separates.
// Grant serves the head while it fits and stops at the first that does
// not, so a heavy head is never overtaken; a newcomer that goes ahead of
// the head takes its permits at once if they are free, as from an empty
// queue (the owner's check, not the engine's).
//
// Bounded barging (semaphore and keyedsem WithBarging; barge.go) is not an
// order: a release may wake the head without granting it (Queue.Nudge:
// off the queue, served with neither a grant nor a failure, so the
// protocol's rules hold), and the owners' check that nobody waits before
// they take permits ahead of the queue becomes the policy's answer to
// whether a newcomer may barge. A nudged waiter takes free permits itself
// or goes back to the head. The whole protocol is the engine's, once
// ([BargeWait], [BargeServe]): the owners ([Barger]) keep its two flags,
// woken and strict, where their lock-free paths see them, and supply the
// claims; their barging fast path stays theirs.
package waitq
