package lanequeue

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sessionlane/lanes/semaphore"
)

// inlineLanes is how many lanes a Ticket holds without a second
// allocation: enough for every flow of the package docs (a session lane, a
// global lane, a reservation lane, a rate lane). A ticket for more lanes
// allocates its list separately.
const inlineLanes = 4

// Ticket is the set of permits that one successful [Queue.AcquireAll]
// holds: one per lane named. [Ticket.Release] gives them all back, once.
//
// A Ticket is owned by whoever received it from AcquireAll, or whoever it
// was handed to: it may be passed to another goroutine (a worker), which
// then releases it. Its methods are safe for concurrent use.
type Ticket[K comparable] struct {
	q      *Queue[K]
	key    K
	weight int64 // the weight of WithWeight
	// since is when every permit was held: nanoseconds since q.epoch on
	// the queue's coarse clock (see coarse.Clock).
	since int64

	state atomic.Uint32 // 0 while held; 1 once Release has begun
	shard uint8         // the stripe of q.holders the ticket is listed in
	n     uint8         // number of lanes in inline (0 when in more)

	// prev and next link the ticket into q.holders.shards[shard] while it
	// is held; they are guarded by that shard's mu.
	prev, next *Ticket[K]

	// What the ticket holds, in canonical order (see held): n lanes in
	// inline, or in *more when there are over inlineLanes. Written by
	// AcquireAll before the ticket is published, read-only afterwards
	// (Release reads the permits).
	more   *[]held[K]
	inline [inlineLanes]held[K]
}

// held returns the ticket's lanes.
func (t *Ticket[K]) held() []held[K] {
	if t.more != nil {
		return *t.more
	}
	return t.inline[:t.n]
}

// held is one lane of a ticket: the lane, the weight taken there, and the
// permit (the zero Permit for a rate lane). 40 bytes on 64-bit platforms.
type held[K comparable] struct {
	e *laneEntry[K]
	n int64
	p semaphore.Permit
}

// Release gives back every permit of the ticket, in the reverse of the
// order they were taken (rate lanes give nothing back). It returns true the
// first time it is called and false ever after, from any goroutine; only
// the first call releases anything.
//
// A Release happens before the AcquireAll calls that it unblocks return.
func (t *Ticket[K]) Release() bool {
	if !t.state.CompareAndSwap(0, 1) {
		return false
	}
	t.q.holders.remove(t)
	hs := t.held()
	for i := len(hs) - 1; i >= 0; i-- {
		hs[i].p.Release()
	}
	return true
}

// Released reports whether Release has been called.
func (t *Ticket[K]) Released() bool { return t.state.Load() != 0 }

// Key returns the key the ticket was acquired for.
func (t *Ticket[K]) Key() K { return t.key }

// Weight returns the weight the ticket was acquired with ([WithWeight];
// 1 by default). A lane given another weight with [WithLaneWeight] holds
// that weight instead; see [Ticket.LaneWeight].
func (t *Ticket[K]) Weight() int64 { return t.weight }

// Lanes returns the names of the ticket's lanes in the canonical order
// they were taken: keyed lanes, then global, then rate.
func (t *Ticket[K]) Lanes() []string {
	hs := t.held()
	out := make([]string, len(hs))
	for i := range hs {
		out[i] = hs[i].e.name
	}
	return out
}

// LaneWeight returns the weight the ticket holds on the named lane, and
// false if the ticket has no such lane.
func (t *Ticket[K]) LaneWeight(lane string) (int64, bool) {
	for _, h := range t.held() {
		if h.e.name == lane {
			return h.n, true
		}
	}
	return 0, false
}

// Since returns when the ticket's last permit was granted, to about a
// millisecond (see [Queue.Holders]).
func (t *Ticket[K]) Since() time.Time { return t.q.clock.Time(t.since) }

// ticketCtx is a context that carries a ticket, for the re-entry check.
// Its Value answers ticketCtxKey[K] with itself; the check then goes on
// from the parent, so that every ticket in a chain of contexts is seen.
type ticketCtx[K comparable] struct {
	context.Context
	t *Ticket[K]
}

type ticketCtxKey[K comparable] struct{}

func (c *ticketCtx[K]) Value(key any) any {
	if _, ok := key.(ticketCtxKey[K]); ok {
		return c
	}
	return c.Context.Value(key)
}

