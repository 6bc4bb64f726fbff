package lanequeue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
// is no reorder hold). Every other lane ignores it. The default is 0;
// given more than once, the last counts.
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
func (e *laneEntry[K]) acquireTurn(ctx context.Context, key K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	if tl, ok := e.lane.(TurnLane[K]); ok {
		return tl.AcquireTurn(ctx, key, n, t)
	}
	return e.acquire(ctx, key, n)
}

// A Turn's fields, as bits.
const (
	fieldPriority = 1 << iota
	fieldSequence
	fieldGroup
)

// turnFields is what an adapter has learnt of the Turn fields its
// semaphore orders by. A semaphore refuses a field it has no policy for
// (an error wrapping ErrInvalidConfig, taking nothing), and the adapter,
// which did not build the semaphore's options itself (they are opaque
// functions, and NewGlobalLane and NewKeyedLane take a semaphore made
// elsewhere), learns it from that refusal: the first call that passes a
// field to a semaphore without its policy is refused once (counted in the
// lane's Rejected), and the adapter retries it without the field and drops
// the field from then on. Learning needs no lock: two first calls may both
// be refused, and both mark the same bit.
type turnFields struct {
	bits atomic.Uint32 // refused fields, and accepted ones shifted by 3
}

// next returns t without the fields known to be refused, and the field
// the call will learn about (0 if none): t's first field not yet known to
// be accepted, with every later such field dropped for this call (policies
// exclude each other, so at most one field can be accepted).
func (f *turnFields) next(t semaphore.Turn) (semaphore.Turn, uint32) {
	b := f.bits.Load()
	refused, accepted := b&7, b>>3
	var probe uint32
	for _, bit := range [...]uint32{fieldPriority, fieldSequence, fieldGroup} {
		if !turnHas(t, bit) || accepted&bit != 0 {
			continue
		}
		if refused&bit != 0 || probe != 0 {
			t = turnWithout(t, bit)
			continue
		}
		probe = bit
	}
	return t, probe
}

// learn notes what the call that probed field probe (0: none) was told,
// and reports whether it was refused for it, so that the caller tries
// again without it.
func (f *turnFields) learn(probe uint32, err error) bool {
	switch {
	case probe == 0:
		return false
	case err == nil:
		f.bits.Or(probe << 3)
		return false
	case errors.Is(err, ErrInvalidConfig):
		f.bits.Or(probe)
		return true
	}
	return false // the context, a closed lane: nothing learnt
}

func turnHas(t semaphore.Turn, bit uint32) bool {
	switch bit {
	case fieldPriority:
		return t.Priority != 0
	case fieldSequence:
		return t.Sequence != 0
	}
	return t.Group != ""
}

func turnWithout(t semaphore.Turn, bit uint32) semaphore.Turn {
	switch bit {
	case fieldPriority:
		t.Priority = 0
	case fieldSequence:
		t.Sequence = 0
	default:
		t.Group = ""
	}
	return t
}

// AcquireTurn takes the keyed semaphore's permits for key at t's place
// among key's waiters (keyedsem.Keyed.AcquireTurn), without the fields
// the semaphore does not order by (see turnFields; Group never: a keyed
// semaphore has no fair share).
func (l *keyedLane[K]) AcquireTurn(ctx context.Context, key K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	t.Group = ""
	for {
		u, probe := l.turns.next(t)
		if u == (semaphore.Turn{}) {
			return l.s.AcquireN(ctx, key, n)
		}
		p, err := l.s.AcquireTurn(ctx, key, n, u)
		if !l.turns.learn(probe, err) {
			return p, err
		}
	}
}

// weightedTurn is semaphore.Weighted's AcquireTurn, asked for through an
// interface: a global lane whose semaphore has no such method (or no policy
// for any field of the Turn) takes plain Acquire.
type weightedTurn interface {
	AcquireTurn(ctx context.Context, n int64, t semaphore.Turn) (semaphore.Permit, error)
}

// AcquireTurn takes the semaphore's permits at t's place among its
// waiters, without the fields the semaphore does not order by (see
// turnFields).
func (l *globalLane[K]) AcquireTurn(ctx context.Context, _ K, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	ws, ok := any(l.s).(weightedTurn)
	for ok {
		u, probe := l.turns.next(t)
		if u == (semaphore.Turn{}) {
			break
		}
		p, err := ws.AcquireTurn(ctx, n, u)
		if !l.turns.learn(probe, err) {
			return p, err
		}
	}
	return l.s.Acquire(ctx, n)
}
