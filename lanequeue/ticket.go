package lanequeue

import (
	"context"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/sessionlane/lanes/semaphore"
)

// inlineLanes is how many lanes a ticket holds without a list of its own:
// enough for every flow of the package docs (a session lane, a global
// lane, a reservation lane, a rate lane). A ticket for more lanes
// allocates its list separately.
const inlineLanes = 4

// Ticket is the set of permits that one successful [Queue.AcquireAll]
// holds: one per lane named. [Ticket.Release] gives them all back, once.
//
// A Ticket is owned by whoever received it from AcquireAll, or whoever it
// was handed to: it may be passed to another goroutine (a worker), which
// then releases it. Its methods are safe for concurrent use.
//
// A *Ticket is a handle of one pointer, never reused, to a record in which
// the queue keeps the key, the lanes and the permits. The queue reuses the
// record for a later ticket once this one is released, while the handle
// stays what it was, so a Release through a released ticket returns false
// and frees nothing, even when its record holds another ticket's permits
// by then. Once released, a ticket answers as the zero Ticket does: it
// holds nothing, Released reports true, Key returns the zero K, Weight 0,
// Lanes nil, LaneWeight 0 and false, and Since the zero Time. Read what
// you need before releasing it.
//
// The zero Ticket holds nothing and counts as released, and so does a nil
// *Ticket (what AcquireAll returns with an error): its methods answer as a
// released ticket's do, so that a deferred Release after a failed call is
// harmless.
type Ticket[K comparable] struct {
	r *record[K]
}

// record is the reusable part of a ticket: its key, lanes and permits. A
// record belongs for good to one stripe of one queue (its home), and is on
// the home's list of records, which Holders walks, for as long as the
// home keeps it. Released, it goes on the home's free list for the next
// grant, or, if the home keeps maxFree free records already, off the list
// to the garbage collector. Taking a free record and giving it back thus
// moves one pointer each way, and links nothing.
//
// owner is the record's side of the handle: the ticket that holds the
// record, or nil while it is free. Release sets it from the ticket to nil
// under the home's lock, so that exactly one Release wins and every other
// handle (a stale ticket of an earlier grant, a zero Ticket) finds another
// owner. Handles are never reused (see handleBlockBytes), and a stale
// handle cannot be freed and reallocated while someone can still call its
// Release, so no later grant can have a stale handle's address.
type record[K comparable] struct {
	home *holderStripe[K] // immutable

	// Guarded by home.mu. publish writes them; Release takes the permits
	// out; Holders and the ticket's accessors read them after checking
	// owner.
	owner    *Ticket[K]
	nextFree *record[K] // the free list, while owner is nil
	key      K
	// since is when every permit was held: nanoseconds since the queue's
	// epoch on its coarse clock (see coarse.Clock).
	since int64
	g     grant[K]
	// The home's list of records, guarded by home.mu.
	prev, next *record[K]

	q *Queue[K] // immutable
}

// grant is the lanes of one request in canonical order, the weight to take
// on each and the permits taken so far. AcquireAll and TryAcquireAll build
// it on their stack, so that a call that fails allocates nothing; publish
// copies it into a record once every permit is held.
type grant[K comparable] struct {
	weight int64 // the weight of WithWeight
	// n is the number of lanes in inline (0 when they are in more): at
	// most inlineLanes, so a byte holds it.
	n uint8
	// plain is the number of lanes before the first rate lane. A call may
	// name any number of lanes, so it is an int: as a uint8 it wrapped at
	// 256 and the lanes past it were taken as rate lanes (their permits
	// dropped, never released).
	plain  int
	more   []held[K] // the lanes, when there are over inlineLanes
	inline [inlineLanes]held[K]
}

// held returns the grant's lanes.
func (g *grant[K]) held() []held[K] {
	if g.more != nil {
		return g.more
	}
	return g.inline[:g.n]
}

// held is one lane of a ticket: the lane, the weight taken there, and the
// permit (the zero Permit for a rate lane).
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
	if t == nil {
		return false
	}
	r := t.r
	if r == nil {
		return false
	}
	st := r.home
	st.mu.Lock()
	if r.owner != t {
		st.mu.Unlock()
		return false
	}
	// Take the permits out and free r for the next ticket; the permits go
	// back outside the stripe's lock, since a release may wake a waiter.
	// ps is a local, so that filling it costs no write barrier while the
	// GC runs; a ticket of over inlineLanes lanes hands its list over.
	// From here on Holders no longer lists the ticket.
	var ps [inlineLanes]semaphore.Permit
	n := r.g.n
	for i := range n {
		ps[i] = r.g.inline[i].p
	}
	more := r.g.more
	st.retire(r)
	st.mu.Unlock()
	for i := int(n) - 1; i >= 0; i-- {
		ps[i].Release()
	}
	for i := len(more) - 1; i >= 0; i-- {
		more[i].p.Release()
	}
	return true
}

