package keyedsem

import (
	"context"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// grantLocked serves the waiters at the head of e's queue, in order, for
// as long as their requests fit, and clears the queued bit when the queue
// is empty. Each waiter's reference becomes its holder's. It returns the
// served waiters, linked through wnext, for the caller to wake after
// unlocking e.mu.
//
// Releases without waiters change the state by compare-and-swap without
// e.mu; once the queued bit is set, acquirers change avail only under
// e.mu, and a release that finds the bit set takes e.mu and comes here, so
// no waiter misses permits given back.
func (s *KeyedSemaphore[K]) grantLocked(e *entry[K]) *waiter {
	var chain waitq.Chain
	for w := e.head; w != nil; w = e.head {
		st := e.state.Load()
		if avail(st) < w.N {
			break
		}
		if !e.state.CompareAndSwap(st, st-uint64(w.N)) {
			continue
		}
		e.unlink(w)
		s.waiters.Add(-1)
		t := s.token(e)
		w.Tok, w.Gen, w.Served = &t.Token, t.gen.Load(), true
		chain.Add(w)
	}
	if e.head == nil {
		clearQueued(e)
	}
	return chain.First()
}

// clearQueued clears e's queued bit. It must be called with e.mu held, by
// a holder of a reference, once the queue is empty.
func clearQueued[K comparable](e *entry[K]) {
	for {
		st := e.state.Load()
		if st&queuedBit == 0 || e.state.CompareAndSwap(st, st&^queuedBit) {
			return
		}
	}
}

// wait queues the caller, who holds a reference on e but no permits, for n
// permits of e.
func (s *KeyedSemaphore[K]) wait(ctx context.Context, e *entry[K], n int64) (Permit, error) {
	e.mu.Lock()
	var err error
	cancelled := false
	for err == nil {
		if s.closed.Load() {
			err = ErrClosed
			break
		}
		st := e.state.Load()
		if e.head == nil && avail(st) >= n {
			// The permits came free since lookup: they may have come free
			// after ctx ended (see ended).
			if err = ended(ctx); err != nil {
				cancelled = true
				break
			}
			if e.state.CompareAndSwap(st, st-uint64(n)) {
				e.mu.Unlock()
				return s.grant(e, n), nil
			}
			continue
		}
		if s.maxWaiters > 0 && e.count(s.maxWaiters) >= s.maxWaiters {
			err = ErrQueueFull
			break
		}
		// Set the queued bit before queueing, so that no lock-free acquire
		// or release can slip past the queue. If the word moved, look
		// again: the permits may have come back.
		if st&queuedBit != 0 || e.state.CompareAndSwap(st, st|queuedBit) {
			break
		}
	}
	if err != nil {
		st := s.unrefLocked(e, 0)
		e.mu.Unlock()
		s.settle(e, st)
		if cancelled {
			s.cancelled.Add(1)
		} else {
			s.rejected.Add(1)
		}
		return Permit{}, err
	}
	w := s.wcache.Get()
	w.N = n
	e.push(w)
	s.waiters.Add(1)
	e.mu.Unlock()

	done := ctx.Done()
	if done == nil {
		<-w.Ready
		return s.outcome(e, w)
	}
	select {
	case <-w.Ready:
	case <-done:
		return Permit{}, s.leave(e, w, ctx.Err())
	}
	// When the grant and the end of ctx are both ready, select picks one
	// at random; the context may have ended strictly before the release
	// that granted w. Look at it once more: if it has ended, the caller
	// does not get the permit, which goes on as a cancelled waiter's would.
	select {
	case <-done:
		return Permit{}, s.giveBack(e, w, ctx.Err())
	default:
	}
	return s.outcome(e, w)
}

// giveBack settles w, served and woken, whose context has ended: a grant
// is taken back as if w had left the queue before it, as package semaphore
// does: the token goes back to the pool without a release (the permit
// never reached the caller), the grant is uncounted, so that it counts in
// neither Acquired nor Released but only in Cancelled, the permits and w's
// reference are given back (serving the waiters behind it), and err is
// returned. A failure (Close) is returned as it is.
func (s *KeyedSemaphore[K]) giveBack(e *entry[K], w *waiter, err error) error {
	if w.Err != nil {
		_, werr := s.outcome(e, w)
		return werr
	}
	t, n := tokenOf[K](w.Tok), w.N
	s.wcache.Put(w)
	permit.OwnerOf(&t.Token).(*stripe[K]).acquired.Add(^uint64(0)) // uncount the grant
	t.e = nil
	s.tokens.Put(t) // at the same generation: no handle of it was ever returned
	s.cancelled.Add(1)
	s.release(e, n)
	return err
}

// outcome reads what the waker decided for w, after w.Ready fired, and
// puts w back in the pool. A failed waiter drops its reference.
func (s *KeyedSemaphore[K]) outcome(e *entry[K], w *waiter) (Permit, error) {
	p, err := s.wcache.Outcome(w)
	if err != nil {
		s.rejected.Add(1)
		s.release(e, 0)
		return Permit{}, err
	}
	return p, nil
}

// leave takes w out of e's queue after its context ended. If w was already
// served it waits for the wake-up, gives back a grant (or takes the
// failure), and returns the error.
func (s *KeyedSemaphore[K]) leave(e *entry[K], w *waiter, err error) error {
	e.mu.Lock()
	if w.Served {
		e.mu.Unlock()
		<-w.Ready // sent just after the waker unlocked
		return s.giveBack(e, w, err)
	}
	wasHead := e.head == w
	e.unlink(w)
	s.waiters.Add(-1)
	var wake *waiter
	if wasHead && e.head != nil {
		wake = s.grantLocked(e)
	}
	st := s.unrefLocked(e, 0)
	e.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	s.settle(e, st)
	s.cancelled.Add(1)
	return err
}

// waiter is one caller in a queue (see package waitq for the protocol).
type waiter = waitq.Waiter

// push appends w to e's queue. It must be called with e.mu held.
func (e *entry[K]) push(w *waiter) {
	if e.head == nil {
		w.Next, w.Prev = w, w
		e.head = w
		return
	}
	tail := e.head.Prev
	w.Prev, w.Next = tail, e.head
	tail.Next = w
	e.head.Prev = w
}

// unlink takes w out of e's queue. It must be called with e.mu held.
func (e *entry[K]) unlink(w *waiter) {
	if w.Next == w {
		e.head = nil
	} else {
		w.Prev.Next = w.Next
		w.Next.Prev = w.Prev
		if e.head == w {
			e.head = w.Next
		}
	}
	w.Next, w.Prev = nil, nil
}

// count returns the number of e's waiters, counting no further than limit.
// It must be called with e.mu held.
func (e *entry[K]) count(limit int) int {
	if e.head == nil {
		return 0
	}
	c := 1
	for w := e.head.Next; w != e.head && c < limit; w = w.Next {
		c++
	}
	return c
}
