package keyedsem

import (
	"context"
	"errors"
	"fmt"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/sessionlane/lanes/semaphore"
)

// ended returns ctx's error. An ended context has a non-nil Err: one
// atomic load for the standard contexts (a call that returns nil for
// Background and TODO), cheaper than a select on Done.
//
// An acquire calls it after each load of the state (or of the map) that a
// claim of permits is made from, and before the claim: with Go's
// sequentially consistent atomics, a load that sees the release that freed
// the permits also lets ctx.Err see a cancellation that came before that
// release, so a context that ended before the permits came free always
// wins.
func ended(ctx context.Context) error { return ctx.Err() }

// errBusy is lookup's answer to a try whose key has no free permits.
var errBusy = errors.New("keyedsem: busy")

// maxRefs is the most references one entry counts (its state word's
// refs: 30 bits): holders, waiters, places and calls between lookup and
// acquire. A lookup that would raise one more is refused (refsFull).
const maxRefs = refMask >> refShift

// errTooManyRefs is lookup's refusal of a key whose entry counts maxRefs
// references already: the count is refused, never wrapped into the bits
// beside it.
var errTooManyRefs = fmt.Errorf("keyedsem: the key counts %d references (holders, waiters, places and calls in flight), the most one key holds: %w", maxRefs, semaphore.ErrQueueFull)

// refsFull reports whether an entry in state st counts maxRefs references
// (only a busy entry counts them: an idle one's bits are a time stamp).
func refsFull(st uint64) bool { return st&(busyBit|refMask) == busyBit|refMask }

// next returns the state after raising a reference on an entry in state st
// (not dead, not refsFull), taking n permits if they are free and nobody
// waits, and whether it took them.
func (s *Keyed[K]) next(st uint64, n int64) (uint64, bool) {
	if st&busyBit == 0 {
		return busyBit | refOne | uint64(s.capacity-n), true
	}
	// A second reference makes the entry a key used more than once: not
	// fresh (see dropFresh).
	if (st&queuedBit == 0 || (s.barging && st&kStrict == 0)) && avail(st) >= n {
		// Nobody waits, or (WithBarging) nobody has waited the bound:
		// free permits may be taken ahead of the queue.
		return (st + refOne - uint64(n)) &^ kFresh, true
	}
	return (st + refOne) &^ kFresh, false
}

// lookup finds or makes key's entry and raises a reference on it, in one
// atomic step, taking n permits if they are free and nobody waits. With try
// it takes a reference only together with the permits, and otherwise
// returns errBusy. The error is ErrTooManyKeys if the hard cap refused a
// new entry, errTooManyRefs if the key counts maxRefs references already, or ctx's error if ctx ended while the hard cap waited for an
// eviction pass, or had ended when lookup was about to claim permits (with
// try, ctx is a context that never ends).
func (s *Keyed[K]) lookup(ctx context.Context, key K, n int64, try bool) (*entry[K], bool, error) {
	// One hash and one pass over the bucket for the two common cases: the
	// key has a live entry (no lock taken), or it has none (the entry is
	// made under the bucket's lock).
	var made, full bool
	var count int64
	var cerr error
	e, loaded := s.m.LoadOrCompute(key, func() (*entry[K], bool) {
		if cerr = ended(ctx); cerr != nil {
			return nil, true // the map had no entry: it may have just been dropped
		}
		c, ok := s.reserve()
		if !ok {
			full = true
			return nil, true
		}
		made, count = true, c
		return s.publish(key, n), false
	})
	switch {
	case made:
		s.made(count)
		return e, true, nil
	case loaded:
		took, res, err := s.join(ctx, e, key, n, try)
		if res == joinOK {
			return e, took, err
		}
	case cerr != nil:
		return nil, false, cerr
	case full:
		if room, err := s.makeRoom(ctx, try); !room {
			return nil, false, err
		}
	}
	// The entry found was dead or reused, or room was made: look again
	// under the bucket's lock, replacing a dead entry.
	for {
		e, took, err, again := s.compute(ctx, key, n, try)
		if !again {
			return e, took, err
		}
	}
}

// publish makes a live entry for key, from the pool, with one reference
// and n permits taken for the caller. It must be called under key's bucket
// lock, with the map about to hold the entry: from the state's store on, a
// caller holding a stale pointer to the pooled entry may join it, and that
// is right, because it is key's entry.
//
// It counts the entry in Created, and makes it fresh (see dropFresh)
// unless keepFresh picks its count: one new entry in 16 is kept, picked by
// the count that every new entry writes anyway, so the pick costs no
// shared write and a sequential model can follow it.
func (s *Keyed[K]) publish(key K, n int64) *entry[K] {
	fresh := s.fresh
	if keepFresh(s.created.Add(1)) {
		fresh = 0
	}
	e := s.entries.Get().(*entry[K])
	e.key = key
	e.last = noSeq // a new entry knows no number: its first caller goes at once
	e.state.Store(busyBit | refOne | uint64(s.capacity-n) | fresh)
	return e
}

