package waitq

import (
	"context"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/permit"
)

// Owner is what a queue serves permits from: a semaphore, or one key's entry
// of a keyed semaphore. The engine calls Lock and Unlock around its own
// changes, and every other method with the lock held. The engine is
// generic in the owner, so that an owner that is a small value (a
// semaphore and an entry) is passed without allocating.
type Owner interface {
	// Lock and Unlock hold the lock that guards the queue.
	Lock()
	Unlock()
	// Claim takes n permits and a token for the waiter at the head of the
	// queue, if they are free now, and counts the grant as one that
	// waited; it reports false, taking nothing, if they are not.
	Claim(n int64) (*permit.Token, bool)
	// Unclaim undoes a Claim whose permit never reached its caller, w
	// (its N permits, its Place): the permits and the token t go back at
	// the token's generation, without a release, and the grant is
	// uncounted.
	Unclaim(t *permit.Token, w *Waiter)
	// Dequeued is told of each waiter taken off the queue (served or
	// left), for the owner's counts.
	Dequeued(w *Waiter)
	// Emptied is told that the queue is empty, so that the owner clears
	// the flag that sends its releases through the lock.
	Emptied()
	// Count counts a wait that ended without a grant, as the engine
	// decided it.
	Count(Ending)
	// Serve serves the waiters after one left from the head or gave a
	// grant back, by the owner's policy (Grant, or a barging owner's
	// wake-up of the head), and returns them for waking. It returns the
	// chain rather than taking a pointer to the caller's: a pointer
	// passed through the dictionary call would move the chain to the heap.
	Serve() Chain
}

// Ending is how a wait ended without a grant, for Owner.Count.
type Ending uint8

const (
	// Cancelled: the waiter's context ended (and it left, or gave back a
	// grant that came after).
	Cancelled Ending = iota
	// TimedOut: the waiter waited longer than its MaxWait, counted as
	// Cancelled is.
	TimedOut
	// Failed: the waiter was failed by Close or a shrink.
	Failed
)

// MaxWait bounds a wait: after D, on Clock, the waiter leaves with Err,
// as if its context had ended. D <= 0 means no bound. Wait takes it by
// pointer, nil for no bound, so that its call passes one word for it.
type MaxWait struct {
	D     time.Duration
	Clock clock.Clock
	Err   error
}

// Fail fails every waiter of q that asks for more than n permits (every
// waiter for n == 0) with err, counts it, and adds it to c for waking;
// then, if that emptied the queue, it tells the owner. It must be called
// with the owner's lock held. A Fail that may have failed the head (a
// shrink) must be followed by a Grant under the same hold, since the
// waiters behind it may fit now (as SetCapacity does); after Close nobody
// is left to serve.
func Fail[O Owner](q *Queue, o O, n int64, err error, c *Chain) {
	failed := false
	for w := q.head; w != nil; {
		next := w.next
		if w.N > n {
			remove(q, o, w)
			w.err, w.served = err, true
			o.Count(Failed)
			c.add(w)
			failed = true
		}
		w = next
	}
	if failed && q.head == nil {
		o.Emptied()
	}
}

// Wait waits for w, which the caller pushed into q under o's lock and has
// unlocked since, to be served, and returns its permit, or an error and
// no permit: the failure Fail gave it, ctx.Err() if ctx ended first, or
// mw.Err if it waited mw.D (mw nil: no bound). An ending that is there to
// see when the grant is woken wins over the grant, which is then given
// back (see the package doc). w goes back to c.
func Wait[O Owner](ctx context.Context, q *Queue, o O, c *Cache, w *Waiter, mw *MaxWait) (permit.Permit, error) {
	if end := Await(ctx, w, mw); end.Err != nil {
		return permit.Permit{}, End(q, o, c, w, end)
	}
	return Outcome(c, w)
}

// Ended is how Await found a wait ended: Err nil when w was served (its
// outcome is then read with Outcome), else the ending that came first and
// whether w was served all the same (Woken: its grant or failure is there
// and End must see to it).
type Ended struct {
	Err   error
	How   Ending
	Woken bool
}

// Await parks until w is served, its context ends or its MaxWait runs out
// (mw nil: no bound), and says which (see Ended); an ending that is there
// to see when the grant is woken wins over the grant (see the package
// doc). It is the part of Wait that every wait runs, and it does not need
// the owner, so it is not generic: an owner whose waits are hot calls
// Await, then Outcome, directly (a plain call, where the shared
// instantiation of a generic Wait costs a dictionary and a dozen words of
// arguments), and End, which is generic, only when the wait ended
// otherwise.
func Await(ctx context.Context, w *Waiter, mw *MaxWait) Ended {
	done := ctx.Done()
	var timer clock.Timer
	var expired <-chan time.Time
	if mw != nil && mw.D > 0 {
		timer = mw.Clock.NewTimer(mw.D)
		expired = timer.C()
	}
	if done == nil && expired == nil {
		<-w.ready
		return Ended{}
	}
	end, _ := park(ctx, w, done, expired, nil, mw)
	if timer != nil {
		timer.Stop()
	}
	return end
}

