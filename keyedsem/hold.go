package keyedsem

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// The reorder hold (WithReorderHold). Each entry keeps, under its lock,
// the highest Sequence it granted (entry.last, noSeq for a new entry).
// A sequenced caller never takes permits at lookup: it decides under the
// entry's lock (enqueue), where a number above last+1 is held, that is
// queued in number order even if the key is free. The head of the line is
// served (line.Claim) once its number is last+1 or less, or once any
// waiter of the key has waited the bound: the line then goes in number
// order, and the grant is counted in holdsOut. Each held waiter arms a
// timer on the semaphore's clock for the bound, which, when it fires,
// serves the line (await).

// noSeq is entry.last when the entry has granted no number.
const noSeq = math.MinInt64

// errHoldRunOut is the MaxWait error that tells a held waiter its bound
// has passed; it never reaches a caller.
var errHoldRunOut = errors.New("keyedsem: reorder hold ran out")

// holds reports whether a caller at turn t is subject to the hold: s has
// one and t carries a Sequence.
func (s *Keyed[K]) holds(t *call.Turn) bool { return s.hold != 0 && t != nil && t.Sequence != 0 }

// takeAtLookup returns the permits an acquire of n at turn t may take at
// lookup: none if the hold applies, so that it decides under the lock.
func (s *Keyed[K]) takeAtLookup(n int64, t *call.Turn) int64 {
	if s.holds(t) {
		return 0
	}
	return n
}

// gapped reports whether seq (0: none) comes after a number not yet
// granted, on an entry whose highest granted number is last.
func gapped(last, seq int64) bool {
	if seq == 0 || last == noSeq || seq <= last {
		return false
	}
	d := uint64(seq) - uint64(last)
	if last < 0 && seq > 0 {
		d-- // 0 is no number: -1 then 1 is no gap
	}
	return d > 1
}

// heldLocked reports whether w, the head of e's line, is held back now,
// and whether serving it now ends a hold that ran out. Under e.mu.
func (s *Keyed[K]) heldLocked(e *entry[K], w *waitq.Waiter) (held, ranOut bool) {
	if !gapped(e.last, w.Rank) {
		return false, false
	}
	now := s.hc.Precise()
	for x := w; x != nil; x = x.Next() {
		if now-x.Since >= s.hold {
			return false, true
		}
	}
	return true, false
}

// grantedLocked notes that a caller numbered seq (0: none) was granted
// on e. Under e.mu.
func grantedLocked[K comparable](e *entry[K], seq int64) {
	if seq != 0 && (e.last == noSeq || seq > e.last) {
		e.last = max(seq, noSeq+1) // MinInt64 granted must not read as none
	}
}

// holdLeft returns how much longer w may be held, from its stamp.
func (s *Keyed[K]) holdLeft(w *waitq.Waiter) time.Duration {
	return time.Duration(max(s.hold-(s.hc.Precise()-w.Since), 0))
}

// tryHeld is TryAcquire for n permits of key by a caller numbered seq
// under the hold: it decides under the entry's lock, as enqueue does, and
// takes the permits only if they are free, nobody waits and seq is not
// held.
func (s *Keyed[K]) tryHeld(key K, n int64, seq int64) (semaphore.Permit, bool) {
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		return semaphore.Permit{}, false
	}
	e, _, err := s.lookup(context.TODO(), key, 0, true) // a reference, no permits
	if err != nil {
		return semaphore.Permit{}, false
	}
	e.mu.Lock()
	for !s.closed.Load() && e.q.Empty() && !gapped(e.last, seq) {
		st := e.state.Load()
		if avail(st) < n {
			break
		}
		if e.state.CompareAndSwap(st, st-uint64(n)) {
			grantedLocked(e, seq)
			e.mu.Unlock()
			return s.grant(e, n), true
		}
	}
	e.mu.Unlock()
	s.release(e, 0)
	return semaphore.Permit{}, false
}
