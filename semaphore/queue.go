package semaphore

import (
	"context"
	"math"
	"math/bits"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

func (s *Weighted) failFast(ctx context.Context) error {
	s.mustBeMade()
	s.mu.Lock()
	s.cancelled++
	s.mu.Unlock()
	return ctx.Err()
}

// acquireSlow is the rest of Acquire: turn, already checked, places the
// caller if it waits (a barging semaphore, which orders nothing, admits
// only the zero Turn).
func (s *Weighted) acquireSlow(ctx context.Context, n int64, turn *call.Turn) (Permit, error) {
	if b := s.barge; b != nil {
		return s.acquireBarging(ctx, n, b)
	}
	if n <= 0 {
		s.reject()
		return Permit{}, ErrInvalidWeight
	}
	w, p, err := s.admit(ctx, n, turn)
	if w == nil {
		return p, err
	}
	since, timed := w.Since, w.Timed
	mw := s.mw // nil: no bound
	if mw == nil && ctx.Done() == nil {
		// Nothing but the grant ends this wait (see waitq.Receive).
		p, err := waitq.Receive(&s.wcache, w)
		s.waited(since, timed, err)
		return Permit(p), err
	}
	if mw == nil {
		// waitq.Await for a context alone, written out: the woken
		// waiter's way back to its caller is paid on every hand-off of a
		// contended semaphore, and the call measured 7-16% on the
		// capacity-1 cancellable row (docs/internals.md). The engine
		// cannot offer it inlined (its cost is over the inliner's budget).
		done := ctx.Done()
		end := waitq.Ended{How: waitq.Cancelled}
		select {
		case <-w.Ready():
			// An ending that is there to see wins (go.dev/issue/63615).
			select {
			case <-done:
				end.Err, end.Woken = ctx.Err(), true
			default:
			}
		case <-done:
			end.Err = ctx.Err()
		}
		if end.Err != nil {
			return Permit{}, waitq.End(&s.q, (*owner)(s), &s.wcache, w, end)
		}
		p, err := waitq.Outcome(&s.wcache, w)
		s.waited(since, timed, err)
		return Permit(p), err
	}
	if end := waitq.Await(ctx, w, mw); end.Err != nil {
		return Permit{}, waitq.End(&s.q, (*owner)(s), &s.wcache, w, end)
	}
	got, err := waitq.Outcome(&s.wcache, w)
	s.waited(since, timed, err)
	return Permit(got), err
}

// admit is the admission of every call that may wait: Acquire, Join (with
// a context that never ends: it waits for nothing) and a barging Acquire.
// For n permits (n > 0) at the place turn gives, the engine decides
// (waitq.Admit); admit counts the outcome and returns the permits, or a
// waiter it pushed, or the refusal: ErrClosed, ErrTooHeavy, the context's
// end, ErrQueueFull, or a bad group weight.
func (s *Weighted) admit(ctx context.Context, n int64, turn *call.Turn) (*waitq.Waiter, Permit, error) {
	// What may call the clock or the user's weight function is read before
	// locking.
	pl := s.placeOf(turn)
	var unit int64 // WithFairShare: see fairQueue.unit
	if s.fair != nil {
		var err error
		if unit, err = s.fair.unit(turn.Group); err != nil {
			s.reject()
			return nil, Permit{}, err
		}
	}
	s.mu.Lock()
	g := s.gate(n)
	g.Place = pl
	t, how, err := waitq.Admit(ctx, (*owner)(s), &s.state, n, &g)
	switch how {
	case waitq.Taken:
		s.mu.Unlock()
		return nil, Permit(permit.Make(t, t.Gen(), n)), nil
	case waitq.CtxEnded:
		s.cancelled++
		s.mu.Unlock()
		return nil, Permit{}, err
	case waitq.Refused:
		s.rejected++
		s.mu.Unlock()
		s.mustBeMade() // a zero Weighted has capacity 0: every admission comes here
		return nil, Permit{}, err
	}
	w := s.wcache.Get()
	w.N, w.Place = n, pl
	if s.barge != nil {
		s.barge.bound.Stamp(w) // its bound counts from here (waitq.BargeGrant)
	}
	if s.tm != nil {
		s.stampWait(w)
	}
	s.counted(n)
	switch {
	case s.fair != nil:
		s.pushFairUnlock(w, turn.Group, unit) // may serve w at once
	case s.prio.step != 0:
		s.q.PushOrdered(w, s.prio.step)
		s.mu.Unlock()
	default:
		s.q.Push(w)
		s.mu.Unlock()
	}
	return w, Permit{}, nil
}

// gate answers admission's questions for a caller of n permits
// (waitq.Gate), but for its place: refused after Close and when heavier
// than the capacity; refused as a waiter past WithMaxWaiters or
// WithMaxWaitingWeight; the mark is the slow flag. It must be called with
// mu held.
func (s *Weighted) gate(n int64) waitq.Gate {
	g := waitq.Gate{Mask: ^uint64(0), Shift: availShift, Set: flagSlow}
	switch {
	case s.closed:
		g.Refuse = ErrClosed
	case n > s.capacity.Load():
		g.Refuse = ErrTooHeavy
	}
	if (s.maxWaiters > 0 && s.waiters >= s.maxWaiters) ||
		(s.maxWaitWt > 0 && !s.weightFits(n)) {
		g.Full = ErrQueueFull
	}
	return g
}

// First reports whether a caller at place pl comes first (see first),
// with mu held.
func (o *owner) First(_ uint64, pl waitq.Place) bool { return (*Weighted)(o).first(&pl) }

// weightFits reports whether a waiter of n permits fits under
// WithMaxWaitingWeight. The waiting weight may be past the bound: a
// barging waiter that rejoins is counted back in whatever the bound (it
// was admitted once). So it is compared before the bound is subtracted
// from (which then does not wrap), and a sum is never formed (it could
// wrap past math.MaxInt64 and let the waiter in). It must be called with
// mu held.
func (s *Weighted) weightFits(n int64) bool {
	m := uint64(s.maxWaitWt)
	return s.waitHi == 0 && s.waitWeight <= m && uint64(n) <= m-s.waitWeight
}

// Take claims n permits and a token for a caller that waitq.Admit let in
// (claimLocked), with mu held.
func (o *owner) Take(st uint64, n int64) (*permit.Token, bool) {
	return (*Weighted)(o).claimLocked(st, n)
}

// first reports whether a caller at place pl, whose permits are free, is
// served before every waiter: nobody waits; or it goes ahead of the head
// (WithPriorities alone: under WithFairShare the caller is charged and
// pushed first, see pushFairUnlock); or it may barge. It must be called
// with mu held.
func (s *Weighted) first(pl *waitq.Place) bool {
	switch {
	case s.q.Empty():
		return true
	case s.barge != nil:
		return s.barge.mayBarge()
	}
	return s.prio.step != 0 && s.fair == nil && waitq.Ahead(pl, s.q.Head(), s.prio.step)
}

// stampWait marks w, a waiter about to be pushed, as timed or not, and
// stamps the start of a timed wait (see hist.Sampler: one wait in N is
// timed, after a lane's first ones). It is called with mu held, when the
// semaphore records its timings: the clock is read under the lock only
// for a sampled wait. (An arrival is not a wait's start: see
// hist.Clock.Arrival.)
//
//go:noinline
func (s *Weighted) stampWait(w *waitq.Waiter) {
	if s.tm.Sampler.Timed(&s.hc, w.Uses()) {
		w.Since, w.Timed = s.hc.Precise(), true
	}
}

// waited records the wait of a grant that waited since since, when the
// semaphore records its timings and timed this wait (timed: the waiter's
// Timed, read before it went back to its cache).
func (s *Weighted) waited(since int64, timed bool, err error) {
	if timed && err == nil {
		s.waitedOn(since)
	}
}

// waitedOn is waited's work, out of line, so that waited is inlined.
//
//go:noinline
func (s *Weighted) waitedOn(since int64) { s.tm.Wait.Observe(s.hc.Precise() - since) }

// observe makes t report its releases' hold times, when the semaphore
// records its timings.
func (s *Weighted) observe(t *permit.Token) {
	if s.tm != nil {
		t.Observe()
	}
}

// Released records the hold time of a permit granted at since. It is
// called by Permit.Release, once per timed grant (see stampOn), after the
// permit went back: the wake-up of the next waiter, if any, is in the
// recorded hold (a few microseconds at most).
func (o *owner) Released(_ int64, since int64) {
	o.tm.Hold.Observe(o.hc.Stamp() - since)
}

func (s *Weighted) reject() {
	s.mustBeMade()
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
}

// owner is the permit.Owner of a semaphore's tokens and the waitq.Owner of
// its queue. It is a distinct, unexported type, so that the methods
// Permit.Release and the engine call are out of users' reach: called
// directly, they would give back permits still held.
type owner Weighted

// ReleaseToken gives back n permits held through a spare token (inline
// tokens go back through their state word, see WakeAfterRelease). It is
// called by Permit.Release, once per grant.
func (o *owner) ReleaseToken(t *permit.Token, n int64) {
	s := (*Weighted)(o)
	var wake waitq.Chain
	s.mu.Lock()
	s.spare = append(s.spare, t)
	s.spareOut--
	s.spareFreed++
	s.state.Add(uint64(n) << availShift)
	if s.barge != nil {
		waitq.BargeServe(&s.q, o, &wake)
	} else {
		s.grantLocked(&wake)
	}
	s.mu.Unlock()
	wake.Wake()
}

// WakeAfterRelease serves the waiters after Permit.Release returned an
// inline token and its permits to the state word with one atomic add that
// found the slow flag set. It is called by Permit.Release.
//
// Releases add to state with one atomic add, with or without mu: every
// other change of the word is a compare-and-swap that retries, or an add,
// so no update is lost. A release that finds the slow flag set (or that
// races with the flag being set) takes mu and serves the waiters, so no
// waiter misses permits given back (see package waitq).
func (o *owner) WakeAfterRelease() {
	s := (*Weighted)(o)
	if b := s.barge; b != nil {
		s.wakeBarging(b)
		return
	}
	var wake waitq.Chain
	s.mu.Lock()
	s.grantLocked(&wake)
	s.mu.Unlock()
	wake.Wake()
}

// ReleaseQueued takes back n permits held through t, an inline token, when
// Permit.Release found the slow flag set before giving them back to the
// word. It is called by Permit.Release.
//
// Under mu, a head that fits in these permits alone gets them, and the
// token, as its grant: the token's generation has moved on, so this is a
// release and a new grant, counted as such, and the permits never pass
// through the word (neither Release's add nor the head's claim, a
// compare-and-swap, is paid). The free permits must not be negative (a
// shrink's debt is paid first). Otherwise the permits and the token go
// back to the word as WakeAfterRelease's would, and the waiters are served
// the same way. A barging semaphore never hands off (handsOffAt), so never
// gets here. BenchmarkAblationHandOff measures it.
func (o *owner) ReleaseQueued(t *permit.Token, n int64) {
	s := (*Weighted)(o)
	back := uint64(n)<<availShift | 1<<(uint(t.Slot)&63)
	var wake waitq.Chain
	s.mu.Lock()
	st := s.state.Load()
	if w := s.q.Head(); w != nil && w.N <= n && avail(st) >= 0 {
		// Claim's counts, for a grant of t.
		s.grantedWait++
		if s.fair != nil {
			s.fair.served(w.Band, w.Rank, t)
		}
		if s.tm != nil {
			s.stampOn(t) // sampled, as every grant's stamp is
		}
		rest := n - w.N
		waitq.Hand(&s.q, o, t, &wake)
		if rest > 0 {
			s.state.Add(uint64(rest) << availShift)
		}
		// The ones behind may fit in what is free besides: the head
		// that did not fit there may have stood in their way. A permit
		// that a lock-free release adds from now on serves them itself
		// (its add finds the slow flag set, or the queue is empty).
		if rest > 0 || avail(st) > 0 {
			s.grantLocked(&wake)
		}
	} else {
		s.state.Add(back)
		s.grantLocked(&wake)
	}
	s.mu.Unlock()
	wake.Wake()
}

// grantLocked serves the waiters that fit, by the engine's grant. It must
// be called with mu held.
func (s *Weighted) grantLocked(c *waitq.Chain) { waitq.Grant(&s.q, (*owner)(s), c) }

// Serve serves the waiters by the semaphore's policy (see waitq.Owner).
func (o *owner) Serve() waitq.Chain {
	var c waitq.Chain
	if o.barge != nil {
		waitq.BargeServe(&o.q, o, &c)
	} else {
		waitq.Grant(&o.q, o, &c)
	}
	return c
}

// CountDoubleRelease counts a Release of a permit already released. It is
// called by Permit.Release.
func (o *owner) CountDoubleRelease(*permit.Token) { o.doubleRel.Add(1) }

// The methods of waitq.Owner: the engine calls them with mu held, except
// Lock and Unlock.

func (o *owner) Lock()   { o.mu.Lock() }
func (o *owner) Unlock() { o.mu.Unlock() }

// Claim takes n permits and a token for the head waiter, if they are
// available, and counts a grant that waited. Under WithFairShare the
// virtual time moves to the head's key (grantLocked's loops claim through
// claim, the fair one moving it itself).
func (o *owner) Claim(n int64) (*permit.Token, bool) {
	t, ok := o.claim(n)
	if ok && o.fair != nil {
		h := o.q.Head()
		o.fair.served(h.Band, h.Rank, t)
	}
	return t, ok
}

// claim is Claim without the virtual time.
func (o *owner) claim(n int64) (*permit.Token, bool) {
	s := (*Weighted)(o)
	for {
		st := s.state.Load()
		if avail(st) < n {
			return nil, false
		}
		if t, ok := s.claimLocked(st, n); ok {
			s.grantedWait++
			return t, true
		}
	}
}

// Unclaim takes back a grant whose permit never reached the caller: the
// permits and the token return without a release (so the grant counts in
// neither Acquired, Released nor Waited).
func (o *owner) Unclaim(t *permit.Token, w *waitq.Waiter) {
	s := (*Weighted)(o)
	s.grantedWait--
	if s.fair != nil {
		s.fair.unserved(w.Band, w.Rank, t)
	}
	s.untake(t, w.N)
}

// untake gives back n permits and their token t, taken by a grant that
// never reached its caller, without a release: the token stays at its
// generation, so the grant counts in neither Acquired nor Released, and
// no hold is recorded. It must be called with mu held; the caller serves
// the waiters after it.
func (s *Weighted) untake(t *permit.Token, n int64) {
	if t.Slot >= 0 {
		// An inline token: its bit and the permits go back to the word
		// at once, as Permit.Release would, but at the same generation.
		s.state.Add(uint64(n)<<availShift | 1<<(uint(t.Slot)&63))
	} else {
		s.spare = append(s.spare, t)
		s.spareOut--
		s.state.Add(uint64(n) << availShift)
	}
}

// Dequeued takes w, a waiter taken off the queue, out of the counts (and
// of its band's, under WithFairShare).
func (o *owner) Dequeued(w *waitq.Waiter) {
	n := w.N
	if o.fair != nil {
		o.fair.left(w.Band)
	}
	o.waiters--
	var borrow uint64
	o.waitWeight, borrow = bits.Sub64(o.waitWeight, uint64(n), 0)
	o.waitHi -= borrow
}

// Emptied clears the slow flag once nobody waits, unless the semaphore is
// closed (every change of the word then stays under mu), and barging's
// strict flag (nobody is left to have waited the bound).
func (o *owner) Emptied() {
	if o.barge != nil {
		o.Relax()
	}
	if o.closed {
		return
	}
	for {
		st := o.state.Load()
		if st&flagSlow == 0 || o.state.CompareAndSwap(st, st&^flagSlow) {
			return
		}
	}
}

// Count counts a wait that ended without a grant.
func (o *owner) Count(e waitq.Ending) {
	switch e {
	case waitq.Cancelled:
		o.cancelled++
	case waitq.TimedOut:
		o.timedOut++
	case waitq.Failed:
		o.failed++
	}
}

// waitingWeight returns the total weight of the waiters, or math.MaxInt64
// if it is more. It must be called with mu held.
func (s *Weighted) waitingWeight() int64 {
	if s.waitHi != 0 || s.waitWeight > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s.waitWeight)
}