// WithTicket returns a context that carries t, so that an AcquireAll with
// it (or with a context derived from it) for the same key and one of t's
// keyed or global lanes fails at once with [ErrReentrant] while t is held,
// rather than waiting for a permit that its own caller holds. [Queue.Do]
// passes such a context to its function. A nil t returns ctx unchanged.
func WithTicket[K comparable](ctx context.Context, t *Ticket[K]) context.Context {
	if t == nil {
		return ctx
	}
	return &ticketCtx[K]{Context: ctx, t: t}
}

// TicketFrom returns the innermost ticket that ctx carries (see
// [WithTicket]), and false if none.
func TicketFrom[K comparable](ctx context.Context) (*Ticket[K], bool) {
	c, ok := ctx.Value(ticketCtxKey[K]{}).(*ticketCtx[K])
	if !ok {
		return nil, false
	}
	return c.t, true
}

// conflicts reports whether o, a ticket carried by the caller's context,
// holds a lane that t asks for, for the same key: waiting for it would wait
// for the caller itself. Rate lanes hold nothing, so never conflict.
func (t *Ticket[K]) conflicts(o *Ticket[K]) bool {
	if o.q != t.q || o.key != t.key || o.state.Load() != 0 {
		return false
	}
	mine, theirs := t.held(), o.held()
	for i := range mine {
		e := mine[i].e
		if e.kind == Rate {
			continue
		}
		for j := range theirs {
			if theirs[j].e == e {
				return true
			}
		}
	}
	return false
}

// Holder is one lane held by one ticket, as listed by [Queue.Holders].
type Holder[K comparable] struct {
	Lane   string
	Kind   Kind
	Key    K
	Weight int64
	Since  time.Time // when the ticket was granted
}

// holderShards is the number of independently locked lists of live
// tickets. A ticket picks one by a hash of its address, so goroutines that
// acquire at once rarely meet on a lock; 32 keeps that true up to a few
// dozen cores, and costs Holders 32 uncontended lock round trips.
const (
	holderShardBits = 5
	holderShards    = 1 << holderShardBits
)

// holderSet is the set of live tickets of a queue, for Holders.
type holderSet[K comparable] struct {
	shards [holderShards]holderShard[K]
}

type holderShard[K comparable] struct {
	mu   sync.Mutex // protects head and the links of the tickets in the list
	head *Ticket[K]
	// Pad to a 64-byte cache line (on 64-bit platforms), so that shards
	// locked by different cores do not share one.
	_ [64 - 16]byte
}

// add publishes t; the lock orders the writes to t before any Holders
// that lists it.
func (h *holderSet[K]) add(t *Ticket[K]) {
	// Fibonacci hashing of the address: tickets allocated one after the
	// other spread over the stripes.
	t.shard = uint8(uint64(uintptr(unsafe.Pointer(t))) * 0x9E3779B97F4A7C15 >> (64 - holderShardBits))
	s := &h.shards[t.shard]
	s.mu.Lock()
	t.next = s.head
	if s.head != nil {
		s.head.prev = t
	}
	s.head = t
	s.mu.Unlock()
}

func (h *holderSet[K]) remove(t *Ticket[K]) {
	s := &h.shards[t.shard]
	s.mu.Lock()
	if t.prev == nil {
		s.head = t.next
	} else {
		t.prev.next = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
	s.mu.Unlock()
}

// Holders lists the keyed and global lanes held now, one [Holder] per lane
// per ticket, oldest ticket first: the holder that everyone else waits for
// is usually near the top. Rate lanes hold nothing and are not listed.
//
// A ticket is listed from just before AcquireAll returns it until its
// Release begins. The list is gathered one lock stripe at a time, so under
// concurrent use it is not a snapshot of one instant; a ticket granted or
// released meanwhile may or may not be in it. Permits taken directly from
// a lane (not through the queue) are not listed.
//
// Since is read from a coarse clock, to about a millisecond: reading the
// system clock on every AcquireAll would cost as much as a keyed acquire.
//
// Cost: keeping the list costs every AcquireAll and Release one
// uncontended lock round trip on one of 32 stripes, and AcquireAll two
// atomic loads of the coarse clock; Holders itself locks every stripe once.
func (q *Queue[K]) Holders() []Holder[K] {
	var out []Holder[K]
	for i := range q.holders.shards {
		s := &q.holders.shards[i]
		s.mu.Lock()
		for t := s.head; t != nil; t = t.next {
			hs := t.held()
			for j := range hs {
				h := &hs[j]
				if h.e.kind == Rate {
					continue
				}
				out = append(out, Holder[K]{Lane: h.e.name, Kind: h.e.kind, Key: t.key, Weight: h.n, Since: t.Since()})
			}
		}
		s.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b Holder[K]) int { return a.Since.Compare(b.Since) })
	return out
}

