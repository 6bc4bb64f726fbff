package keyedsem

import (
	"context"
	"math"
)

// candidate is an idle entry that an eviction pass found, with the state it
// had then: the time it went idle.
type candidate[K comparable] struct {
	e  *entry[K]
	st uint64
}

// Sweep evicts, at once, the entries idle for the idle timeout and, while
// over [WithMaxKeys], the oldest idle ones, and returns how many. It is not
// needed for the timeout to hold, and works after Close.
func (s *Keyed[K]) Sweep() int {
	s.mustBeMade()
	s.evict <- struct{}{}
	defer s.unlockEvict()
	n := s.pass(false)
	s.starved.Store(false)
	return n
}

// trim runs after a new entry took the count over the soft cap. If another
// pass holds the eviction lock, the work is owed: the holder runs it when
// it gives the lock back (unlockEvict).
func (s *Keyed[K]) trim() {
	s.owed.Store(true)
	if !s.tryLockEvict() {
		return
	}
	s.trimLocked()
	s.unlockEvict()
}

// trimLocked evicts the oldest idle entries, if the count is over the soft
// cap, down to a quarter under it. It must be called with the eviction
// lock held. After a pass that found nothing idle it sets starved, so that
// a burst of new keys against busy entries costs no pass each (see made);
// an entry that went idle during the pass may have missed the flag being
// set, so one more look keeps that exact.
func (s *Keyed[K]) trimLocked() {
	s.owed.Store(false)
	if s.alive.Load() <= s.maxKeys {
		return
	}
	if s.evictOldest() > 0 {
		return
	}
	s.starved.Store(true)
	s.due.Store(0) // the next idle transition clears starved (see rearm)
	if s.pass(true) > 0 {
		s.starved.Store(false)
	}
}

// expire runs an expiry pass if one is due. If another pass holds the
// eviction lock it does nothing: that pass sets the next due time itself.
func (s *Keyed[K]) expire() {
	if s.closed.Load() || !s.tryLockEvict() {
		return
	}
	if s.now() >= s.expiry.Load() {
		s.pass(false)
	}
	s.unlockEvict()
}

// makeRoom runs when the hard cap refused a new entry. It reports whether
// there may be room now; if not, the error is ErrTooManyKeys, or ctx's
// error if ctx ended while makeRoom waited for a running pass. After a
// pass that found nothing idle, it refuses at once until some entry goes
// idle (wentIdle clears starved), so that a flood of new keys against a cap
// full of busy entries costs no pass each.
//
// With try (TryAcquire; ctx is not used), it never waits for a running
// pass: it reports no room instead.
func (s *Keyed[K]) makeRoom(ctx context.Context, try bool) (bool, error) {
	// The lock first, if it is free: then an ended ctx makes no difference
	// here (the caller looks at ctx when it waits for its key).
	if !s.tryLockEvict() {
		if try {
			return false, ErrTooManyKeys
		}
		done := ctx.Done() // nil for a context that never ends: never ready
		select {
		case s.evict <- struct{}{}:
		case <-done:
			return false, ctx.Err()
		}
		// Both may have been ready, and select picks at random: a
		// context that ended while the pass ran wins.
		select {
		case <-done:
			s.unlockEvict()
			return false, ctx.Err()
		default:
		}
	}
	defer s.unlockEvict()
	if s.alive.Load() < s.maxKeys {
		return true, nil
	}
	if s.starved.Load() {
		return false, ErrTooManyKeys // nothing has gone idle since a pass found nothing to evict
	}
	if s.evictOldest() > 0 {
		return true, nil
	}
	s.starved.Store(true)
	s.due.Store(0) // the next idle transition clears starved (see rearm)
	// An entry that went idle during the pass may have missed the flag
	// being set; one more look costs little and keeps the refusal exact.
	if s.pass(true) > 0 {
		s.starved.Store(false)
		return true, nil
	}
	return false, ErrTooManyKeys
}

