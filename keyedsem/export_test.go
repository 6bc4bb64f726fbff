package keyedsem

import (
	"context"
	"unsafe"

	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/semaphore"
)

// Sizes of the structures whose layout matters (see TestLayout).
var (
	EntrySizeString = unsafe.Sizeof(entry[string]{})
	TokenSize       = unsafe.Sizeof(token[string]{})
)

// Has reports whether s's map holds an entry for key (in use or idle).
func Has[K comparable](s *Keyed[K], key K) bool {
	_, ok := s.m.Load(key)
	return ok
}

// JoinAfter does what a lookup of key does, with between run after the map
// returned key's entry and before the reference is raised on it: the window
// in which the entry may be evicted and reused for another key. It reports
// whether the join was refused as stale, and whether the entry had been
// reused for another key by then. A join that is wrongly accepted is undone.
func JoinAfter[K comparable](s *Keyed[K], key K, between func()) (stale, reused bool) {
	e, ok := s.m.Load(key)
	if !ok {
		panic("JoinAfter: key has no entry")
	}
	between()
	reused = e.state.Load()&deadBit == 0 && e.key != key // no other goroutine runs
	took, res, _ := s.join(context.TODO(), e, key, 1, false)
	if res == joinOK {
		var n int64
		if took {
			n = 1
		}
		s.release(e, n)
	}
	return res == joinStale, reused
}

// Passes returns the number of eviction passes s has run.
func Passes[K comparable](s *Keyed[K]) uint64 {
	s.evict <- struct{}{}
	defer s.unlockEvict()
	return s.passes
}

// TryJoinAfter is JoinAfter for TryAcquire: the join takes permits only if
// they are free. It reports whether the join asked for a look under the
// map's lock (stale) instead of answering, and whether the entry had been
// reused for another key. A join that is wrongly accepted is undone.
func TryJoinAfter[K comparable](s *Keyed[K], key K, between func()) (stale, reused bool) {
	e, ok := s.m.Load(key)
	if !ok {
		panic("TryJoinAfter: key has no entry")
	}
	between()
	reused = e.state.Load()&deadBit == 0 && e.key != key
	took, res, _ := s.join(context.TODO(), e, key, 1, true)
	if res == joinOK {
		var n int64
		if took {
			n = 1
		}
		s.release(e, n)
	}
	return res == joinStale, reused
}

// HoldEvictLock takes s's eviction lock, as a running Sweep would, and
// returns the function that gives it back.
func HoldEvictLock[K comparable](s *Keyed[K]) (unlock func()) {
	s.evict <- struct{}{}
	return s.unlockEvict
}

// SetBeforeWait makes every acquire of s that found its key busy, and
// holds a reference on the key's entry, call f before it goes to wait for
// the key (under no lock). Set it before the acquires start.
func SetBeforeWait[K comparable](s *Keyed[K], f func()) { s.beforeWait = f }

// UseTimeNow makes s stamp idle entries with its clock's Now (the system
// clock) instead of the coarse clock, for the ablation benchmark of the
// coarse clock (see docs/internals.md). Call it before the first acquire.
func UseTimeNow[K comparable](s *Keyed[K]) { s.realClock = false }

// NoBacklog makes every trim of s run a pass over all entries, as before
// the backlog (see evictOldest): BenchmarkAblationBacklog's knob.
func NoBacklog[K comparable](s *Keyed[K]) { s.noBacklog = true }

// KillIdle kills key's idle entry as an eviction does, but leaves it in
// the map until the returned func removes it: the window in which a lookup
// of key finds the dead entry and replaces it.
func KillIdle[K comparable](s *Keyed[K], key K) (drop func()) {
	e, ok := s.m.Load(key)
	if !ok {
		panic("KillIdle: key has no entry")
	}
	st := e.state.Load()
	if st&(busyBit|deadBit) != 0 || !e.state.CompareAndSwap(st, deadBit) {
		panic("KillIdle: the entry is not idle")
	}
	return func() { s.drop(e) }
}

// TimedWaits returns how many waits s's wait histogram recorded, before a
// snapshot scales them to every wait (see hist.Sampler).
func TimedWaits[K comparable](s *Keyed[K]) uint64 {
	var c [hist.Buckets]uint64
	n, _ := s.tm.Wait.Read(&c)
	return n
}

// TimedHolds returns how many holds s's hold histogram recorded, before a
// snapshot scales them to every release (see hist.Sampler).
func TimedHolds[K comparable](s *Keyed[K]) uint64 {
	var c [hist.Buckets]uint64
	n, _ := s.tm.Hold.Read(&c)
	return n
}

// KeepFresh makes s keep every key that goes idle, as before dropFresh:
// BenchmarkAblationFresh's knob, and the tests' of the eviction order among
// kept keys. Call it before the first acquire.
func KeepFresh[K comparable](s *Keyed[K]) { s.fresh = 0 }

// NoHandOff makes s's releases into a queue give their permits back for
// the head to claim, as before handOff: BenchmarkAblationHandOff's knob.
// Call it before the first acquire.
func NoHandOff[K comparable](s *Keyed[K]) { s.handsOff = false }

// HandsOff reports whether s's releases into a queue hand off.
func HandsOff[K comparable](s *Keyed[K]) bool { return s.handsOff }

// NoPair makes s take every token from the pool, as before pairs (see
// pair): BenchmarkAblationPair's knob. Call it before the first acquire.
func NoPair[K comparable](s *Keyed[K]) { s.paired = false }

// Paired reports whether s makes its entries as pairs with a token.
func Paired[K comparable](s *Keyed[K]) bool { return s.paired }

// SameToken reports whether p and q were granted through one token.
func SameToken(p, q semaphore.Permit) bool {
	return permit.TokenOf(permit.Permit(p)) == permit.TokenOf(permit.Permit(q))
}
