package semaphore

import (
	"context"
	"math"
	"math/bits"
	"time"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

func (s *Weighted) failFast(ctx context.Context) error {
	s.mu.Lock()
	s.cancelled++
	s.mu.Unlock()
	return ctx.Err()
}

func (s *Weighted) acquireSlow(ctx context.Context, n int64) (Permit, error) {
	if n <= 0 {
		s.reject()
		return Permit{}, ErrInvalidWeight
	}
	s.mu.Lock()
	if s.closed {
		s.rejected++
		s.mu.Unlock()
		return Permit{}, ErrClosed
	}
	if n > s.capacity.Load() {
		s.rejected++
		s.mu.Unlock()
		return Permit{}, ErrTooHeavy
	}
	for {
		st := s.state.Load()
		// Permits given back since Acquire looked at ctx (a release of an
		// inline token needs no lock) must not go to a context that ended
		// before they came free: look again after each load.
		if ctxEnded(ctx) {
			s.cancelled++
			s.mu.Unlock()
			return Permit{}, ctx.Err()
		}
		if s.head == nil && avail(st) >= n {
			if t, ok := s.claimLocked(st, n); ok {
				s.mu.Unlock()
				return permit.Make(t, t.Gen(), n), nil
			}
			continue
		}
		// Under a bound on the waiting weight, waitWeight never exceeds
		// it, so the difference does not wrap (a sum could, past
		// math.MaxInt64, and let the waiter in).
		if (s.maxWaiters > 0 && s.waiters >= s.maxWaiters) ||
			(s.maxWaitWt > 0 && uint64(n) > uint64(s.maxWaitWt)-s.waitWeight) {
			s.rejected++
			s.mu.Unlock()
			return Permit{}, ErrQueueFull
		}
		// Set the slow flag before queueing, so that no fast-path release
		// can slip past the queue. If the word moved, look again: the
		// permits may have come back.
		if st&flagSlow != 0 || s.state.CompareAndSwap(st, st|flagSlow) {
			break
		}
	}
	w := s.wcache.Get()
	w.N = n
	s.push(w)
	s.mu.Unlock()

	done := ctx.Done()
	var timer Timer
	var expired <-chan time.Time
	if s.maxWait > 0 {
		timer = s.clock.NewTimer(s.maxWait)
		expired = timer.C()
	}
	var err error
	woken := false
	if done == nil && expired == nil {
		<-w.Ready
	} else {
		select {
		case <-w.Ready:
			// The wait may have ended too, before the grant: when both are
			// ready by the time the select runs, it picks one at random.
			// An ending that is there to see wins (go.dev/issue/63615).
			woken, err = true, ended(ctx, done, expired)
		case <-done:
			err = ctx.Err()
		case <-expired:
			err = ErrWaitTooLong
		}
	}
	if timer != nil {
		timer.Stop()
	}
	switch {
	case err == nil:
		return s.wcache.Outcome(w)
	case woken:
		return Permit{}, s.handBack(w, err)
	default:
		return Permit{}, s.leave(w, err)
	}
}

// ended returns the error of a wait that has ended, nil if it has not:
// ctx.Err() if done is closed, ErrWaitTooLong if the max-wait timer has
// fired. done and expired may be nil.
func ended(ctx context.Context, done <-chan struct{}, expired <-chan time.Time) error {
	select {
	case <-done:
		return ctx.Err()
	default:
	}
	select {
	case <-expired:
		return ErrWaitTooLong
	default:
	}
	return nil
}

// leave takes w out of the queue after its context ended or its wait grew
// too long. If w was already served (granted or failed) it waits for the
// wake-up, gives back a grant, and returns err.
func (s *Weighted) leave(w *waiter, err error) error {
	s.mu.Lock()
	if w.Served {
		s.mu.Unlock()
		<-w.Ready // sent just after the waker unlocked
		return s.handBack(w, err)
	}
	s.countLeft(err)
	wasHead := s.head == w
	s.unlink(w)
	var wake *waiter
	if wasHead {
		wake = s.grantLocked()
	} else {
		s.settleLocked()
	}
	s.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	return err
}

// handBack ends the wait of w, a served waiter whose wake-up has been
// received, after its wait ended (err: the context's error or
// ErrWaitTooLong). A waiter failed by Close or a shrink returns that error.
// A grant is taken back as if w had left the queue before it: the permits
// and the token return without a release (the permit never reached the
// caller, so the grant counts in neither Acquired, Released nor Waited,
// only in Cancelled or TimedOut), and the waiters behind are served.
func (s *Weighted) handBack(w *waiter, err error) error {
	if werr := w.Err; werr != nil {
		s.wcache.Put(w)
		return werr
	}
	s.mu.Lock()
	s.countLeft(err)
	s.grantedWait--
	if t := w.Tok; t.Slot >= 0 {
		// An inline token: its bit and the permits go back to the word
		// at once, as Permit.Release would, but at the same generation.
		s.state.Add(uint64(w.N)<<availShift | 1<<(uint(t.Slot)&63))
	} else {
		s.spare = append(s.spare, t)
		s.spareOut--
		s.state.Add(uint64(w.N) << availShift)
	}
	wake := s.grantLocked()
	s.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	return err
}

func (s *Weighted) countLeft(err error) {
	if err == ErrWaitTooLong {
		s.timedOut++
	} else {
		s.cancelled++
	}
}

func (s *Weighted) reject() {
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
}

// owner is the permit.Owner of a semaphore's tokens. It is a distinct,
// unexported type, so that the methods Permit.Release calls are out of
// users' reach: called directly, they would give back permits still held.
type owner Weighted

// ReleaseToken gives back n permits held through a spare token (inline
// tokens go back through their state word, see WakeAfterRelease). It is
// called by Permit.Release, once per grant.
func (o *owner) ReleaseToken(t *permit.Token, n int64) {
	s := (*Weighted)(o)
	s.mu.Lock()
	s.spare = append(s.spare, t)
	s.spareOut--
	s.spareFreed++
	s.state.Add(uint64(n) << availShift)
	wake := s.grantLocked()
	s.mu.Unlock()
	waitq.WakeAll(wake)
}

// WakeAfterRelease serves the waiters after Permit.Release returned an
// inline token and its permits to the state word with one atomic add that
// found the slow flag set (the add needs no lock, see grantLocked). It is
// called by Permit.Release.
func (o *owner) WakeAfterRelease() {
	s := (*Weighted)(o)
	s.mu.Lock()
	wake := s.grantLocked()
	s.mu.Unlock()
	waitq.WakeAll(wake)
}

// CountDoubleRelease counts a Release of a permit already released. It is
// called by Permit.Release.
func (o *owner) CountDoubleRelease(*permit.Token) { o.doubleRel.Add(1) }

// grantLocked serves the waiters at the head of the queue, in order, for as
// long as their requests fit, and clears the slow flag when the queue is
// empty. It returns the served waiters, linked through wnext, for the
// caller to wake after unlocking mu.
//
// Releases add to state with one atomic add, with or without mu: every
// other change of the word is a compare-and-swap that retries, or an add,
// so no update is lost. A release that finds the slow flag set (or that
// races with the flag being set) takes mu and runs grantLocked, so no
// waiter misses permits given back.
func (s *Weighted) grantLocked() *waiter {
	var chain waitq.Chain
	for w := s.head; w != nil; w = s.head {
		st := s.state.Load()
		if avail(st) < w.N {
			break
		}
		t, ok := s.claimLocked(st, w.N)
		if !ok {
			continue
		}
		s.unlink(w)
		s.grantedWait++
		w.Tok, w.Gen, w.Served = t, t.Gen(), true
		chain.Add(w)
	}
	s.settleLocked()
	return chain.First()
}

// settleLocked clears the slow flag once the queue is empty (unless
// closed). It must be called with mu held.
func (s *Weighted) settleLocked() {
	if s.head != nil || s.closed {
		return
	}
	for {
		st := s.state.Load()
		if st&flagSlow == 0 || s.state.CompareAndSwap(st, st&^flagSlow) {
			return
		}
	}
}

// failLocked serves every waiter for which fail returns an error with
// that error, and returns them linked for waking.
func (s *Weighted) failLocked(fail func(*waiter) error) *waiter {
	var chain waitq.Chain
	for w := s.head; w != nil; {
		next := w.Next
		if err := fail(w); err != nil {
			s.unlink(w)
			w.Err, w.Served = err, true
			chain.Add(w)
		}
		w = next
	}
	return chain.First()
}

// waiter is one caller in a queue (see package waitq for the protocol).
type waiter = waitq.Waiter

// waitingWeight returns the total weight of the waiters, or math.MaxInt64
// if it is more. It must be called with mu held.
func (s *Weighted) waitingWeight() int64 {
	if s.waitHi != 0 || s.waitWeight > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s.waitWeight)
}

func (s *Weighted) push(w *waiter) {
	w.Prev = s.tail
	if s.tail == nil {
		s.head = w
	} else {
		s.tail.Next = w
	}
	s.tail = w
	s.waiters++
	var carry uint64
	s.waitWeight, carry = bits.Add64(s.waitWeight, uint64(w.N), 0)
	s.waitHi += carry
}

func (s *Weighted) unlink(w *waiter) {
	if w.Prev == nil {
		s.head = w.Next
	} else {
		w.Prev.Next = w.Next
	}
	if w.Next == nil {
		s.tail = w.Prev
	} else {
		w.Next.Prev = w.Prev
	}
	w.Next, w.Prev = nil, nil
	s.waiters--
	var borrow uint64
	s.waitWeight, borrow = bits.Sub64(s.waitWeight, uint64(w.N), 0)
	s.waitHi -= borrow
}
