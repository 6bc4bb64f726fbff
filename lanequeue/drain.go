package lanequeue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sessionlane/lanes/semaphore"
)

// ErrDraining refuses new work while the queue drains ([Queue.Drain]). It
// wraps semaphore.ErrClosed.
var ErrDraining = fmt.Errorf("lanequeue: draining: %w", semaphore.ErrClosed)

// drainState counts what [Queue.Drain] waits for: the calls admitted and
// not yet ended, the places taken and not yet waited for or left, and the
// tickets out. One admitted call, place or ticket counts 1 from its
// admission to its end (a failure, a Leave, a Release); a ticket taken by
// a call or a place's Wait carries on the count of the call.
//
// The count is in two parts, so that a ticket's Release adds no atomic
// operation of its own:
//
//   - active, striped over cache lines by stripeHint: admit adds 1, and
//     every end but a ticket's of rate lanes alone subtracts 1 (a failure,
//     a Leave, a refusal, and a ticket holding a keyed or global lane,
//     after its permits are back: the lane's semaphore may be used by
//     others too, so its Stats cannot tell Drain when the ticket's permits
//     are back). An admission and its end may fall on different stripes:
//     only the sum means anything.
//   - ended, one per stripe of the queue's holders and guarded by that
//     stripe's lock: the Release of a ticket of rate lanes alone, which
//     hold nothing, adds 1 there under the lock it takes anyway to retire
//     the ticket's record. A call admitted while draining on a held ticket
//     of the stripe (admitNested) adds 1 there too, in nested, under the
//     same lock; its end is any call's.
//
// How Drain reads the count without stopping the calls:
//
//   - admit adds 1, then loads draining, and backs out (subtracting 1 on the
//     same stripe) if it is set. Drain stores draining before it reads.
//     The atomics are sequentially consistent, so every call that was
//     admitted (its load saw false) added its 1 before Drain's first read,
//     and every call refused from then on adds and subtracts on one
//     stripe, which reads as 1 or 0, never below.
//   - A call admitted while draining on a ticket that its context carries
//     (admitNested) is counted in under the lock of the ticket's stripe,
//     while the ticket is held, so before the ticket's end is: Drain reads
//     either the ticket not ended or the call counted in.
//   - So no admission is missing from what Drain reads, and every end it
//     reads did happen, once: a sum of 0 means everything admitted has
//     ended, and nothing can be admitted any more (no ticket is held that
//     a nested call could come with).
//   - An end loads draining after it (a ticket's: after its permits are
//     back) and, if set, pokes: Drain takes the channel to wait on before
//     it reads, so an end that its read missed (the stripe's lock or the
//     lane orders the two) closes the channel it waits on.
type drainState struct {
	active   [holderStripes]paddedCount
	ended    [holderStripes]paddedEnds
	draining atomic.Bool

	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed (and reset to nil) when something ends while draining
}

// paddedCount is one stripe of the count, alone on a 64-byte cache line.
type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

// paddedEnds is the tickets released on one stripe of the queue's holders
// (n) and the calls admitted while draining on a ticket of that stripe
// (nested, see admitNested), guarded by that stripe's mu, alone on a
// 64-byte cache line.
type paddedEnds struct {
	n      int64
	nested int64
	_      [48]byte
}

// admit counts a call in, or refuses it with ErrDraining. A call with a
// context that admit refuses may still be admitted work: admitNested.
func (q *Queue[K]) admit() error {
	c := &q.drain.active[stripeHint()].n
	c.Add(1)
	if q.drain.draining.Load() {
		c.Add(-1)
		q.poke() // Drain may have read the 1 above
		return ErrDraining
	}
	return nil
}

// admitNested counts in, while draining (once admit has refused the call),
// a call whose ctx carries a ticket of q that is still held (see
// [WithTicket]), and reports whether it did: the call then ends as one
// that admit counted in does. Only a refused call looks at its context, so
// a call while the queue is not draining pays nothing for it.
// The count goes on the nested count of the ticket's home stripe, under
// the stripe's lock, while the ticket is seen held: the ticket's Release
// counts it out under the same lock, later. So a Drain whose read of that
// stripe comes before this admission finds the ticket not yet ended (its
// call counted since before draining was set), and one whose read comes
// after finds this call: the sum Drain reads never drops to 0 while the
// call is in, though its admission came after draining was set.
func (q *Queue[K]) admitNested(ctx context.Context) bool {
	for v := ctx.Value(ticketCtxKey[K]{}); v != nil; {
		c := v.(*ticketCtx[K])
		if r := c.t.r; r != nil && r.q == q {
			st := r.home
			st.mu.Lock()
			held := r.owner == c.t
			if held {
				q.drain.ended[q.stripeIndex(st)].nested++
			}
			st.mu.Unlock()
			if held {
				return true
			}
		}
		v = c.Context.Value(ticketCtxKey[K]{})
	}
	return false
}