// Released reports whether Release has been called.
func (t *Ticket[K]) Released() bool {
	r := t.lock()
	if r == nil {
		return true
	}
	r.home.mu.Unlock()
	return false
}

// Key returns the key the ticket was acquired for, or the zero K once it
// is released.
func (t *Ticket[K]) Key() K {
	r := t.lock()
	if r == nil {
		var zero K
		return zero
	}
	defer r.home.mu.Unlock()
	return r.key
}

// lock locks the stripe of t's record and returns the record if t still
// holds it; otherwise it returns nil with nothing locked. The caller
// unlocks r.home.mu.
func (t *Ticket[K]) lock() *record[K] {
	if t == nil {
		return nil
	}
	r := t.r
	if r == nil {
		return nil
	}
	r.home.mu.Lock()
	if r.owner != t {
		r.home.mu.Unlock()
		return nil
	}
	return r
}

// Weight returns the weight the ticket was acquired with ([WithWeight];
// 1 by default), or 0 once it is released. A lane given another weight
// with [WithLaneWeight] holds that weight instead; see [Ticket.LaneWeight].
func (t *Ticket[K]) Weight() int64 {
	r := t.lock()
	if r == nil {
		return 0
	}
	defer r.home.mu.Unlock()
	return r.g.weight
}

// Lanes returns the names of the ticket's lanes in the canonical order
// they were taken: keyed lanes, then global, then rate. It returns nil
// once the ticket is released.
func (t *Ticket[K]) Lanes() []string {
	r := t.lock()
	if r == nil {
		return nil
	}
	defer r.home.mu.Unlock()
	hs := r.g.held()
	out := make([]string, len(hs))
	for i := range hs {
		out[i] = hs[i].e.name
	}
	return out
}

// LaneWeight returns the weight the ticket holds on the named lane, and
// false if the ticket has no such lane or is released.
func (t *Ticket[K]) LaneWeight(lane string) (int64, bool) {
	r := t.lock()
	if r == nil {
		return 0, false
	}
	defer r.home.mu.Unlock()
	for _, h := range r.g.held() {
		if h.e.name == lane {
			return h.n, true
		}
	}
	return 0, false
}

