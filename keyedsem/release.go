package keyedsem

import (
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// release drops a reference on e and gives back n permits with it (n may
// be 0). Without waiters it is one compare-and-swap; with waiters it
// serves them under e.mu. The last reference makes the entry idle, or
// dead (and removed) with an idle timeout of 0.
func (s *Keyed[K]) release(e *entry[K], n int64) { s.releaseFrom(e, n, e.state.Load()) }

// releaseFrom is release from st, a load of e's state that the caller has
// made already (a compare-and-swap from a stale one fails and loads again).
func (s *Keyed[K]) releaseFrom(e *entry[K], n int64, st uint64) {
	var idle uint64
	haveIdle := false
	for ; ; st = e.state.Load() {
		// With WithBarging, a woken waiter (and no old one) looks at
		// the permits by itself: the release needs no lock.
		if st&queuedBit != 0 && st&(kWoken|kStrict) != kWoken {
			s.releaseQueued(e, n)
			return
		}
		nst := st - refOne + uint64(n)
		if nst&refMask == 0 {
			if avail(nst) != s.capacity {
				panic("keyedsem: internal error: last reference dropped with permits out")
			}
			if st&kFresh != 0 && s.dropFresh() {
				nst = deadBit
			} else {
				if !haveIdle {
					idle, haveIdle = s.idleState(), true
				}
				nst = idle
			}
		}
		if e.state.CompareAndSwap(st, nst) {
			// settle, by hand: the idle transition without work to do is
			// the uncontended release's common case, one load and compare.
			if nst&deadBit != 0 {
				s.drop(e)
			} else if nst&busyBit == 0 && int64(nst) >= s.due.Load() {
				s.wentIdle(e, nst)
			}
			return
		}
	}
}

// handOff gives the n permits released through t, and t itself, to the
// head of e's queue as its grant, under e.mu, when waiters are queued and
// the head asks for no more than n: the releaser's reference goes, the
// head's reference becomes its holder's, and the token goes from one to
// the other without the pool's round trip, the release's compare-and-swap
// and the claim's (one compare-and-swap does both). The grant is counted
// and stamped as Claim's is; a head whose context ended meanwhile gives
// it back through Unclaim as it would a claimed one. What the head does
// not take goes to the ones behind (Grant). It reports false, having done
// nothing, when nobody waits or the head does not fit, and always for a
// semaphore that does not hand off (handsOff: per-key capacity 1, without
// WithBarging or WithReorderHold; package semaphore found that at a larger
// capacity the hand-off makes the line a convoy). The token's generation
// has moved on (its Release did that), so the head's permit is a new one.
//
// ReleaseToken tests handsOff and the queued bit before calling it.
func (s *Keyed[K]) handOff(e *entry[K], t *token[K], n int64) bool {
	var wake waitq.Chain
	e.mu.Lock()
	w := e.q.Head()
	if w == nil || w.N > n {
		e.mu.Unlock()
		return false
	}
	rest := n - w.N
	for {
		// Queued: acquirers change avail only under e.mu, which is held,
		// and releases come here or take e.mu; the head's reference
		// keeps the entry busy.
		st := e.state.Load()
		if e.state.CompareAndSwap(st, st-refOne+uint64(rest)) {
			break
		}
	}
	if s.tm != nil {
		s.stampOn(&t.Token)
	}
	permit.OwnerOf(&t.Token).(*stripe[K]).acquired.Add(1)
	waitq.Hand(&e.q, line[K]{s, e}, &t.Token, &wake)
	if rest > 0 {
		s.grantLocked(e, &wake)
	}
	e.mu.Unlock()
	wake.Wake()
	return true
}

// settle finishes the last release of e's reference, which left e in
// state st: a dead entry is removed, an idle one may owe eviction work.
// It must not be called with e.mu held.
func (s *Keyed[K]) settle(e *entry[K], st uint64) {
	if st&deadBit != 0 {
		s.drop(e)
	} else if st&busyBit == 0 && int64(st) >= s.due.Load() {
		s.wentIdle(e, st)
	}
}

// dropFresh reports whether an entry that was made for one call, and is
// going idle after it with nobody having joined it (fresh), is dropped at
// once instead: when the entries are at the eviction target or more
// (target: a quarter under the soft cap, at least one under), and the
// semaphore is open. A flood of keys used once then costs what it costs
// with idle timeout 0, an insert and a removal of a key whose lines are
// still warm, instead of keeping each key and evicting, for it, one idle
// since thousands of keys ago (cold lines: docs/internals.md, "keyedsem: a
// key used once, dropped"). One new entry in 16 is not made fresh
// (keepFresh), so a key that comes back gets kept after 16 uses on
// average, and one whose use overlaps another's at once; on the keys
// kept, the soft cap, the idle timeout and the eviction of the oldest
// work as before.
func (s *Keyed[K]) dropFresh() bool {
	return s.alive.Load() >= s.target && !s.closed.Load()
}

// keepFresh reports whether the c-th entry made is kept as it goes idle,
// fresh or not (see dropFresh): one in 16, picked by the top four bits of
// c times 2^64 divided by the golden ratio. The scramble, not c's low
// bits, so that a key that comes back every 16 new keys (or 32, ...),
// made at counts that agree modulo 16, is not dropped every time: the
// products of an arithmetic sequence of counts spread over the top bits.
func keepFresh(c uint64) bool { return (c*0x9E3779B97F4A7C15)>>60 == 0 }

// wentIdle runs after e went idle, in state st (its idle time), when the
// time is at or past due, and does the eviction work of the soft cap and
// the idle timeout, so that both hold without Sweep:
//
//   - over the soft cap, an idle entry may not stay: e is evicted at once
//     (the older idle entries were evicted when the count went over);
//   - otherwise it notes that an entry is idle (after a pass that found
//     none, see starved), runs an expiry pass if one is due, and sets due
//     back to expiry if the count is no longer over the cap.
//
// After Close it does nothing: eviction is then left to Sweep.
func (s *Keyed[K]) wentIdle(e *entry[K], st uint64) {
	if s.closed.Load() {
		return
	}
	if !s.hard && s.alive.Load() > s.maxKeys {
		s.kill(candidate[K]{e, st}) // fails if e was joined meanwhile
		return
	}
	if s.starved.Load() {
		s.starved.Store(false)
		// A new key may have taken the count over the cap and skipped its
		// pass for starved in between our two looks: run it for that key.
		if !s.hard && s.alive.Load() > s.maxKeys {
			s.trim()
		}
	}
	if int64(st) >= s.expiry.Load() {
		s.expire() // sets due itself, unless another pass runs or after Close
	}
	s.rearm()
}

// rearm sets due back to expiry, unless the count is over the soft cap or
// starved is set. Whoever makes either true stores 0 in due after that;
// rearm looks at both after its store, so that one of the two stores of
// 0 comes last.
func (s *Keyed[K]) rearm() {
	v := s.expiry.Load()
	if s.due.Load() == v {
		return
	}
	s.due.Store(v)
	if (!s.hard && s.alive.Load() > s.maxKeys) || s.starved.Load() {
		s.due.Store(0)
	}
}

// releaseQueued is release when waiters are queued: under e.mu, it gives
// the permits back and serves the waiters that now fit, in order, and wakes
// them after unlocking.
func (s *Keyed[K]) releaseQueued(e *entry[K], n int64) {
	var wake waitq.Chain
	e.mu.Lock()
	st := s.unrefLocked(e, n)
	if st&(busyBit|deadBit) == busyBit && !e.q.Empty() {
		if s.barging {
			waitq.BargeServe(&e.q, line[K]{s, e}, &wake)
		} else {
			s.grantLocked(e, &wake)
		}
	}
	e.mu.Unlock()
	wake.Wake()
	s.settle(e, st)
}

// grantLocked serves e's waiters that fit, by the engine's grant. It must
// be called with e.mu held, by a holder of a reference.
func (s *Keyed[K]) grantLocked(e *entry[K], c *waitq.Chain) { waitq.Grant(&e.q, line[K]{s, e}, c) }

// unrefLocked drops a reference on e, giving back n permits, and clears
// the queued bit if nobody waits. It must be called with e.mu held. It
// returns the new state; if that is not busy (the entry died or went
// idle), the caller must settle it after unlocking.
func (s *Keyed[K]) unrefLocked(e *entry[K], n int64) uint64 {
	var idle uint64
	haveIdle := false
	for {
		st := e.state.Load()
		nst := st - refOne + uint64(n)
		if nst&refMask == 0 {
			// Waiters hold references, so nobody waits.
			if !haveIdle {
				idle, haveIdle = s.idleState(), true
			}
			nst = idle
		} else if e.q.Empty() {
			nst &^= queuedBit
		}
		if e.state.CompareAndSwap(st, nst) {
			return nst
		}
	}
}

// drop removes e, which the caller has just made dead (so owns), from the
// map if the map still holds it, and puts it back in the pool. The key is
// read from e only now: while e was referenced, another party could have
// killed and reused it the moment the reference was gone.
func (s *Keyed[K]) drop(e *entry[K]) {
	removed := false
	s.m.Compute(e.key, func(cur *entry[K], loaded bool) (*entry[K], xsync.ComputeOp) {
		if loaded && cur == e {
			removed = true
			return nil, xsync.DeleteOp
		}
		return cur, xsync.CancelOp
	})
	if removed {
		// Otherwise a new entry replaced e, and took over its count.
		s.alive.Add(-1)
	}
	s.evicted.Add(1)
	var zero K
	e.key = zero
	s.entries.Put(e)
}