// made runs after a new entry (counted by publish) took the count of
// entries to count, and does the eviction work that is owed: if the count
// is over the soft cap, a pass that evicts the oldest idle entries;
// otherwise an expiry pass if one is due.
//
// When the entries over the cap are in use, a pass finds nothing to evict;
// running one for every new key would make a burst of busy keys cost the
// square of its size. So after such a pass none runs until an entry goes
// idle (starved): an entry that goes idle while the count is over the cap
// is evicted at once instead (see wentIdle), so none is missed.
func (s *Keyed[K]) made(count int64) {
	if s.idle == 0 {
		return // no entry is ever idle
	}
	if !s.hard && count > s.maxKeys {
		if s.due.Load() != 0 {
			s.due.Store(0) // entries going idle now must look at the count
		}
		if !s.starved.Load() {
			s.trim()
		}
		return
	}
	if s.now() >= s.expiry.Load() {
		s.expire()
	}
}

const (
	joinOK = iota
	joinStale
)

// join raises a reference on e, an entry that the map held for key a
// moment ago, taking n permits if it can. It returns joinStale if e is dead
// or no longer key's: the caller then looks again under the map's lock. If
// ctx has ended when join is about to raise the reference, it raises none
// and returns joinOK with ctx's error.
//
// e may have been evicted and reused for another key since the map
// returned it. The compare-and-swap fails on a dead entry; if it succeeds
// on a reused one, the reference keeps the entry (and its key) from
// changing while join compares the key, and is then dropped.
func (s *Keyed[K]) join(ctx context.Context, e *entry[K], key K, n int64, try bool) (bool, int, error) {
	for {
		st := e.state.Load()
		if st&deadBit != 0 {
			return false, joinStale, nil
		}
		if refsFull(st) {
			return false, joinOK, errTooManyRefs
		}
		nst, took := s.next(st, n)
		if try && !took {
			// Busy, or a reused entry of another key that is busy: look
			// again under the bucket's lock, where the map is exact.
			return false, joinStale, nil
		}
		if err := ended(ctx); err != nil {
			return false, joinOK, err // after the load: see ended
		}
		if !e.state.CompareAndSwap(st, nst) {
			continue
		}
		if e.key == key {
			return took, joinOK, nil
		}
		var w int64
		if took {
			w = n
		}
		s.release(e, w)
		return false, joinStale, nil
	}
}

// compute does lookup's work under the map's lock for key: it joins the
// live entry, or makes one (replacing a dead one that its owner has not
// removed yet). A new entry's permits are taken at once. again asks the
// caller to look again, after the hard cap made room. ctx is looked at
// after each load that a claim is made from, before the claim (see ended);
// if it has ended, nothing is taken and its error returned.
func (s *Keyed[K]) compute(ctx context.Context, key K, n int64, try bool) (e *entry[K], took bool, err error, again bool) {
	var full, busy, made, refs bool
	var count int64
	var cerr error
	s.m.Compute(key, func(cur *entry[K], loaded bool) (*entry[K], xsync.ComputeOp) {
		if loaded {
			for {
				st := cur.state.Load()
				if cerr = ended(ctx); cerr != nil {
					return cur, xsync.CancelOp // after the load: see ended
				}
				if st&deadBit != 0 {
					// Replace it below; its owner's removal will find it
					// gone, and leave its count to the new entry.
					count = s.alive.Load()
					break
				}
				if refs = refsFull(st); refs {
					return cur, xsync.CancelOp
				}
				nst, t := s.next(st, n)
				if try && !t {
					busy = true
					return cur, xsync.CancelOp
				}
				if cur.state.CompareAndSwap(st, nst) {
					e, took = cur, t
					return cur, xsync.CancelOp
				}
			}
		} else if cerr = ended(ctx); cerr != nil {
			return nil, xsync.CancelOp // no entry: it may have just been dropped
		} else if c, ok := s.reserve(); ok {
			count = c
		} else {
			full = true
			return nil, xsync.CancelOp
		}
		ne := s.publish(key, n)
		e, took, made = ne, true, true
		return ne, xsync.UpdateOp
	})
	switch {
	case cerr != nil:
		return nil, false, cerr, false
	case busy:
		return nil, false, errBusy, false
	case refs:
		return nil, false, errTooManyRefs, false
	case full:
		room, err := s.makeRoom(ctx, try)
		return nil, false, err, room
	case made:
		s.made(count)
	}
	return e, took, nil, false
}

// reserve counts a new entry in alive and returns the count with it, or
// reports that the hard cap has no room for it.
func (s *Keyed[K]) reserve() (int64, bool) {
	if !s.hard {
		return s.alive.Add(1), true
	}
	for {
		c := s.alive.Load()
		if c >= s.maxKeys {
			return c, false
		}
		if s.alive.CompareAndSwap(c, c+1) {
			return c + 1, true
		}
	}
}
