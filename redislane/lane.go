package redislane

import (
	"context"
	"fmt"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// AsLane returns s as a global lane of a [lanequeue.Queue]: it ignores the
// key. Its permits are semaphore.Permit values whose Release runs the Redis
// release; [PermitOf] gives their fencing token and context. The lane is a
// [lanequeue.Leased] one: the work of a ticket holding its permit
// ([lanequeue.Queue.Do]'s fn, a lanehttp handler's request) ends when the
// permit's context does (see [Permit.Context]): its lease lost or run out,
// or the lane closed (so [lanequeue.Queue.Close] ends the work in
// progress: drain the queue first). With [WithQuota], one block lapsing
// ends every permit granted from the instance's blocks, and their work.
// Closing the lane closes s. It panics if s is nil, as lanequeue's own
// constructors do, rather than at the lane's first use.
func AsLane[K comparable](s *Weighted) lanequeue.Lane[K] {
	if s == nil {
		panic("redislane: AsLane of a nil Weighted")
	}
	return &lane[K]{c: s.c, q: s.q, key: func(K) string { return "" }}
}

// AsKeyedLane returns k as a keyed lane of a [lanequeue.Queue], with key
// turning a queue key into the Redis key (for string keys, pass the
// identity, func(s string) string { return s }). Equal queue keys must
// give equal strings, and different ones different strings. It is a
// [lanequeue.Leased] lane, as AsLane's is. Closing the lane closes k. It
// panics if k or key is nil (a nil key is not taken as the identity), as
// lanequeue's own constructors do, rather than at the lane's first use.
func AsKeyedLane[K comparable](k *Keyed, key func(K) string) lanequeue.Lane[K] {
	if k == nil {
		panic("redislane: AsKeyedLane of a nil Keyed")
	}
	if key == nil {
		panic("redislane: AsKeyedLane with a nil key function")
	}
	return &lane[K]{c: k.c, key: key}
}

type lane[K comparable] struct {
	c   *core
	q   *quota // a Weighted's WithQuota, or nil
	key func(K) string
}

// PermitContext makes the lane a lanequeue.Leased one: a queue's work
// ends with the context of a permit of the lane ([Permit.Context]), when
// its lease is lost or runs out.
func (l *lane[K]) PermitContext(p semaphore.Permit) context.Context {
	if rp := PermitOf(p); rp != nil {
		return rp.Context()
	}
	return nil
}

func (l *lane[K]) Kind() lanequeue.Kind {
	if l.c.keyed {
		return lanequeue.Keyed
	}
	return lanequeue.Global
}

func (l *lane[K]) MaxWeight() int64 {
	if l.q != nil {
		return l.q.block
	}
	return l.c.limit()
}

func (l *lane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	if l.q != nil {
		p, err := l.q.acquire(ctx, n)
		if err != nil {
			return semaphore.Permit{}, err
		}
		return p.handle(), nil
	}
	p, err := l.c.acquire(ctx, l.key(key), n)
	if err != nil {
		return semaphore.Permit{}, err
	}
	return p.handle(), nil
}

func (l *lane[K]) TryAcquire(key K, n int64) (semaphore.Permit, bool) {
	if l.q != nil {
		p, ok := l.q.tryAcquire(n)
		if !ok {
			return semaphore.Permit{}, false
		}
		return p.handle(), true
	}
	p, ok := l.c.tryAcquire(l.key(key), n)
	if !ok {
		return semaphore.Permit{}, false
	}
	return p.handle(), true
}

// AcquireAt is Acquire for a call whose options (a queue's, lenient)
// give its place in line: a queue passes a call's semaphore.Sequence,
// Priority and Group so. A Keyed made WithSequenceOrder orders the key's
// callers by the number, a Weighted made WithPriorities or WithFairShare
// the lane's by the priority and the group; a lane drops what it does not
// order by, as the queue's own lanes do.
func (l *lane[K]) AcquireAt(ctx context.Context, key K, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, error) {
	if l.q != nil { // a lane with quota orders by nothing: from the blocks, as Acquire
		return l.Acquire(ctx, key, n)
	}
	pl, err := l.placeOf(n, opts)
	if err != nil {
		return semaphore.Permit{}, err
	}
	p, err := l.c.acquireAt(ctx, l.key(key), n, pl)
	if err != nil {
		return semaphore.Permit{}, err
	}
	return p.handle(), nil
}

// TryAcquireAt is TryAcquire for a call whose options give its place
// in line; see AcquireAt.
func (l *lane[K]) TryAcquireAt(key K, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, bool) {
	if l.q != nil {
		return l.TryAcquire(key, n)
	}
	pl, err := l.placeOf(n, opts)
	if err != nil {
		return semaphore.Permit{}, false
	}
	p, ok := l.c.tryAcquireAt(l.key(key), n, pl)
	if !ok {
		return semaphore.Permit{}, false
	}
	return p.handle(), true
}

// placeOf is the place of a call of the lane: its number on a sequenced
// Keyed (refused beyond what the scripts count exactly), its band and
// group on an ordered Weighted, else none.
func (l *lane[K]) placeOf(n int64, opts []semaphore.AcquireOption) (place, error) {
	if !l.c.keyed {
		return l.c.placeOf(n, opts)
	}
	if l.c.seq == nil {
		return place{}, nil
	}
	c, _ := call.Read(opts)
	if seq := c.Sequence; seq > maxSequence || seq < -maxSequence {
		return place{}, errSeqRange
	}
	return place{num: c.Sequence}, nil
}

func (l *lane[K]) Stats() lanequeue.LaneStats {
	s := l.c.stats()
	return lanequeue.LaneStats{
		Name: s.Name, Kind: l.Kind(), Capacity: s.Capacity, Held: s.Held, Waiters: s.Waiters, Keys: s.Keys,
		Closed: s.Closed, Counters: s.Counters, Timings: s.Timings, HoldsRunOut: s.HoldsRunOut,
		Fleet: true, // the capacity is kept in Redis, the same on every instance
	}
}

func (l *lane[K]) Close() {
	if l.q != nil {
		l.q.close()
		return
	}
	l.c.close()
}

// Cooldown pauses the lane for the fleet, as [Weighted.Cooldown]: a
// Queue's Cooldown of the lane calls it.
func (l *lane[K]) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	return l.c.cooldown(ctx, d)
}

