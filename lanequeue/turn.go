package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// errPriority refuses a semaphore.Priority out of range; static, so that a
// TryAcquireAll refused for it allocates nothing.
var errPriority = fmt.Errorf("lanequeue: Priority out of [-1000000, 1000000]: %w", semaphore.ErrInvalidConfig)

// turnOf returns the place in line that opts give, or the error of a
// priority out of range.
func turnOf(opts []semaphore.AcquireOption) (call.Turn, error) {
	c, bad := call.Read(opts)
	if bad != call.BadNone {
		return call.Turn{}, errPriority
	}
	return c.Turn, nil
}

// placeOpts are the options that give a lane of this package the place t,
// leniently: each lane takes the fields it orders by and drops the others
// (see call.Lenient).
func placeOpts(t call.Turn) [4]semaphore.AcquireOption {
	return [4]semaphore.AcquireOption{call.Lenient, semaphore.Priority(t.Priority), semaphore.Sequence(t.Sequence), semaphore.Group(t.Group)}
}

// acquireTurn is e.lane's Acquire at the place t. This package's keyed and
// global lanes take the fields they order by; a lane of another package
// takes t if it is a placedLane, else plain Acquire.
func (e *laneEntry[K]) acquireTurn(ctx context.Context, key K, n int64, t call.Turn) (semaphore.Permit, error) {
	o := placeOpts(t)
	if s := e.keyed; s != nil {
		return s.Acquire(ctx, key, o[0], o[1], o[2], o[3], semaphore.Weight(n))
	}
	if s := e.global; s != nil {
		return s.Acquire(ctx, n, o[:]...)
	}
	if tl, ok := e.lane.(turnLane[K]); ok {
		return tl.acquireTurn(ctx, key, n, t)
	}
	if sl, ok := e.lane.(placedLane[K]); ok && t != (call.Turn{}) {
		return sl.AcquireAt(ctx, key, n, o[:]...)
	}
	return e.acquire(ctx, key, n)
}

// placedLane is a lane of another package that may order its callers by
// their place in line (redislane's Keyed made WithSequenceOrder, by
// number; its Weighted made WithPriorities or WithFairShare, by priority
// and group): a call's semaphore.Sequence, Priority and Group reach it
// through these, leniently (placeOpts), and a lane takes the fields it
// orders by and the call as Acquire and TryAcquire do.
type placedLane[K comparable] interface {
	AcquireAt(ctx context.Context, key K, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, error)
	TryAcquireAt(key K, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, bool)
}

// turnLane is a lane of this package, other than the keyed and global
// ones, that orders by a call's place in line (the fair lane).
type turnLane[K comparable] interface {
	acquireTurn(ctx context.Context, key K, n int64, t call.Turn) (semaphore.Permit, error)
}

// tryAcquireTurn is tryAcquire with t's number given to a keyed lane of
// this package, whose reorder hold (keyedsem.WithReorderHold) decides by
// it, and t to a placedLane; other lanes, and a call at no place, try as
// tryAcquire does.
func (e *laneEntry[K]) tryAcquireTurn(key K, n int64, t call.Turn) (semaphore.Permit, bool) {
	if s := e.keyed; s != nil && t.Sequence != 0 {
		return s.TryAcquire(key, call.Lenient, semaphore.Sequence(t.Sequence), semaphore.Weight(n))
	}
	if sl, ok := e.lane.(placedLane[K]); ok && t != (call.Turn{}) {
		o := placeOpts(t)
		return sl.TryAcquireAt(key, n, o[:]...)
	}
	return e.tryAcquire(key, n)
}
