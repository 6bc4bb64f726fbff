package lanequeue

import (
	"context"
	"sync/atomic"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// NewGlobalLane returns a global lane over s, to share s with code that
// takes it directly; the lane's Close closes s.
func NewGlobalLane[K comparable](s *semaphore.Weighted) Lane[K] {
	if s == nil {
		panic("lanequeue: nil semaphore")
	}
	l := &globalLane[K]{s: s}
	l.capacity.Store(-1)
	return l
}

// globalLane adapts a semaphore.Weighted. Its methods are thin: the
// semaphore does the work and keeps the counters.
type globalLane[K comparable] struct {
	s *semaphore.Weighted
	// capacity is the semaphore's fixed capacity when the lane made it
	// (AddGlobalLane: nobody else can change it), or -1 for a semaphore from
	// outside, whose capacity is read from it each time (it may be
	// changed by SetCapacity). Queue.GlobalSemaphore, which hands the
	// semaphore out, sets it to -1 for good.
	capacity atomic.Int64
}

func (l *globalLane[K]) Kind() Kind { return Global }

func (l *globalLane[K]) MaxWeight() int64 {
	if c := l.capacity.Load(); c >= 0 {
		return c
	}
	return l.s.Capacity() // one atomic load: Stats would lock the semaphore on every AcquireAll
}

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

// NewKeyedLane returns a keyed lane over s; the lane's Close closes s.
func NewKeyedLane[K comparable](s *keyedsem.Keyed[K]) Lane[K] {
	if s == nil {
		panic("lanequeue: nil keyed semaphore")
	}
	return &keyedLane[K]{s: s}
}

// keyedLane adapts a keyedsem.Keyed.
type keyedLane[K comparable] struct {
	s *keyedsem.Keyed[K]
}

func (l *keyedLane[K]) Kind() Kind       { return Keyed }
func (l *keyedLane[K]) MaxWeight() int64 { return l.s.PerKeyCapacity() }

func (l *keyedLane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	return keyedAcquire(ctx, l.s, key, n)
}

func (l *keyedLane[K]) TryAcquire(key K, n int64) (semaphore.Permit, bool) {
	return keyedTry(l.s, key, n)
}

func (l *keyedLane[K]) Stats() LaneStats {
	st := l.s.Stats()
	return LaneStats{
		Kind:     Keyed,
		Capacity: st.Capacity,
		Held:     st.Held,
		Waiters:  st.Waiters,
		Keys:     st.Keys,
		Closed:   st.Closed,
		Counters: st.Counters,
		Timings:  st.Timings,
	}
}

func (l *keyedLane[K]) Close() { l.s.Close() }
