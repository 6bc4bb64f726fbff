package lanequeue

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// ErrPlaceUsed is returned by [Place.Wait] for a place already waited for
// or given up, and for a nil or zero Place. It is [semaphore.ErrPlaceUsed].
var ErrPlaceUsed = semaphore.ErrPlaceUsed

// Place is a caller's place in the line of a set of lanes for one key,
// taken by [Queue.Join]: it stands in the line of the set's first keyed
// lane (a waiter there, or the lane's permit already), and [Place.Wait]
// later waits for its turn and takes the rest of the set, as AcquireAll
// does, returning the [Ticket]; or [Place.Leave] gives it up.
//
// Ownership: a Place is used once, by its first Wait or Leave; it may be
// handed to another goroutine (a worker), which then owns it. Later
// Waits return [ErrPlaceUsed] and no ticket, later Leaves do nothing. A
// Place neither waited for nor left is a leak, as a ticket never released
// is: once its turn comes it holds its key on the keyed lane, and every
// later caller of the key waits for good. Call Leave on every path that
// does not Wait (a deferred Leave after Wait is harmless).
//
// While it stands in line a place counts in its keyed lane's Stats
// (Waiters), and once its turn has come in the lane's Held, but the
// queue's own lists leave it out until its Wait has the keyed lane:
// [Queue.Waiters] and [Queue.LineLen] do not list it in line (neither
// before Wait nor while Wait waits there), [Queue.Holders] does not list
// the keyed permit of its turn, and the wait for the keyed lane is
// reported to no hook ([Hooks].OnSlowWait). From then on Wait is listed
// and reported as AcquireAll is. Methods are safe for concurrent use. A
// nil or zero Place is used: Wait returns ErrPlaceUsed, Leave does
// nothing.
type Place[K comparable] struct {
	q    *Queue[K]
	key  K
	used atomic.Bool
	// The options' Turn, for the lanes Wait takes, in fields of their
	// own: the priority (within ±semaphore.MaxPriority) fits beside used,
	// so that the Place stays in the allocation size class it has without
	// a Turn.
	prio  int32
	kp    keyedsem.Place[K] // the place in g.held()[0], the first keyed lane
	g     grant[K]          // the lanes and weights; permits once Wait takes them
	seq   int64
	group string
}

// turn returns the place in line that Join's options gave.
func (p *Place[K]) turn() call.Turn {
	return call.Turn{Priority: int(p.prio), Sequence: p.seq, Group: p.group}
}

// Join takes a place for key in the line of the set's first keyed lane
// (in the canonical order), at once, and returns it without waiting, so
// that a webhook can answer at once and a worker wait for the turn later.
// Places of one key are served in the order Join took them, whatever the
// order of their Waits (with a per-key capacity of 1 their tickets are
// granted in that order), or by the keyed lane's own order (below).
//
// The call's options place it as they place AcquireAll's, each lane taking the fields its semaphore
// orders by and ignoring the others. On the keyed lane the place is taken
// at Join where they put it: on a session lane made
// [keyedsem.WithSequenceOrder] a thread's places are served in ascending
// semaphore.Sequence while they stand in line, whatever order their Joins came
// in (so a webhook gives each message its sequence number and messages
// that reach the server out of order are handled in order); on one made
// [keyedsem.WithPriorities] by priority, aging from the Join. The lanes
// Wait takes get them when Wait reaches them: a global lane made
// semaphore.WithPriorities orders the call by its priority from then on,
// a fair lane ([Queue.AddFairLane]) by its group.
//
// Only the first keyed lane is joined. The set's other lanes are taken by
// Wait, in the canonical order, once the place's turn has come, as
// AcquireAll takes them: so a caller that stands in line for its key holds
// no global permit (a webhook that took a global slot per queued message
// would starve every other thread), and places of one key in two keyed
// lanes cannot each hold one lane while waiting for the other.
//
// The first keyed lane must be a lane of this package ([Queue.AddKeyedLane]
// or [NewKeyedLane]): another package's keyed lane (a Redis lane) has no
// place to take, and Join returns an error wrapping [ErrNoSemaphore] that
// names it, rather than taking the lane at Wait, which would lose the
// order Join promises; a set with no keyed lane fails the same way. The
// other lanes may be of any package.
//
// Join fails, taking nothing, with the errors AcquireAll returns at once
// for the set, options and key ([ErrNoLanes], [ErrUnknownLane],
// [ErrInvalidWeight], [ErrTooHeavy], [ErrClosed], [ErrNaNKey]), and with
// the keyed lane's refusals wrapped with its name ([ErrQueueFull],
// [ErrTooManyKeys], ErrClosed for a lane closed on its own, and
// [ErrInvalidConfig] for a lane made keyedsem.WithBarging, which keeps no
// places). The
// re-entry check (see [WithTicket]) is made by Wait, whose context
// carries the tickets. Join allocates the Place (one allocation, with
// room for the lanes of a ticket).
func (q *Queue[K]) Join(key K, lanes LaneSet[K], opts ...semaphore.AcquireOption) (*Place[K], error) {
	pl := &Place[K]{q: q, key: key}
	if err := q.resolve(&pl.g, lanes, opts); err != nil {
		return nil, keyedErr(err, key)
	}
	turn, err := turnOf(opts)
	if err != nil {
		return nil, err
	}
	pl.prio, pl.seq, pl.group = int32(turn.Priority), turn.Sequence, turn.Group
	if q.nanKeys && key != key {
		return nil, ErrNaNKey
	}
	h := &pl.g.held()[0] // keyed lanes come first
	if h.e.kind != Keyed {
		return nil, fmt.Errorf("%w: the set %v has no keyed lane to take a place in", ErrNoSemaphore, lanes)
	}
	if h.e.keyed == nil {
		return nil, fmt.Errorf("%w: lane %q is a keyed lane of another package, which has no place to take", ErrNoSemaphore, h.e.name)
	}
	if err := q.admit(); err != nil {
		return nil, err
	}
	var kp keyedsem.Place[K]
	if s := h.e.keyed; turn == (call.Turn{}) {
		kp, err = s.Join(key, semaphore.Weight(h.n))
	} else {
		o := placeOpts(turn)
		kp, err = s.Join(key, o[0], o[1], o[2], o[3], semaphore.Weight(h.n))
	}
	if err != nil {
		q.leave()
		return nil, q.laneErr(h.e, key, err)
	}
	pl.kp = kp
	return pl, nil
}