// stripeIndex is the index of st among q's holder stripes.
func (q *Queue[K]) stripeIndex(st *holderStripe[K]) uintptr {
	return (uintptr(unsafe.Pointer(st)) - uintptr(unsafe.Pointer(&q.holders.stripes[0]))) / unsafe.Sizeof(*st)
}

// leave counts out a call, place or ticket that admit counted in.
func (q *Queue[K]) leave() {
	q.drain.active[stripeHint()].n.Add(-1)
	if q.drain.draining.Load() {
		q.poke()
	}
}

// endTicket counts out, under st.mu, the call of a ticket of st that is
// being released, if it holds rate lanes alone (shown reports whether it
// did). A ticket holding a keyed or global lane ends its call with leave
// once its permits are back.
func (q *Queue[K]) endTicket(st *holderStripe[K], hs []held[K]) (shown bool) {
	for i := range hs {
		if hs[i].e.rate == nil {
			return false
		}
	}
	q.drain.ended[q.stripeIndex(st)].n++
	return true
}

// ticketGone is the end of a Release whose call endTicket counted out:
// its permits are back, and a Drain waiting for them looks again.
func (q *Queue[K]) ticketGone() {
	if q.drain.draining.Load() {
		q.poke()
	}
}

// poke wakes the Drain calls waiting.
func (q *Queue[K]) poke() {
	d := &q.drain
	d.mu.Lock()
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
	d.mu.Unlock()
}

// active returns the sum of the count, and a channel that the next change
// closes. Read as the drainState comment says, a sum of 0 after draining is
// set means everything has ended.
func (q *Queue[K]) active() (int64, <-chan struct{}) {
	d := &q.drain
	d.mu.Lock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	ch := d.changed
	d.mu.Unlock()
	var n int64
	for i := range d.active {
		n += d.active[i].n.Load()
	}
	for i := range d.ended {
		st := &q.holders.stripes[i]
		st.mu.Lock()
		n += d.ended[i].nested - d.ended[i].n
		st.mu.Unlock()
	}
	return n, ch
}

// Drain refuses new work ([ErrDraining]), waits for the work admitted to
// end (tickets, callers in line, places, calls whose ctx carries a held
// ticket; not permits taken from a lane's semaphore directly), closes the
// queue and returns nil. If ctx ends first it returns an error wrapping ctx.Err()
// that says what is still out, and the queue drains on, open.
func (q *Queue[K]) Drain(ctx context.Context) error {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	if q.done == nil {
		panic(zeroQueue)
	}
	q.drain.draining.Store(true)
	q.mu.Lock()
	q.stop()
	q.mu.Unlock()
	for {
		n, changed := q.active()
		if n == 0 {
			q.Close()
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			n, _ = q.active()
			return fmt.Errorf("lanequeue: drain: calls, places or tickets still out: %d: %w", n, ctx.Err())
		}
	}
}

// Draining reports whether [Queue.Drain] has been called.
func (q *Queue[K]) Draining() bool { return q.drain.draining.Load() }

// Stopping returns a channel that is closed once the queue admits no new
// work: when [Queue.Drain] begins or at [Queue.Close], whichever comes
// first. Draining or the queue's closing is set before the channel is
// closed, so a call made after a receive from it is refused (with
// [ErrDraining] or semaphore.ErrClosed), unless a drain admits it as a
// held ticket's work (see [WithTicket]). It lets a caller that waits
// outside the queue, such as a retry's backoff, stop waiting for a queue
// that will refuse it.
func (q *Queue[K]) Stopping() <-chan struct{} {
	if q.done == nil {
		panic(zeroQueue)
	}
	return q.stopping
}

// stop closes q.stopping, once; q.mu must be held.
func (q *Queue[K]) stop() {
	select {
	case <-q.stopping:
	default:
		close(q.stopping)
	}
}
