package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// NewGlobalLane returns a global lane over s, a budget shared by every
// key, for [Queue.Add]; the lane's Close closes s. Code may also take s
// directly, resize it (as package adaptive does) or read its Stats. A
// semaphore of capacity 0 makes a lane that Add refuses and that grants
// nothing; its Stats are still the semaphore's, open until s is closed.
func NewGlobalLane[K comparable](s *semaphore.Weighted) Lane[K] {
	if err := checkSem(s); err != nil {
		return &badLane[K]{kind: Global, err: err, of: &globalLane[K]{s: s}}
	}
	return &globalLane[K]{s: s}
}

// checkSem refuses a semaphore that a global lane could grant nothing of.
func checkSem(s *semaphore.Weighted) error {
	if s == nil {
		panic("lanequeue: nil semaphore")
	}
	if s.Capacity() < 1 {
		return fmt.Errorf("capacity 0: must be at least 1: %w", errInvalidCapacity)
	}
	return nil
}

// globalLane adapts a semaphore.Weighted. Its methods are thin: the
// semaphore does the work and keeps the counters.
type globalLane[K comparable] struct {
	s *semaphore.Weighted
}

func (l *globalLane[K]) Kind() Kind { return Global }

// MaxWeight is one atomic load: Stats would lock the semaphore.
func (l *globalLane[K]) MaxWeight() int64 { return l.s.Capacity() }

func (l *globalLane[K]) Acquire(ctx context.Context, _ K, n int64) (semaphore.Permit, error) {
	return l.s.Acquire(ctx, n)
}

func (l *globalLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	return l.s.TryAcquire(n)
}

func (l *globalLane[K]) Stats() LaneStats {
	st := l.s.Stats()
	return LaneStats{
		Kind:     Global,
		Capacity: st.Capacity,
		Held:     st.Held,
		Waiters:  st.Waiters,
		Closed:   st.Closed,
		Counters: st.Counters,
		Timings:  st.Timings,
	}
}

func (l *globalLane[K]) Close() { l.s.Close() }

// NewKeyedLane returns a keyed lane over s, a budget per key, for
// [Queue.Add]; the lane's Close closes s. Code may also Sweep s or take it
// directly.
func NewKeyedLane[K comparable](s *keyedsem.Keyed[K]) Lane[K] {
	if s == nil {
		panic("lanequeue: nil keyed semaphore")
	}
	return &keyedLane[K]{s: s, capacity: s.Stats().Capacity}
}

// keyedLane adapts a keyedsem.Keyed.
type keyedLane[K comparable] struct {
	s        *keyedsem.Keyed[K]
	capacity int64 // per key: set by keyedsem.New, never changed
}

func (l *keyedLane[K]) Kind() Kind       { return Keyed }
func (l *keyedLane[K]) MaxWeight() int64 { return l.capacity }

func (l *keyedLane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	return keyedAcquire(ctx, l.s, key, n)
}

func (l *keyedLane[K]) TryAcquire(key K, n int64) (semaphore.Permit, bool) {
	return keyedTry(l.s, key, n)
}

func (l *keyedLane[K]) Stats() LaneStats {
	st := l.s.Stats()
	return LaneStats{
		Kind:        Keyed,
		Capacity:    st.Capacity,
		Held:        st.Held,
		Waiters:     st.Waiters,
		Keys:        st.Keys,
		Closed:      st.Closed,
		Counters:    st.Counters,
		Timings:     st.Timings,
		HoldsRunOut: st.HoldsRunOut,
	}
}

func (l *keyedLane[K]) Close() { l.s.Close() }