// park is Await's select, and a barging wait's (BargeWait), which gives
// it aged, the bound's timer (nil for none): fired reports that the timer
// fired first, and nothing else was seen.
func park(ctx context.Context, w *Waiter, done <-chan struct{}, expired, aged <-chan time.Time, mw *MaxWait) (end Ended, fired bool) {
	select {
	case <-w.ready:
		// The wait may have ended too, before the grant: when both are
		// ready by the time the select runs, it picks one at random. An
		// ending that is there to see wins (go.dev/issue/63615).
		end.Woken = true
		select {
		case <-done:
			end.Err, end.How = ctx.Err(), Cancelled
		default:
			select {
			case <-expired:
				end.Err, end.How = mw.Err, TimedOut
			default:
			}
		}
	case <-done:
		end.Err, end.How = ctx.Err(), Cancelled
	case <-expired:
		end.Err, end.How = mw.Err, TimedOut
	case <-aged:
		return end, true
	}
	return end, false
}

// End finishes a wait that Await found ended before its grant (end.Err
// set): a waiter still queued leaves, serving the ones behind it if it was
// the head; one served meanwhile gives its grant back, or returns its
// failure. It returns the error for the caller; w goes back to c.
func End[O Owner](q *Queue, o O, c *Cache, w *Waiter, end Ended) error {
	if end.Woken {
		return handBack(q, o, c, w, end.Err, end.How)
	}
	return leave(q, o, c, w, end.Err, end.How)
}

// Receive is Wait for a wait that nothing can end but the grant: a
// context whose Done is nil and no MaxWait. Such a wait is only the
// receive of the wake-up. It is not generic, so that an owner that knows
// it has this case calls it directly, with two arguments, instead of
// Wait's shared instantiation with seven and a dictionary: on a contended
// owner the woken waiter's way back to its caller is paid on every
// hand-off (the next one waits for its Release).
func Receive(c *Cache, w *Waiter) (permit.Permit, error) {
	<-w.ready
	return Outcome(c, w)
}

// Outcome returns what the waker decided for w, a served waiter whose
// wake-up has been received (Await returned no error), and puts w back in
// c: its permit, or the failure Fail gave it.
func Outcome(c *Cache, w *Waiter) (permit.Permit, error) {
	p, err := permit.Make(w.tok, w.gen, w.N), w.err
	c.Put(w)
	if err != nil {
		return permit.Permit{}, err
	}
	return p, nil
}

// leave takes w out of the queue after its wait ended with err. If it was
// the head, the waiters behind it are served. If w was served meanwhile,
// it receives the wake-up and gives a grant back instead.
func leave[O Owner](q *Queue, o O, c *Cache, w *Waiter, err error, how Ending) error {
	if !Leave(q, o, c, w, how) {
		<-w.ready // sent just after the waker unlocked
		return handBack(q, o, c, w, err, how)
	}
	return err
}

// Leave is the leaving of a waiter whose wait ended (how) before its
// wake-up, for every wait loop, FIFO or barging: under the owner's lock it
// takes w out of q (Unqueue) and, if w was the head, serves the ones
// behind by the owner's policy (Owner.Serve), and reports true, w back in
// c; or, if w was served or nudged meanwhile, it reports false, and the
// caller receives the wake-up on its way.
func Leave[O Owner](q *Queue, o O, c *Cache, w *Waiter, how Ending) bool {
	o.Lock()
	left, serveNext := Unqueue(q, o, w, how)
	if !left {
		o.Unlock()
		return false
	}
	var chain Chain
	if serveNext {
		chain = o.Serve()
	}
	o.Unlock()
	c.Put(w)
	chain.Wake()
	return true
}

// Unqueue is Leave's step under the lock: it takes w out of q and counts
// the ending, and reports true; or, if w was served or nudged meanwhile
// (its wake-up is on its way), it does nothing and reports false.
// serveNext reports that w was the head and others wait, who may fit where
// it did not. An emptied queue is told to the owner.
func Unqueue[O Owner](q *Queue, o O, w *Waiter, how Ending) (left, serveNext bool) {
	if w.served {
		return false, false
	}
	o.Count(how)
	wasHead := q.head == w
	remove(q, o, w)
	if q.head == nil {
		o.Emptied()
		return true, false
	}
	return true, wasHead
}

// handBack ends the wait of w, served and woken, after its wait ended with
// err. A failure is returned as it is. A grant is taken back as if w had
// left the queue before it: it is counted only as the ending, the permits
// and the token go back without a release, and the waiters behind are
// served.
func handBack[O Owner](q *Queue, o O, c *Cache, w *Waiter, err error, how Ending) error {
	if werr := w.err; werr != nil {
		c.Put(w)
		return werr
	}
	o.Lock()
	o.Count(how)
	o.Unclaim(w.tok, w)
	chain := o.Serve()
	o.Unlock()
	c.Put(w)
	chain.Wake()
	return err
}