// AsRateLane returns t as a rate lane of a [lanequeue.Queue] (kind Rate):
// a call takes its weight of t (LaneWeight, else 1) as a charge, for the
// fleet's requests per window, or tokens charged at their estimate.
// Nothing is given back on Release; a ticket's Settle settles the charge
// (see the package doc, Tokens). Its errors, a [*LateError] among them,
// are the causes of the queue's LaneErrors. Closing the lane closes t. It
// panics if t is nil, as lanequeue's own constructors do, rather than at
// the lane's first use.
func AsRateLane[K comparable](t *Tokens) lanequeue.Lane[K] {
	if t == nil {
		panic("redislane: AsRateLane of a nil Tokens")
	}
	return rateLane[K]{t: t}
}

type rateLane[K comparable] struct{ t *Tokens }

func (l rateLane[K]) Kind() lanequeue.Kind { return lanequeue.Rate }
func (l rateLane[K]) MaxWeight() int64     { return l.t.limit }

func (l rateLane[K]) Acquire(ctx context.Context, _ K, n int64) (semaphore.Permit, error) {
	c, err := l.t.Acquire(ctx, n)
	if err != nil {
		return semaphore.Permit{}, err
	}
	return c.permit(), nil
}

func (l rateLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	c, ok := l.t.TryAcquire(n)
	if !ok {
		return semaphore.Permit{}, false
	}
	return c.permit(), true
}

// SettlePermit settles the charge of a permit the lane returned, as
// [Charge.Settle] does (bounded by a fifth of the lease): a queue's
// Ticket.Settle calls it, and passes 0 for a call that failed after the
// lane charged it.
func (l rateLane[K]) SettlePermit(p semaphore.Permit, actual int64) error {
	c := chargeOf(p)
	if c == nil {
		return fmt.Errorf("redislane: settle %q: not a permit of this lane: %w", l.t.name, ErrInvalidConfig)
	}
	return c.Settle(context.Background(), actual)
}

// RestampPermit moves the charge of a permit the lane returned to now,
// on the server's clock, if it is still in the window, and returns the
// permit: a queue's rate tail calls it for the charges a call held while
// it waited for another lane, so that the fleet counts the call when it
// is let through, as the provider does. It reports false if the charge
// has left the window (the queue then takes the lane again). It makes one
// call, bounded by a fifth of the lease and by ctx; if that fails, the
// charge stays where it was and it reports true.
func (l rateLane[K]) RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool) {
	c := chargeOf(p)
	if c == nil {
		return p, true
	}
	return p, l.t.restamp(ctx, c)
}

func (l rateLane[K]) Stats() lanequeue.LaneStats {
	s := l.t.Stats()
	return lanequeue.LaneStats{Name: s.Name, Kind: lanequeue.Rate, Capacity: s.Capacity, Waiters: s.Waiters, Closed: s.Closed, Counters: s.Counters,
		Fleet: true}
}

func (l rateLane[K]) Close() { l.t.Close() }

// Cooldown pauses the lane for the fleet, as [Tokens.Cooldown]: a Queue's
// Cooldown of the lane calls it.
func (l rateLane[K]) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	return l.t.Cooldown(ctx, d)
}

var _ lanequeue.Leased = (*lane[string])(nil)
