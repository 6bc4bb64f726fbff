package waitq

import (
	"context"
	"sync"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/permit"
)

// This file is bounded barging (semaphore and keyedsem WithBarging), the
// whole protocol once: the wait loop of a barging waiter, its bound, the
// wake-up that is not a grant, the woken waiter's try, its giving up and
// its way back. The owner keeps two flags, woken and strict, where its
// lock-free paths see them (the semaphore in a word beside its state word,
// a keyed entry in its state word), and supplies its claims and counts
// (Barger); the engine decides when each flag moves. The barging fast
// path (a running caller taking free permits ahead of the queue while the
// owner is not strict) stays the owner's, inline.
//
// The model is sync.Mutex: normal mode, where a woken waiter competes
// with the running callers for the free permits, until a waiter has
// waited the bound; then starvation mode, strict hand-off in FIFO order,
// until no waiter that old is left.
//
//   - A release with waiters queued serves them (BargeServe): in strict
//     mode it grants in order (Grant), and ends strict mode once the head
//     has waited less than the bound or nobody waits (the waiters' Arrival,
//     stamped from the bound's clock as they queue: the head is the oldest,
//     so it alone says whether a waiter that old is left); otherwise, if
//     nobody is woken and the head fits the free permits, it sets woken
//     and nudges the head (Queue.Nudge: off the queue, served with neither
//     a grant nor a failure, woken after unlocking). While woken is set and
//     strict is not, releases leave the freed permits to the woken waiter,
//     without the lock.
//   - The woken waiter tries once for free permits, without the lock and
//     without spinning (Barger.Compete, which clears woken when it wins);
//     if permits are left it serves the queue again. If it lost, it goes
//     back under the lock (Barger.Reclaim): it takes the permits if they
//     are free now, fails after Close or a shrink, leaves if its context
//     ended, or rejoins the queue at its old place, the head (it was the
//     head, and everyone queued since came later), clearing woken; then it
//     serves the queue again (which may wake it at once). Whoever clears
//     woken looks at the free permits after the clear, and a release looks
//     at the flags after its add: with Go's sequentially consistent
//     atomics one of the two sees the other, so no freed permit goes
//     unnoticed while a waiter that fits them is queued.
//   - Every waiter arms a timer for the bound as it waits (pooled with the
//     system clock, so a wait allocates nothing). When it fires and the
//     waiter is still queued, the waiter sets strict and grants what fits;
//     if the waiter was woken meanwhile, it sets strict when it rejoins.
//
// One strict bit for both owners, not the semaphore's former count of old
// waiters: a count needs the bits of a word the lock-free paths read, and
// a keyed entry's word has none to spare (nor the entry a word: it stays
// six); and a bit cleared by the head's age says "until no waiter that old
// is left" by the waiters' own stamps, not by when the old ones' goroutines
// ran to count themselves out. It costs a clock read as a waiter queues,
// and one per strict serve.
//
// Every rule of the protocol still holds (one party serves a waiter,
// under the lock, one send per service, received before the waiter is
// reused): a nudged waiter is in no queue while it runs, and takes free
// permits itself, rejoins, or leaves. An owner that barges pushes with
// Push (it orders nothing).

// Barger is the Owner of a queue whose callers may barge: it keeps the
// woken and strict flags where its lock-free paths see them, and takes
// permits as it can. The engine calls Compete and Bound without the
// lock, the other methods with it held.
type Barger interface {
	Owner
	// Bound returns the owner's bound.
	Bound() *Bound
	// Wake sets the woken flag if neither flag is set and n permits are
	// free, and reports that it did; strict reports that the strict flag
	// is set, and nothing was.
	Wake(n int64) (woke, strict bool)
	// SetStrict sets the strict flag: nobody takes permits ahead of the
	// queue.
	SetStrict()
	// Relax clears the strict flag.
	Relax()
	// ClearWoken clears the woken flag, if it is set.
	ClearWoken()
	// Compete is a woken waiter's one try for n free permits, without the
	// lock: it takes them, counted as a grant that waited, and clears
	// woken (ok), or takes nothing, also if ctx ended or the owner is
	// closed (left to Reclaim). more reports that, after woken was
	// cleared, waiters were queued and permits left: the queue is served
	// again.
	Compete(ctx context.Context, n int64) (p permit.Permit, more, ok bool)
	// Reclaim is a woken waiter's look under the lock after it lost: it
	// returns n permits taken (counted as a grant that waited), or the
	// ending that refuses them (closed or too heavy: Failed; ctx ended:
	// Cancelled, with ctx's error), or it sets the flag that sends
	// releases through the lock, the strict flag too if aged, clears
	// woken, counts a waiter of n permits and reports queued, for the
	// engine to put the waiter back at the head.
	Reclaim(ctx context.Context, n int64, aged bool) (p permit.Permit, queued bool, how Ending, err error)
}

