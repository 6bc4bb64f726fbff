package keyedsem

import "context"

// candidate is an idle entry that an eviction pass found, with the state it
// had then: the time it went idle.
type candidate[K comparable] struct {
	e  *entry[K]
	st uint64
}

// Sweep evicts the entries that have been idle for at least the idle
// timeout and, if there are still more entries than WithMaxKeys (because
// entries in use exceeded it), the oldest idle ones until there are a
// quarter fewer than the cap. It returns the number of entries evicted.
//
// Entries in use (held, waited for, or being looked up) are never evicted.
// Sweep takes time in proportion to the number of entries; acquires and
// releases go on meanwhile (only a new key refused by the hard cap waits for
// the running pass before it tries to make room). Nothing sweeps by
// itself: call Sweep from time to time, for example every idle timeout
// (the cap bounds the entries anyway).
func (s *KeyedSemaphore[K]) Sweep() int {
	s.evict <- struct{}{}
	defer s.unlockEvict()
	n := s.pass(false)
	s.nextPass.Store(0)
	s.starved.Store(false)
	return n
}

// evictOverCap runs after a new entry took the count over the soft cap. If
// another pass is running, it leaves the work to it; entries made during a
// Sweep may leave the count over the cap until the next new key.
func (s *KeyedSemaphore[K]) evictOverCap() {
	if !s.tryLockEvict() {
		return
	}
	defer s.unlockEvict()
	for s.alive.Load() > s.maxKeys {
		if s.pass(true) == 0 {
			// Everything over the cap is in use: wait for another
			// eighth of new keys, so that passes cost a bounded amount
			// per new key however large the burst.
			n := s.alive.Load()
			s.nextPass.Store(n + max(1, n/8))
			return
		}
	}
	s.nextPass.Store(0)
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
func (s *KeyedSemaphore[K]) makeRoom(ctx context.Context, try bool) (bool, error) {
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
	if s.pass(true) > 0 {
		return true, nil
	}
	s.starved.Store(true)
	// An entry that went idle during the pass may have missed the flag
	// being set; one more look costs little and keeps the refusal exact.
	if s.pass(true) > 0 {
		s.starved.Store(false)
		return true, nil
	}
	return false, ErrTooManyKeys
}

// tryLockEvict takes the eviction lock if it is free, without waiting.
func (s *KeyedSemaphore[K]) tryLockEvict() bool {
	select {
	case s.evict <- struct{}{}:
		return true
	default:
		return false
	}
}

// unlockEvict gives the eviction lock back.
func (s *KeyedSemaphore[K]) unlockEvict() { <-s.evict }

// pass is one eviction pass; it must be called with the eviction lock
// held. It evicts every idle entry whose idle time has reached the
// timeout; then, if overCap or if the entries exceed the cap, the oldest
// idle ones until the count is down to target. It returns the number
// evicted.
//
// Eviction is safe because it only ever kills an entry by one
// compare-and-swap from the exact idle state it saw (no references, and
// the same idle time) to dead: a caller that raised a reference in between
// makes it fail, and a caller that comes later finds the entry dead and
// makes a new one under the map's lock. The pass then removes that entry,
// and only that one, from the map (drop).
func (s *KeyedSemaphore[K]) pass(overCap bool) int {
	s.passes++
	buf := s.buf[:0]
	s.m.RangeRelaxed(func(_ K, e *entry[K]) bool {
		if st := e.state.Load(); st&(deadBit|busyBit) == 0 {
			buf = append(buf, candidate[K]{e, st})
		}
		return true
	})
	found := len(buf)
	evicted := 0
	if found > 0 {
		now := s.now()
		keep := buf[:0]
		for _, c := range buf {
			if now-int64(c.st) >= s.idle {
				if s.kill(c) {
					evicted++
				}
			} else {
				keep = append(keep, c)
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
		}
	}
	clear(buf[:found]) // let evicted entries go
	if cap(buf) > 2*int(s.maxKeys)+64 {
		buf = nil // after a burst of keys, do not keep its buffer
	}
	s.buf = buf[:0]
	return evicted
}

// kill evicts c's entry if it is still in the idle state the pass saw.
func (s *KeyedSemaphore[K]) kill(c candidate[K]) bool {
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
