package lanequeue

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Place is a key's place in the line of a set's first keyed lane, taken by
// [Queue.Join], owned as [semaphore.Place] is. Until Wait holds that lane,
// only the lane's Stats count it. A nil or zero Place is used.
type Place[K comparable] struct {
	q    *Queue[K]
	key  K
	used atomic.Bool
	// The options' Turn, for the lanes Wait takes, in fields of their
	// own: the priority (within ±call.MaxPriority) fits beside used,
	// so that the Place stays in the allocation size class it has without
	// a Turn.
	prio  int32
	kp    semaphore.Place // the place in g.held()[0], the first keyed lane
	g     grant[K]        // the lanes and weights; permits once Wait takes them
	seq   int64
	group string
}

// turn returns the place in line that Join's options gave.
func (p *Place[K]) turn() call.Turn {
	return call.Turn{Priority: int(p.prio), Sequence: p.seq, Group: p.group}
}

// Join takes key's place, where opts put it, in the line of the set's first
// keyed lane (one made by [NewKeyedLane], else an error wrapping
// semaphore.ErrInvalidConfig) without waiting, for
// a webhook that answers at once. Wait takes the other lanes once the turn
// comes. Join fails with AcquireAll's errors that need no wait and the
// keyed lane's refusals (a barging lane keeps no places).
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
		return nil, keyedsem.ErrNaNKey
	}
	h := &pl.g.held()[0] // keyed lanes come first
	if h.e.kind != Keyed {
		return nil, fmt.Errorf("lanequeue: the set %v has no keyed lane to take a place in: %w", lanes.Names(), semaphore.ErrInvalidConfig)
	}
	if h.e.keyed == nil {
		return nil, fmt.Errorf("lanequeue: lane %q is a keyed lane of another package, which has no place to take: %w", h.e.name, semaphore.ErrInvalidConfig)
	}
	if err := q.admit(); err != nil {
		return nil, err
	}
	var kp semaphore.Place
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

// Wait waits for the place's turn, then takes the rest of the set as
// AcquireAll does (failing as it does, or with [semaphore.ErrPlaceUsed]); on failure
// the place is given up. Cancellation: see the package doc; an ended ctx
// also wins over a turn that came before Wait. Wait panics if ctx is nil.
func (p *Place[K]) Wait(ctx context.Context) (*Ticket[K], error) {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	if p == nil || p.q == nil || !p.used.CompareAndSwap(false, true) {
		return nil, semaphore.ErrPlaceUsed
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

// Leave gives the place up, as [semaphore.Place.Leave] does.
func (p *Place[K]) Leave() {
	if p == nil || p.q == nil || !p.used.CompareAndSwap(false, true) {
		return
	}
	p.kp.Leave()
	p.q.leave()
}