// tryLockEvict takes the eviction lock if it is free, without waiting.
func (s *Keyed[K]) tryLockEvict() bool {
	select {
	case s.evict <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlockEvict gives the eviction lock back, and runs the trim that a new
// key left owed while the lock was held. (The key sets owed before it
// tries the lock, and the holder looks at owed after it gave the lock
// back: either the key gets the lock, or the holder sees owed.)
func (s *Keyed[K]) unlockEvict() {
	<-s.evict
	for s.owed.Load() && s.tryLockEvict() {
		s.trimLocked()
		<-s.evict
	}
}

// pass is one eviction pass; it must be called with the eviction lock
// held. It evicts every idle entry whose idle time has reached the
// timeout; then, if overCap or if the entries exceed the cap, the oldest
// idle ones until the count is down to target. It returns the number
// evicted, and sets the time the next expiry pass is due: when the
// oldest idle entry it kept reaches the timeout (an entry that goes idle
// later expires later), but no sooner than step from now (nor than eight
// times the pass took), so that passes cost a bounded share however the
// idle times are spread.
//
// Eviction is safe because it only ever kills an entry by one
// compare-and-swap from the exact idle state it saw (no references, and
// the same idle time) to dead: a caller that raised a reference in between
// makes it fail, and a caller that comes later finds the entry dead and
// makes a new one under the map's lock. The pass then removes that entry,
// and only that one, from the map (drop).
func (s *Keyed[K]) pass(overCap bool) int {
	s.passes++
	now := s.freshNow()
	oldest := uint64(now)
	s.backlog = nil // this pass looks at every entry again
	buf := s.buf[:0]
	s.m.RangeRelaxed(func(_ K, e *entry[K]) bool {
		if st := e.state.Load(); st&(deadBit|busyBit) == 0 {
			buf = append(buf, candidate[K]{e, st})
		}
		return true
	})
	found := len(buf)
	evicted := 0
	keep := buf[:0]
	if found > 0 {
		for _, c := range buf {
			if now-int64(c.st) >= s.idle {
				if s.kill(c) {
					evicted++
				}
			} else {
				keep = append(keep, c)
				oldest = min(oldest, c.st)
			}
		}
		alive := s.alive.Load()
		if over := alive - s.target; over > 0 && len(keep) > 0 && (overCap || alive > s.maxKeys) {
			k := int(min(over, int64(len(keep))))
			selectOldest(keep, k)
			for _, c := range keep[:k] {
				if s.kill(c) {
					evicted++
				}
			}
			clear(keep[:k]) // let evicted entries go
			keep = keep[k:]
		}
	}
	if s.idle > 0 {
		// No sooner than step, nor than eight times this pass took: with
		// a tiny timeout and many entries, passes take at most about a
		// ninth of one core.
		gap := max(s.step, 8*(s.freshNow()-now))
		s.expiry.Store(max(addSat(now, gap), addSat(int64(oldest), s.idle)))
		s.rearm()
	}
	// The idle entries kept are the backlog of the next trims (see
	// evictOldest); the rest of buf held copies of the candidates, and the
	// expired ones.
	kept := len(keep)
	if off := cap(buf) - cap(keep); off+kept < found {
		clear(buf[off+kept : found])
	}
	if int64(cap(buf)) > 2*min(s.maxKeys, math.MaxInt32)+64 {
		// After a burst of keys, do not keep its buffer: the backlog (at
		// most a cap's worth of candidates: over the cap, a pass evicts
		// down to target) moves to a small one.
		keep = append([]candidate[K](nil), keep...)
		buf = keep[:0:0]
	}
	s.buf = buf[:0]
	if !s.noBacklog {
		s.backlog = keep
	} else {
		clear(keep)
	}
	return evicted
}

// evictOldest evicts the oldest idle entries, down to target, and returns
// how many. It must be called with the eviction lock held.
//
// It takes them from the backlog first: the idle entries that the last
// pass saw and kept, with the idle time each had then. The backlog holds
// the oldest idle entries there are, but for those used since: an entry
// idle now that is not in it went idle after that pass (modulo the coarse
// clock's resolution), later than any entry in it; one in it that was used
// since is no longer in the state recorded, so its kill fails and it is
// skipped, as a pass's kill of an entry used during the pass is. Only when
// the backlog runs out does a pass look at every entry again. So a new key
// over the cap pays O(1) amortised for the entries looked at, where a
// pass per trim looked at the cap's worth of entries to evict a quarter
// of them.
func (s *Keyed[K]) evictOldest() int {
	evicted := 0
	for len(s.backlog) > 0 {
		over := s.alive.Load() - s.target
		if over <= 0 {
			return evicted
		}
		k := int(min(over, int64(len(s.backlog))))
		selectOldest(s.backlog, k)
		for _, c := range s.backlog[:k] {
			if s.kill(c) {
				evicted++
			}
		}
		clear(s.backlog[:k])
		s.backlog = s.backlog[k:]
	}
	if s.alive.Load() > s.target {
		evicted += s.pass(true)
	}
	return evicted
}

// addSat returns a+b for b >= 0, or math.MaxInt64 if that overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// kill evicts c's entry if it is still in the idle state the pass saw.
func (s *Keyed[K]) kill(c candidate[K]) bool {
	if !c.e.state.CompareAndSwap(c.st, deadBit) {
		return false // used, or evicted, since
	}
	s.drop(c.e)
	return true
}

// selectOldest reorders c so that its first k elements are the k that
// went idle first (Hoare's selection: linear time on average).
func selectOldest[K comparable](c []candidate[K], k int) {
	t := k - 1
	lo, hi := 0, len(c)-1
	for lo < hi {
		a, b, m := c[lo].st, c[hi].st, c[lo+(hi-lo)/2].st
		pivot := max(min(a, b), min(max(a, b), m)) // median of three
		i, j := lo, hi
		for i <= j {
			for c[i].st < pivot {
				i++
			}
			for c[j].st > pivot {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case t <= j:
			hi = j
		case t >= i:
			lo = i
		default:
			return
		}
	}
}
