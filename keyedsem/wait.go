package keyedsem

import (
	"context"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// line is the waitq.Owner of one entry's queue: the entry's state word and
// mutex, with the semaphore's tokens and counters. It is a small value,
// made for each call into the engine, so that the entry carries no more
// than its queue's head.
//
// Releases without waiters change the state by compare-and-swap without
// e.mu; once the queued bit is set, acquirers change avail only under
// e.mu, and a release that finds the bit set takes e.mu and serves the
// waiters (see releaseQueued), so no waiter misses permits given back.
type line[K comparable] struct {
	s *Keyed[K]
	e *entry[K]
}

func (l line[K]) Lock()   { l.e.mu.Lock() }
func (l line[K]) Unlock() { l.e.mu.Unlock() }

// Claim takes n permits of the entry for the head waiter, if they are
// free, with a token; the waiter's reference becomes its holder's. The
// grant is counted in the token's stripe (as one that waited, by wait once
// the permit reaches its caller, outside the entry's lock).
//
// With WithReorderHold, a held head is not served (see hold.go).
func (l line[K]) Claim(n int64) (*permit.Token, bool) {
	e := l.e
	ranOut := false
	if l.s.hold != 0 {
		var held bool
		if held, ranOut = l.s.heldLocked(e, e.q.Head()); held {
			return nil, false
		}
	}
	for {
		st := e.state.Load()
		if avail(st) < n {
			return nil, false
		}
		if e.state.CompareAndSwap(st, st-uint64(n)) {
			if l.s.hold != 0 {
				grantedLocked(e, e.q.Head().Rank)
				if ranOut {
					l.s.holdsOut.Add(1)
				}
			}
			t := l.s.token(e)
			return &t.Token, true
		}
	}
}

// Unclaim takes back a grant whose permit never reached the caller: the
// token goes back to the pool at the same generation (no handle of it was
// ever returned), the grant is uncounted, so that it counts in neither
// Acquired, Released nor Waited, and the permits go back to the entry.
// The waiter's reference stays, for wait to drop.
func (l line[K]) Unclaim(pt *permit.Token, w *waitq.Waiter) {
	l.s.untoken(pt)
	l.e.state.Add(uint64(w.N)) // the entry is busy: avail stays within its bits
}

// untoken takes back the token of a grant that never reached its caller:
// the grant is uncounted, and the token goes back to the pool (or stays
// with its entry, if paired) at the same generation (no handle of it was
// returned), without a release, so that the grant counts in neither
// Acquired nor Released and no hold is recorded. The grant's permits and
// reference are the caller's to give back.
func (s *Keyed[K]) untoken(pt *permit.Token) {
	t := tokenOf[K](pt)
	permit.OwnerOf(pt).(*stripe[K]).acquired.Add(^uint64(0))
	s.putToken(t)
}

func (l line[K]) Dequeued(*waitq.Waiter) { l.s.waiters.Add(-1) }

// Emptied clears the queued bit, and barging's strict bit with it (set
// only under WithBarging): the waiters' references are still held (or
// have become holders'), so the entry stays busy. Every step of the engine
// that empties a queue calls it (Grant, Hand, Fail, Unqueue, BargeServe's
// nudge), strict is set only under e.mu with a waiter queued (markOld, a
// rejoin's Reclaim), and a reused entry's word starts without it; so under
// e.mu strict is never set on an empty queue, and admission has nothing
// to clear.
func (l line[K]) Emptied() { clearBits(l.e, queuedBit|kStrict) }

// Serve serves the entry's waiters by the semaphore's policy (see
// waitq.Owner).
func (l line[K]) Serve() waitq.Chain {
	var c waitq.Chain
	if l.s.barging {
		waitq.BargeServe(&l.e.q, l, &c)
	} else {
		waitq.Grant(&l.e.q, l, &c)
	}
	return c
}

func (l line[K]) Count(e waitq.Ending) {
	if e == waitq.Failed {
		l.s.failed.Add(1)
	} else {
		l.s.cancelled.Add(1) // keyed semaphores have no maximum wait
	}
}

// wait queues the caller, who holds a reference on e but no permits, for n
// permits of e: at the tail, or by t (nil: the zero Turn) if s orders its
// keys' waiters (see placeOf).
func (s *Keyed[K]) wait(ctx context.Context, e *entry[K], n int64, t *call.Turn) (semaphore.Permit, error) {
	if s.barging { // it orders nothing: callOf refused any place in line
		return s.waitBarging(ctx, e, n)
	}
	w, p, err := s.enqueue(ctx, e, n, t)
	if w == nil {
		return p, err
	}
	return s.await(ctx, e, w)
}

// enqueue is the admission of every call that may wait on e, the first
// half of wait (and of a barging wait), under e.mu: the engine decides
// (waitq.Admit), and enqueue pushes a waiter for n permits of e (placed by
// t, as for wait) and returns it, or returns the permit (the permits came
// free and the caller comes first) or the error (the reference then
// dropped) with a nil waiter. A Place (see Keyed.Join)
// is a waiter pushed here whose await comes later.
func (s *Keyed[K]) enqueue(ctx context.Context, e *entry[K], n int64, t *call.Turn) (*waitq.Waiter, semaphore.Permit, error) {
	var pl waitq.Place
	if s.order != 0 {
		pl = s.placeOf(t) // before the lock: it may read the clock
	}
	e.mu.Lock()
	g := s.gate()
	g.Place = pl
	if m := s.maxWaiters; m > 0 && e.q.Len() >= m {
		g.Full = semaphore.ErrQueueFull
	}
	_, how, err := waitq.Admit(ctx, line[K]{s, e}, &e.state, n, &g)
	switch how {
	case waitq.Taken:
		if s.hold == 0 {
			e.mu.Unlock()
			return nil, s.grant(e, n), nil
		}
		// Its number may end the hold of those queued.
		grantedLocked(e, pl.Rank)
		var wake waitq.Chain
		if !e.q.Empty() {
			s.grantLocked(e, &wake)
		}
		e.mu.Unlock()
		wake.Wake()
		return nil, s.grant(e, n), nil
	case waitq.CtxEnded, waitq.Refused:
		s.refuseLocked(e, how == waitq.CtxEnded)
		return nil, semaphore.Permit{}, err
	}
	w := s.wcache.Get()
	w.N = n
	// WithHistograms times one wait in N (hist.Sampler), a hold bound
	// needs every numbered waiter's start.
	if s.hold != 0 || (s.tm != nil && s.tm.Sampler.Timed(&s.hc, w.Uses())) {
		w.Since, w.Timed = s.hc.Precise(), s.tm != nil
	}
	switch {
	case s.barging:
		s.barge.Stamp(w) // its bound counts from here: see waitq.BargeGrant
		e.q.Push(w)
	case s.order == 0:
		e.q.Push(w)
	default:
		w.Place = pl
		e.q.PushOrdered(w, s.aging)
	}
	s.waiters.Add(1)
	e.mu.Unlock()
	return w, semaphore.Permit{}, nil
}

// gate is what admission asks of every caller of a key (waitq.Gate):
// refused after Close; the mark is the queued bit, so that no lock-free
// acquire or release can slip past the queue. It must be called with the
// key's lock held.
func (s *Keyed[K]) gate() waitq.Gate {
	g := waitq.Gate{Mask: availMask, Set: queuedBit}
	if s.closed.Load() {
		g.Refuse = semaphore.ErrClosed
	}
	return g
}

// First reports whether a caller at place pl comes first (see first), and
// is not held back by WithReorderHold (see hold.go), with e.mu held.
func (l line[K]) First(st uint64, pl waitq.Place) bool {
	return !(l.s.hold != 0 && gapped(l.e.last, pl.Rank)) && l.s.first(l.e, st, &pl)
}

// Take takes n permits from e's word for a caller that waitq.Admit let in;
// its caller makes the token (Keyed.grant).
func (l line[K]) Take(st uint64, n int64) (*permit.Token, bool) {
	return nil, l.e.state.CompareAndSwap(st, st-uint64(n))
}

// first reports whether a caller at place pl comes before every waiter of
// e, if its permits are free, e's word being st: nobody waits; or
// (WithBarging) the key is not in strict hand-off; or it goes ahead of the
// head. It must be called with e.mu held.
func (s *Keyed[K]) first(e *entry[K], st uint64, pl *waitq.Place) bool {
	switch {
	case e.q.Empty():
		return true
	case s.barging:
		return st&kStrict == 0
	}
	return s.order != 0 && waitq.Ahead(pl, e.q.Head(), s.aging)
}

// refuseLocked ends an admission to e refused under e.mu, which it
// unlocks: the caller's reference goes (and the entry with it, if it was
// the last), and the call is counted, as cancelled or rejected.
func (s *Keyed[K]) refuseLocked(e *entry[K], cancelled bool) {
	st := s.unrefLocked(e, 0)
	e.mu.Unlock()
	s.settle(e, st)
	if cancelled {
		s.cancelled.Add(1)
	} else {
		s.rejected.Add(1)
	}
}

// await is the second half of wait, without the lock: it waits for w,
// which enqueue pushed on e, and drops the caller's reference if no
// permit comes.
func (s *Keyed[K]) await(ctx context.Context, e *entry[K], w *waitq.Waiter) (semaphore.Permit, error) {
	// waitq.Wait, written out so that the wait's hot part is a plain call
	// (see waitq.Await).
	var p permit.Permit
	var err error
	since, timed := w.Since, w.Timed // w goes back to its cache in Outcome
	end := waitq.Ended{Err: errHoldRunOut}
	if s.hold != 0 && w.Rank != 0 {
		// A numbered waiter may be held: when the bound has passed, it
		// serves the line, which then lets it (or the head) go.
		end = waitq.Await(ctx, w, &waitq.MaxWait{D: max(s.holdLeft(w), 1), Clock: s.clock, Err: errHoldRunOut})
		if end.Err == errHoldRunOut {
			if end.Woken {
				end = waitq.Ended{} // served, and its context had not ended
			} else {
				var wake waitq.Chain
				e.mu.Lock()
				if !w.Served() {
					s.grantLocked(e, &wake)
				}
				e.mu.Unlock()
				wake.Wake()
			}
		}
	}
	if end.Err == errHoldRunOut {
		end = waitq.Await(ctx, w, nil)
	}
	if end.Err != nil {
		err = waitq.End(&e.q, line[K]{s, e}, &s.wcache, w, end)
	} else {
		p, err = waitq.Outcome(&s.wcache, w)
	}
	if err != nil {
		// Left, failed, or a grant given back: the reference goes, and
		// with it the entry if it was the last.
		s.release(e, 0)
		return semaphore.Permit{}, err
	}
	permit.OwnerOf(permit.TokenOf(p)).(*stripe[K]).waited.Add(1)
	if timed {
		s.tm.Wait.Observe(s.hc.Precise() - since)
	}
	return semaphore.Permit(p), nil
}
