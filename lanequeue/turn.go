package lanequeue

import (
	"context"
	"fmt"

	"github.com/sessionlane/lanes/semaphore"
)

// TurnLane is the optional interface of a [Lane] whose semaphore can order
// its waiters by a [semaphore.Turn]: AcquireAll passes the Turn that
// [WithPriority], [WithSequence] and [WithGroup] build to every lane of the
// call that implements it, and takes the others with plain Acquire. The
// keyed and global lanes of this package implement it; Lane itself, which
// other packages implement (redislane), does not change.
//
// AcquireTurn is Acquire with a place in line, under Acquire's contract
// (ownership, cancellation). It must ignore, not refuse, a field its
// semaphore does not order by: a call names many lanes, and each orders by
// what it was built with.
type TurnLane[K comparable] interface {
	AcquireTurn(ctx context.Context, key K, n int64, t semaphore.Turn) (semaphore.Permit, error)
}

// The kinds of AcquireOption: a weight (the zero kind, so that every
// option of a weight is as it was), or one field of the call's Turn.
const (
	optWeight = iota
	optPriority
	optSequence
	optGroup
)

// WithPriority gives the call priority p on every lane whose semaphore
// orders its waiters by priority: a keyed lane built with
// [keyedsem.WithPriorities] (among the waiters of the call's key), a global
// lane whose semaphore.Weighted was built with semaphore.WithPriorities.
// There, when the call must wait, it goes ahead of waiters of lower
// priority that have not aged past it (see the lane's option for the
// bound). Every other lane ignores it (FIFO lanes, rate lanes, lanes of
// other packages), so a call may name both kinds. The default is 0;
// given more than once, the last counts. p outside
// [-semaphore.MaxPriority, semaphore.MaxPriority] makes the call fail at
// once with an error wrapping [ErrInvalidConfig] (TryAcquireAll returns
// false, Check returns it).
func WithPriority(p int) AcquireOption { return AcquireOption{kind: optPriority, n: int64(p)} }

// WithSequence gives the call sequence seq on every lane whose semaphore
// orders its waiters by sequence: a keyed lane built with
// [keyedsem.WithSequenceOrder], where the callers of one key waiting at
// the same time are served in ascending sequence. Give each message of a
// thread its number (or its timestamp) and take the lanes for it: message
// 2 runs before message 3 even when 3 reached the server first, as long as
// 2 arrives while 3 still waits; a message that arrives after its
// successor started runs after it (see keyedsem.WithSequenceOrder: there
// is no reorder hold). [Queue.Join] takes it too: a webhook that joins
// each message's place with its number has a thread's places served in
// order while they stand in line. Every other lane ignores it. The
// default is 0; given more than once, the last counts.
func WithSequence(seq int64) AcquireOption { return AcquireOption{kind: optSequence, n: seq} }

// WithGroup puts the call in fair-share group g (a tenant) on every lane
// whose semaphore shares its capacity among groups: a global lane whose
// semaphore.Weighted was built with semaphore.WithFairShare. Every other
// lane ignores it (keyed lanes: a key has its own budget already; FIFO
// and rate lanes). The default is ""; given more than once, the last
// counts.
func WithGroup(g string) AcquireOption { return AcquireOption{kind: optGroup, lane: g} }

// errPriority refuses a WithPriority out of range; static, so that a
// TryAcquireAll refused for it allocates nothing.
var errPriority = fmt.Errorf("lanequeue: WithPriority out of [-semaphore.MaxPriority, semaphore.MaxPriority]: %w", ErrInvalidConfig)

// turnOf returns the Turn that opts build, or the error of a priority out
// of range.
func turnOf(opts []AcquireOption) (semaphore.Turn, error) {
	var t semaphore.Turn
	for _, o := range opts {
		switch o.kind {
		case optPriority:
			if o.n > semaphore.MaxPriority || o.n < -semaphore.MaxPriority {
				return semaphore.Turn{}, errPriority
			}
			t.Priority = int(o.n)
		case optSequence:
			t.Sequence = o.n
		case optGroup:
			t.Group = o.lane
		}
	}
	return t, nil
}

// acquireTurn is e.lane's AcquireTurn if it has one, else its Acquire.
// This package's keyed and global lanes are called directly, as acquire
// calls them.
func (e *laneEntry[K]) acquireTurn(ctx context.Context, key K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	if s := e.keyed; s != nil {
		return s.AcquireTurn(ctx, key, n, s.Honoured(t))
	}
	if s := e.global; s != nil {
		return s.AcquireTurn(ctx, n, s.Honoured(t))
	}
	if tl, ok := e.lane.(TurnLane[K]); ok {
		return tl.AcquireTurn(ctx, key, n, t)
	}
	return e.acquire(ctx, key, n)
}

// AcquireTurn takes the keyed semaphore's permits for key at t's place
// among key's waiters (keyedsem.Keyed.AcquireTurn), passing on only the
// fields the semaphore orders by (keyedsem.Keyed.Honoured): a field it
// has no order for is dropped, not sent to be refused, so a call that
// names lanes of several orders counts nothing in this lane's Rejected.
func (l *keyedLane[K]) AcquireTurn(ctx context.Context, key K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	return l.s.AcquireTurn(ctx, key, n, l.s.Honoured(t))
}

// AcquireTurn takes the semaphore's permits at t's place among its
// waiters, passing on only the fields the semaphore orders by
// (semaphore.Weighted.Honoured), as the keyed lane does.
func (l *globalLane[K]) AcquireTurn(ctx context.Context, _ K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	return l.s.AcquireTurn(ctx, n, l.s.Honoured(t))
}
