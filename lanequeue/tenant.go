package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// NewFairLane returns a global lane over s, made
// [semaphore.WithFairShare], for tenants of many keys (keys alone share a
// global lane behind a keyed one): a call waits in its [semaphore.Group],
// else tenant(key), which must be cheap and safe for concurrent use
// (Group("") is no group named, so tenant(key) decides; name the default
// group by returning "" from tenant). The
// lane's Close closes s. A semaphore of capacity 0 or made without
// WithFairShare, or a nil tenant, makes a lane that Add refuses (its Stats
// are still the semaphore's, as [NewGlobalLane]'s).
func NewFairLane[K comparable](s *semaphore.Weighted, tenant func(K) string) Lane[K] {
	if err := checkSem(s); err != nil {
		return &badLane[K]{kind: Global, err: err, of: &globalLane[K]{s: s}}
	}
	// Either would leave the lane first come, first served, unasked.
	if !call.FairShare.(func(*semaphore.Weighted) bool)(s) {
		return &badLane[K]{kind: Global, err: errNotFair, of: &globalLane[K]{s: s}}
	}
	if tenant == nil {
		return &badLane[K]{kind: Global, err: errNoTenant, of: &globalLane[K]{s: s}}
	}
	return &fairLane[K]{globalLane: &globalLane[K]{s: s}, tenant: tenant}
}

// fairLane is a global lane that gives its semaphore each call's group.
// It is a type of its own, not a globalLane, so that the queue's direct
// call of a global lane's semaphore (laneEntry.bind) does not pass it by.
type fairLane[K comparable] struct {
	*globalLane[K]
	tenant func(K) string
}

// The refusals of NewFairLane.
var (
	errNotFair  = fmt.Errorf("a fair lane's semaphore must be made semaphore.WithFairShare: %w", semaphore.ErrInvalidConfig)
	errNoTenant = fmt.Errorf("a fair lane's tenant function is nil: %w", semaphore.ErrInvalidConfig)
)

func (l *fairLane[K]) group(key K) string { return l.tenant(key) }

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

// groupOf is the fair-share group that a call of key at the place t waits
// in on e, as the hooks report it (Event.Group): on a global lane, t's
// group, else a fair lane's tenant of key; "" on the other kinds. It is
// asked only for a wait that the hooks report, never on a grant at once.
func (e *laneEntry[K]) groupOf(key K, t call.Turn) string {
	if e.kind != Global {
		return ""
	}
	if f, ok := e.lane.(*fairLane[K]); ok && t.Group == "" {
		return f.group(key)
	}
	return t.Group
}
