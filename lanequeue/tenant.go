package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// AddFairLane adds a global lane made [semaphore.WithFairShare] for tenants
// of many keys (keys alone share a global lane behind a keyed one): a call
// waits in its [semaphore.Group], else tenant(key), which must be cheap and
// safe for concurrent use. It returns AddGlobalLane's errors.
func (q *Queue[K]) AddFairLane(name string, capacity int64, tenant func(K) string, opts ...semaphore.Option) error {
	if capacity < 1 {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at least 1: %w", name, capacity, errInvalidCapacity)
	}
	if capacity > semaphore.MaxCapacity {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at most %d (semaphore.MaxCapacity): %w", name, capacity, int64(semaphore.MaxCapacity), errInvalidCapacity)
	}
	// The caller's options on their own first, so that an error names
	// them by the caller's index; then with fair share, for a policy that
	// cannot go with it.
	if err := semaphore.Validate(capacity, opts...); err != nil {
		return fmt.Errorf("lanequeue: lane %q: %w", name, err)
	}
	opts = append([]semaphore.Option{semaphore.WithFairShare(nil)}, opts...)
	if err := semaphore.Validate(capacity, opts...); err != nil {
		return fmt.Errorf("lanequeue: lane %q: %w", name, err)
	}
	if err := q.checkName(name); err != nil {
		return err
	}
	g := &globalLane[K]{s: semaphore.New(capacity, opts...)}
	g.capacity.Store(capacity)
	return q.add(&laneEntry[K]{name: name, kind: Global, lane: &fairLane[K]{globalLane: g, tenant: tenant}, own: true})
}

// NewFairLane returns a global lane over s (made [semaphore.WithFairShare];
// the lane's Close closes it) whose callers wait in their
// [semaphore.Group], else tenant(key).
func NewFairLane[K comparable](s *semaphore.Weighted, tenant func(K) string) Lane[K] {
	if s == nil {
		panic("lanequeue: nil semaphore")
	}
	g := &globalLane[K]{s: s}
	g.capacity.Store(-1)
	return &fairLane[K]{globalLane: g, tenant: tenant}
}

// fairLane is a global lane that gives its semaphore each call's group.
// It is a type of its own, not a globalLane, so that the queue's direct
// call of a global lane's semaphore (laneEntry.bind) does not pass it by.
type fairLane[K comparable] struct {
	*globalLane[K]
	tenant func(K) string
}

func (l *fairLane[K]) group(key K) string {
	if l.tenant == nil {
		return ""
	}
	return l.tenant(key)
}

func (l *fairLane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	return l.s.Acquire(ctx, n, semaphore.Group(l.group(key)))
}

// acquireTurn is the lane's side of the queue's acquire options: the
// call's group, if it gives one, else the key's tenant.
func (l *fairLane[K]) acquireTurn(ctx context.Context, key K, n int64, t call.Turn) (semaphore.Permit, error) {
	// The call's priority too, leniently: a fair lane may be made with
	// semaphore.WithPriorities as well (they compose), and one without
	// drops it. A sequence is never a semaphore's concern.
	g := t.Group
	if g == "" {
		g = l.group(key)
	}
	return l.s.Acquire(ctx, n, call.Lenient, semaphore.Priority(t.Priority), semaphore.Group(g))
}
