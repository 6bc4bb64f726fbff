package lanequeue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrDraining is returned by every call that would take lanes of a queue
// that [Queue.Drain] is draining: AcquireAll, Do, Join (TryAcquireAll
// returns false) and Check. It wraps [ErrClosed], so that code that treats
// a closed queue as shutting down treats a draining one alike.
var ErrDraining = fmt.Errorf("lanequeue: draining: %w", ErrClosed)

// drainState counts what [Queue.Drain] waits for: the calls admitted and
// not yet ended, the places taken and not yet waited for or left, and the
// tickets out. One admitted call, place or ticket counts 1 from its
// admission to its end (a failure, a Leave, a Release); a ticket taken by
// a call or a place's Wait carries on the count of the call.
//
// The count is striped, one cache line per stripe, chosen by stripeHint,
// so that goroutines on different cores rarely share a line: an admission
// and its end may fall on different stripes, and only the sum means
// anything. How Drain reads the sum without a lock:
//
//   - admit adds 1, then loads draining, and backs out (subtracting 1 on the
//     same stripe) if it is set. Drain stores draining before it reads the
//     stripes. The atomics are sequentially consistent, so every call that
//     was admitted (its load saw false) added its 1 before Drain's first
//     read, and every call refused from then on adds and subtracts on one
//     stripe, which reads as 1 or 0, never below.
//   - So while Drain reads, no stripe is missing an admission, and a stripe
//     reads low only by ends that did happen: a sum of 0 means everything
//     admitted has ended, and nothing can be admitted any more.
//   - An end (leave) subtracts, then loads draining and, if set, pokes:
//     Drain takes the channel to wait on before it reads, so an end after
//     its read closes the channel it waits on.
type drainState struct {
	active   [holderStripes]paddedCount
	draining atomic.Bool

	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed (and reset to nil) when something ends while draining
}

// paddedCount is one stripe of the count, alone on a 64-byte cache line.
type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

// admit counts a call in, or refuses it with ErrDraining.
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

// leave counts out a call, place or ticket that admit counted in.
func (q *Queue[K]) leave() {
	q.drain.active[stripeHint()].n.Add(-1)
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
	return n, ch
}

// Drain stops admitting work, waits until the work admitted has ended,
// and then closes the queue: what OpenClaw's markGatewayDraining followed
// by waitForActiveTasks gives a gateway that shuts down or restarts.
//
// From the moment Drain is called, new calls are refused: AcquireAll, Do
// and Join fail with [ErrDraining] (which matches [ErrClosed]),
// TryAcquireAll returns false. The work admitted before goes on as usual:
// tickets out are used and released, callers already waiting in a lane's
// line are served in their turn (their tickets released in turn), and
// places already taken are waited for or left. Once all of it has ended
// (no ticket out, no call in progress, no place standing) Drain closes the
// queue ([Queue.Close]) and returns nil: nothing is held then, in any
// lane, and nothing can be taken any more.
//
// Cancellation: if ctx ends first, Drain returns an error that wraps
// ctx.Err() and says how much is still out, and leaves the queue draining
// (refusing new work) but open: the work admitted goes on. Call Drain
// again to wait more, or Close to fail the callers still waiting (the
// tickets out stay valid and must still be released).
//
// Drain is safe for concurrent use, also with itself (each call waits and
// closes), and on a closed queue it waits for the tickets still out.
// Nothing ends a drain but its end: a queue does not go back to admitting.
//
// Cost: the count Drain waits on costs every call an atomic add at each
// end, on one of 32 cache lines picked by the goroutine's stack, and a
// load of a flag that only Drain sets.
func (q *Queue[K]) Drain(ctx context.Context) error {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	if q.done == nil {
		panic(zeroQueue)
	}
	q.drain.draining.Store(true)
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
			return fmt.Errorf("lanequeue: drain: %d calls, places or tickets still out: %w", n, ctx.Err())
		}
	}
}

// Draining reports whether [Queue.Drain] has been called: the queue admits
// nothing new.
func (q *Queue[K]) Draining() bool { return q.drain.draining.Load() }