// Bound is a barging owner's bound: how long a waiter waits before nobody
// takes permits ahead of the queue, its waiters' timers and the clock
// that stamps their arrival. Init it before use; it must not be copied
// after.
type Bound struct {
	d      time.Duration
	clk    clock.Clock
	real   bool      // clk is the system clock: timers are pooled
	epoch  time.Time // the origin of the arrival stamps
	timers sync.Pool // *time.Timer, stopped
}

// Init sets the bound to d on clk (nil: the system clock).
func (b *Bound) Init(d time.Duration, clk clock.Clock) {
	if clk == nil {
		clk = clock.Real{}
	}
	_, b.real = clk.(clock.Real)
	b.d, b.clk, b.epoch = d, clk, clk.Now()
}

// Stamp stamps w's arrival, as the owner pushes it under its lock (so
// that the stamps are in the queue's order).
func (b *Bound) Stamp(w *Waiter) { w.Arrival = b.now() }

func (b *Bound) now() int64 {
	if b.real {
		return int64(time.Since(b.epoch))
	}
	return int64(b.clk.Now().Sub(b.epoch))
}

// boundTimer is one wait's timer for the bound.
type boundTimer struct {
	rt *time.Timer // the system clock's, pooled
	ft clock.Timer // another clock's
}

func (b *Bound) arm() (boundTimer, <-chan time.Time) {
	if b.real {
		if rt, _ := b.timers.Get().(*time.Timer); rt != nil {
			rt.Reset(b.d)
			return boundTimer{rt: rt}, rt.C
		}
		rt := time.NewTimer(b.d)
		return boundTimer{rt: rt}, rt.C
	}
	ft := b.clk.NewTimer(b.d)
	return boundTimer{ft: ft}, ft.C()
}

// disarm stops t; a pooled timer goes back drained. Since Go 1.23 a
// stopped timer's channel holds no stale value, but only for a program
// whose go.mod says 1.23 or later (and no GODEBUG=asynctimerchan=1): in
// another, a timer that fired unread would fire at once for its next
// waiter and make the lane strict early.
func (b *Bound) disarm(t boundTimer) {
	if t.rt != nil {
		if !t.rt.Stop() {
			select {
			case <-t.rt.C:
			default:
			}
		}
		b.timers.Put(t.rt)
		return
	}
	t.ft.Stop()
}

// BargeWait waits for w, which the caller pushed into q under o's lock
// (Push, its arrival stamped: Bound.Stamp) and has unlocked since, to be
// granted, failed, or woken to compete, until its wait ends: it returns
// the permit, or an error and no permit, as Wait does (mw nil: no maximum
// wait). w goes back to c.
func BargeWait[O Barger](ctx context.Context, q *Queue, o O, c *Cache, w *Waiter, mw *MaxWait) (permit.Permit, error) {
	var mt clock.Timer
	var expired <-chan time.Time
	if mw != nil && mw.D > 0 {
		mt = mw.Clock.NewTimer(mw.D)
		expired = mt.C()
	}
	b := o.Bound()
	bt, aged := b.arm()
	p, err := bargeLoop(ctx, q, o, c, w, mw, expired, aged)
	if mt != nil {
		mt.Stop()
	}
	b.disarm(bt)
	return p, err
}

func bargeLoop[O Barger](ctx context.Context, q *Queue, o O, c *Cache, w *Waiter, mw *MaxWait, expired, aged <-chan time.Time) (permit.Permit, error) {
	done := ctx.Done()
	agedOff := false // the bound ran out while w was woken, off the queue
	for {
		end, fired := park(ctx, w, done, expired, aged, mw)
		if fired {
			aged = nil
			agedOff = markOld(q, o, w)
			continue
		}
		if !end.Woken {
			if Leave(q, o, c, w, end.How) {
				return permit.Permit{}, end.Err
			}
			<-w.ready // served meanwhile: sent just after the waker unlocked
			end.Woken = true
		}
		if !w.Nudged() {
			// Granted (in strict mode, by a grown capacity or by a
			// leaving head's hand-off) or failed.
			if end.Err != nil {
				return permit.Permit{}, End(q, o, c, w, end)
			}
			return Outcome(c, w)
		}
		// Woken to compete: w is off the queue and holds the woken flag.
		if end.Err != nil {
			o.Lock()
			doneWoken(q, o, c, w, end.How, end.Err)
			return permit.Permit{}, end.Err
		}
		if p, more, ok := o.Compete(ctx, w.N); ok {
			c.Put(w)
			if more {
				var chain Chain
				o.Lock()
				BargeServe(q, o, &chain)
				o.Unlock()
				chain.Wake()
			}
			return p, nil
		}
		if !agedOff && aged != nil {
			select {
			case <-aged:
				aged, agedOff = nil, true
			default:
			}
		}
		if p, finished, err := rejoin(ctx, q, o, c, w, agedOff); finished {
			return p, err
		}
	}
}