// Since returns when the ticket's last permit was granted, to about a
// millisecond (see [Queue.Holders]), or the zero Time once the ticket is
// released.
func (t *Ticket[K]) Since() time.Time {
	r := t.lock()
	if r == nil {
		return time.Time{}
	}
	defer r.home.mu.Unlock()
	return r.q.clock.Time(r.since)
}

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
// holds for key a lane of q that g asks for: waiting for it would wait for
// the caller itself. Rate lanes hold nothing, so never conflict.
func (g *grant[K]) conflicts(q *Queue[K], key K, o *Ticket[K]) bool {
	if o.r == nil || o.r.q != q {
		return false
	}
	r := o.lock()
	if r == nil {
		return false // released
	}
	defer r.home.mu.Unlock()
	if r.key != key {
		return false
	}
	mine, theirs := g.held(), r.g.held()
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

// holderStripes is the number of independently locked lists of live
// tickets. A goroutine picks one by a hash of the address of its stack (see
// stripeHint), so goroutines that acquire at once rarely meet on a lock; 32
// keeps that true up to a few dozen cores, and costs Holders 32
// uncontended lock round trips.
const (
	holderStripeBits = 5
	holderStripes    = 1 << holderStripeBits
)

// maxFree is how many free records a stripe keeps for reuse: more than the
// tickets that the goroutines hashed to one stripe usually hold at once
// (one or two each). Records beyond it are unlinked and left to the
// garbage collector, so a burst of tickets leaves at most
// holderStripes*maxFree records behind, and Holders walks at most that
// many free records.
const maxFree = 8

// holderSet is the set of records of a queue, for Holders and for reuse.
type holderSet[K comparable] struct {
	stripes [holderStripes]holderStripe[K]
}

type holderStripe[K comparable] struct {
	mu    sync.Mutex // protects all, free, nfree, handles, nhandles and the guarded fields of the records
	all   *record[K] // every record of the stripe, held or free, linked by prev and next
	free  *record[K] // the free records, linked by nextFree
	nfree int
	// handles is the block that publish carves handles from (see
	// handleBlockBytes); the first nhandles are taken. An index rather
	// than a shrinking slice, whose every store would pass a write barrier
	// while the GC runs.
	handles  []Ticket[K]
	nhandles int
	// The fields fill a 64-byte cache line on 64-bit platforms (pinned by
	// TestTicketLayout), so that stripes locked by different cores do not
	// share one.
}

// handleBlockBytes is the size of the blocks that publish carves tickets'
// handles from, one 8-byte handle per grant, never reused: one allocation
// serves 64 grants, where an allocation per grant cost as much as a keyed
// acquire, and the bytes allocated, which set how often the GC runs, are
// 8 per grant. A block is garbage once none of its handles is referenced,
// so a ticket kept for long keeps at most this much memory alive besides
// its own record; blocks stay small for that reason. 512 bytes is the
// largest block the runtime allocates without a header.
const handleBlockBytes = 512

// newHandleBlock returns a block of handles of handleBlockBytes.
func newHandleBlock[K comparable]() []Ticket[K] {
	return make([]Ticket[K], handleBlockBytes/unsafe.Sizeof(Ticket[K]{}))
}

// stripeHint returns a stripe for the calling goroutine: a hash of an
// address in its stack, which differs between goroutines and stays put
// while one goroutine acquires and releases again (until its stack moves).
// It is only a hint: any stripe is correct.
func stripeHint() uint {
	var b byte
	sp := uint64(uintptr(unsafe.Pointer(&b)))
	// Stacks are at least 2 KiB apart; Fibonacci hashing spreads them.
	return uint(((sp >> 11) * 0x9E3779B97F4A7C15) >> (64 - holderStripeBits))
}

// publish moves g, granted for key, into a record (a free one of the
// caller's stripe, or a new one), which lists it for Holders, and returns
// the ticket: a new handle from the stripe's block. The lock orders the
// writes to the record before any Holders or accessor that reads it.
func (q *Queue[K]) publish(key K, g *grant[K]) *Ticket[K] {
	since := q.clock.Read()
	st := &q.holders.stripes[stripeHint()]
	st.mu.Lock()
	r := st.free
	if r != nil {
		st.free = r.nextFree
		st.nfree--
	} else {
		r = &record[K]{q: q, home: st, next: st.all}
		if st.all != nil {
			st.all.prev = r
		}
		st.all = r
	}
	r.key, r.since = key, since
	r.g.weight, r.g.n, r.g.plain = g.weight, g.n, g.plain
	if g.more != nil {
		r.g.more = g.more
	}
	for i := range g.n {
		r.g.inline[i] = g.inline[i]
	}
	if st.nhandles == len(st.handles) {
		st.handles, st.nhandles = newHandleBlock[K](), 0
	}
	t := &st.handles[st.nhandles]
	st.nhandles++
	t.r = r
	r.owner = t
	st.mu.Unlock()
	return t
}

// retire frees r, whose ticket is being released: r goes on the free list,
// or, if the stripe has enough free records, out of the stripe. The caller
// holds st.mu and has taken r's permits out. The record keeps its key and
// lanes until its next grant overwrites them: at most maxFree records per
// stripe, and clearing them would cost write barriers while the GC runs.
func (st *holderStripe[K]) retire(r *record[K]) {
	r.owner = nil
	if r.g.more != nil {
		r.g.more = nil
	}
	if st.nfree < maxFree {
		r.nextFree, st.free = st.free, r
		st.nfree++
		return
	}
	if r.prev == nil {
		st.all = r.next
	} else {
		r.prev.next = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
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
// uncontended lock round trip on one of 32 stripes (the one that also
// recycles the ticket's record), and AcquireAll a read of the coarse
// clock; Holders itself locks every stripe once.
func (q *Queue[K]) Holders() []Holder[K] {
	var out []Holder[K]
	for i := range q.holders.stripes {
		st := &q.holders.stripes[i]
		st.mu.Lock()
		for r := st.all; r != nil; r = r.next {
			if r.owner == nil {
				continue // free
			}
			hs := r.g.held()
			since := q.clock.Time(r.since)
			for j := range hs {
				h := &hs[j]
				if h.e.kind == Rate {
					continue
				}
				out = append(out, Holder[K]{Lane: h.e.name, Kind: h.e.kind, Key: r.key, Weight: h.n, Since: since})
			}
		}
		st.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b Holder[K]) int { return a.Since.Compare(b.Since) })
	return out
}
