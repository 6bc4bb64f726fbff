package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// AddFairLane adds a [Global] lane of the given capacity whose semaphore
// is made with [semaphore.WithFairShare]: its waiters are served by
// tenant, with weighted fair sharing, and in arrival order within a
// tenant.
//
// Keys already share a global lane fairly when a keyed lane is taken with
// it: keyed lanes come first, so a key has at most as many callers
// waiting on the global lane as its per-key capacity lets through (one,
// by default), however many of its messages queue on the keyed lane; a
// key with 100 messages waiting takes its turn on a FIFO global lane like
// a key with one. Tenants are not keys: a tenant with 500 threads has 500
// keys, and in FIFO order they would take every global permit from a
// tenant with 5. On a fair lane the two take turns.
//
// A call's tenant is tenant(key), or the group of the call's semaphore.Group
// option when that is not empty (semaphore.Group("") leaves the tenant to the
// function); nil tenant puts every call in the group "" unless it gives a
// group. Over any stretch of time during which two tenants both have
// callers waiting on the lane, their grants are in the proportion of
// their weights, give or take one request each (see WithFairShare for
// what exactly is shared and what a cancelled wait costs its tenant).
//
// tenant is called by every AcquireAll or Do that has to wait on the
// lane, for its key, without any lock held: it must be safe for
// concurrent use and cheap (a field of the key, a map lookup). A call
// granted at once, and TryAcquireAll (it never waits, so it has no place
// in line), do not ask. A tenant function that panics leaves the call
// holding nothing, and the panic goes on (see the package doc).
//
// The tenants have equal weights; to weigh them, pass
// semaphore.WithFairShare(weight) among opts (it replaces the default).
// opts are the semaphore's, as for [Queue.AddGlobalLane]; an ordering
// policy among them (WithPriorities, WithSequenceOrder, WithBarging)
// cannot be combined with fair share and is refused with an error
// matching [ErrInvalidConfig]. [Queue.GlobalSemaphore] returns the
// semaphore, to resize the lane.
//
// AddFairLane returns the errors of AddGlobalLane; it never panics for a
// bad setting.
func (q *Queue[K]) AddFairLane(name string, capacity int64, tenant func(K) string, opts ...semaphore.Option) error {
	if capacity < 1 {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at least 1: %w", name, capacity, ErrInvalidCapacity)
	}
	if capacity > semaphore.MaxCapacity {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at most %d (semaphore.MaxCapacity): %w", name, capacity, int64(semaphore.MaxCapacity), ErrInvalidCapacity)
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

// NewFairLane returns a [Global] lane over s whose callers wait in the
// group tenant(key), or the group of their semaphore.Group option (see
// [Queue.AddFairLane]). s must be made with [semaphore.WithFairShare]:
// on another semaphore a call with a non-empty group fails with an error
// matching [ErrInvalidConfig] that names WithFairShare. The lane's Close
// closes s.
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
	// A fair lane orders by group alone (fair share excludes the other
	// ordering options), so the call's other fields are not its concern.
	g := t.Group
	if g == "" {
		g = l.group(key)
	}
	return l.s.Acquire(ctx, n, semaphore.Group(g))
}