// markOld makes o strict when w's bound ran out while it is queued, and
// grants what fits. It reports true if w was served or woken meanwhile (a
// woken waiter makes o strict when it rejoins).
func markOld[O Barger](q *Queue, o O, w *Waiter) bool {
	var chain Chain
	o.Lock()
	if w.served {
		o.Unlock()
		return true
	}
	o.SetStrict()
	Grant(q, o, &chain)
	o.Unlock()
	chain.Wake()
	return false
}

// doneWoken ends the look of w, woken, under o's lock, which it
// releases: a wait that ended without permits (err) is counted (how),
// woken goes, the queue is served again, and w goes back to c.
func doneWoken[O Barger](q *Queue, o O, c *Cache, w *Waiter, how Ending, err error) {
	if err != nil {
		o.Count(how)
	}
	o.ClearWoken()
	var chain Chain
	BargeServe(q, o, &chain)
	o.Unlock()
	c.Put(w)
	chain.Wake()
}

// rejoin is a woken waiter's way back after it lost (see Reclaim), then a
// serve of the queue (which may wake or grant w itself at once). finished
// reports that the call is over, with the permit or the error.
func rejoin[O Barger](ctx context.Context, q *Queue, o O, c *Cache, w *Waiter, aged bool) (permit.Permit, bool, error) {
	var chain Chain
	o.Lock()
	p, queued, how, err := o.Reclaim(ctx, w.N, aged)
	if queued {
		q.Rejoin(w)
		BargeServe(q, o, &chain)
		o.Unlock()
		chain.Wake()
		return permit.Permit{}, false, nil
	}
	doneWoken(q, o, c, w, how, err)
	return p, true, err
}

// BargeServe serves a barging queue after permits may have come free, or
// a waiter left or rejoined: in strict mode it grants in order
// (BargeGrant); otherwise it nudges the head, if it fits the free permits
// and nobody is woken. It must be called with o's lock held.
func BargeServe[O Barger](q *Queue, o O, c *Chain) {
	h := q.head
	if h == nil {
		o.Relax()
		return
	}
	woke, strict := o.Wake(h.N)
	switch {
	case strict:
		BargeGrant(q, o, c)
	case woke:
		q.Nudge(h, c)
		o.Dequeued(h)
		if q.head == nil {
			o.Emptied()
		}
	}
}

// BargeGrant is Grant on a barging queue: it serves the waiters that fit,
// in order, and ends strict mode once the head has waited less than the
// bound, or nobody waits. It must be called with o's lock held.
func BargeGrant[O Barger](q *Queue, o O, c *Chain) {
	Grant(q, o, c)
	h := q.head
	if h == nil {
		o.Relax()
		return
	}
	if b := o.Bound(); b.now()-h.Arrival < int64(b.d) {
		o.Relax() // the head, the oldest waiter, is young
	}
}

// Nudge takes w, the waiter Head returned, off the queue without a grant,
// and adds it to c for waking: its wake-up tells it to look at the
// permits again (Nudged reports it). The owner counts it as dequeued.
func (q *Queue) Nudge(w *Waiter, c *Chain) {
	unlink(q, w)
	w.tok, w.err, w.served = nil, nil, true
	c.add(w)
}

// Nudged reports whether w's wake-up, received, was a Nudge: served with
// neither a grant nor a failure.
func (w *Waiter) Nudged() bool { return w.served && w.tok == nil && w.err == nil }

// Served reports whether w is off the queue with a wake-up sent or on its
// way (granted, failed or nudged). It must be called with the owner's
// lock held, or after the wake-up was received.
func (w *Waiter) Served() bool { return w.served }

// Rejoin puts w, a nudged waiter whose wake-up was received, back at the
// head of the queue, unserved, with its arrival. The owner counts it again,
// under its lock.
func (q *Queue) Rejoin(w *Waiter) {
	w.served = false
	if q.head == nil {
		w.next, w.prev, w.qlen = nil, w, 1
		q.head = w
		return
	}
	w.next, w.prev, w.qlen = q.head, q.head.prev, q.head.qlen+1
	q.head.prev = w
	q.head = w
}