// Key returns the key the place was taken for.
func (p *Place[K]) Key() K {
	if p == nil {
		var zero K
		return zero
	}
	return p.key
}

// Wait waits for the place's turn on its keyed lane, then takes the rest
// of the set in the canonical order, as [Queue.AcquireAll] does, and
// returns the [Ticket], which the caller owns and must release once.
//
// On failure it returns a nil ticket and an error, holds nothing, and the
// place is given up (the line moves on): every permit taken is released,
// newest first, the keyed lane's too. The errors are AcquireAll's while
// waiting (ctx.Err(), [ErrClosed], a lane's error wrapped with its name),
// [ErrReentrant] when ctx carries a ticket for the key on one of the
// set's lanes, and [ErrPlaceUsed] for a place already waited for or left.
//
// Cancellation: as for AcquireAll. A context that has ended when Wait is
// called, or that ended before the release that gave the place its turn
// (which may have come before Wait was called), wins: the turn goes on to
// the next in line and Wait returns ctx.Err(). The caller owns a ticket if
// and only if the error is nil.
//
// Wait panics if ctx is nil.
func (p *Place[K]) Wait(ctx context.Context) (*Ticket[K], error) {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	if p == nil || p.q == nil || !p.used.CompareAndSwap(false, true) {
		return nil, ErrPlaceUsed
	}
	q, g := p.q, &p.g
	if err := checkReentry(ctx, q, p.key, g); err != nil {
		p.kp.Leave()
		q.leave()
		return nil, err
	}
	h := &g.held()[0]
	ended := ctx.Err() != nil // then the error is ctx.Err(): nothing was waited on
	perm, err := p.kp.Wait(ctx)
	if err != nil {
		q.leave()
		if ended && !q.closed.Load() {
			return nil, err
		}
		return nil, q.laneErr(h.e, p.key, err)
	}
	h.p = perm
	if err := q.acquireFrom(ctx, p.key, g, 1, p.turn()); err != nil {
		q.leave()
		return nil, err
	}
	return q.publish(p.key, g), nil
}

// Leave gives the place up: it leaves the keyed lane's line (the callers
// behind move up), or, if its turn had come, gives the lane's permit
// back to the next in line. It does nothing for a place already waited
// for or left (a deferred Leave after Wait keeps the ticket), nor for a
// nil or zero Place, and it does not end a Wait in progress (end its
// context instead). It never waits for permits.
func (p *Place[K]) Leave() {
	if p == nil || p.q == nil || !p.used.CompareAndSwap(false, true) {
		return
	}
	p.kp.Leave()
	p.q.leave()
}
