package lanequeue

import (
	"context"
	"fmt"
	"sync/atomic"

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
// While it stands in line a place counts in its keyed lane's Waiters; it
// is not listed by [Queue.Holders], which lists tickets, until Wait has
// returned its ticket. Methods are safe for concurrent use. A nil or zero
// Place is used: Wait returns ErrPlaceUsed, Leave does nothing.
type Place[K comparable] struct {
	q    *Queue[K]
	key  K
	used atomic.Bool
	kp   keyedsem.Place[K] // the place in g.held()[0], the first keyed lane
	g    grant[K]          // the lanes and weights; permits once Wait takes them
}

// Join takes a place for key in the line of the set's first keyed lane
// (in the canonical order), at once, and returns it without waiting, so
// that a webhook can answer at once and a worker wait for the turn later.
// Places of one key are served in the order Join took them, whatever the
// order of their Waits: with a per-key capacity of 1 their tickets are
// granted in that order.
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
func (q *Queue[K]) Join(key K, lanes LaneSet[K], opts ...AcquireOption) (*Place[K], error) {
	pl := &Place[K]{q: q, key: key}
	if err := q.resolve(&pl.g, lanes, opts); err != nil {
		return nil, err
	}
	// A place is taken in arrival order: the lines' ordering options are
	// not carried by a place yet, and a caller that asks for one must
	// hear so rather than find its option ignored.
	if turn, err := turnOf(opts); err != nil {
		return nil, err
	} else if turn != (semaphore.Turn{}) {
		return nil, fmt.Errorf("lanequeue: Join takes no WithPriority, WithSequence or WithGroup (a place is taken in arrival order): %w", ErrInvalidConfig)
	}
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
	kp, err := h.e.keyed.Join(key, h.n)
	if err != nil {
		return nil, q.laneErr(context.Background(), h.e, err)
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
		return nil, err
	}
	h := &g.held()[0]
	perm, err := p.kp.Wait(ctx)
	if err != nil {
		return nil, q.laneErr(ctx, h.e, err)
	}
	h.p = perm
	if err := q.acquireFrom(ctx, p.key, g, 1, semaphore.Turn{}); err != nil {
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
}
