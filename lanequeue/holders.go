package lanequeue

import (
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/sessionlane/lanes/internal/stripe"
)

// Holder is one lane held by one ticket, as listed by [Queue.Holders].
type Holder[K comparable] struct {
	Lane    string    // the lane's name
	Kind    Kind      // the lane's kind
	Key     K         // the key the ticket was taken for
	Weight  int64     // the permits the ticket holds in the lane (rate lanes hold nothing and are not listed)
	Since   time.Time // when the ticket was granted (Waiting: when the call began to wait)
	Waiting bool      // held by a call still waiting (for a later lane, or out of a cooldown), not a ticket
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

// stripeHint returns a holder stripe for the calling goroutine (see
// package stripe): one that stays put while the goroutine acquires and
// releases again, until its stack moves. Any stripe is correct.
func stripeHint() uint { return stripe.Hint(holderStripeBits) }

// publish moves g, granted for key, into a record (a free one of the
// caller's stripe, or a new one), which lists it for Holders, and returns
// the ticket: a new handle from the stripe's block. The lock orders the
// writes to the record before any Holders or accessor that reads it.
//
// A call that waited (see waitFor) has its record already, listed as
// waiting: publish fills that one.
func (q *Queue[K]) publish(key K, g *grant[K]) *Ticket[K] {
	since := q.stamp()
	var st *holderStripe[K]
	var r *record[K]
	if r = g.rec; r != nil {
		st = r.home
		st.mu.Lock()
		r.pending, r.cool = false, false
	} else {
		st = &q.holders.stripes[stripeHint()]
		st.mu.Lock()
		r = st.take(q)
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

// take returns a record for a grant: a free one of st, or a new one on
// st's list. The caller holds st.mu.
func (st *holderStripe[K]) take(q *Queue[K]) *record[K] {
	r := st.free
	if r != nil {
		st.free = r.nextFree
		st.nfree--
		return r
	}
	r = &record[K]{q: q, home: st, next: st.all}
	if st.all != nil {
		st.all.prev = r
	}
	st.all = r
	return r
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

// Holders lists the keyed and global lanes held now, one per lane per
// ticket, oldest first, and those a waiting call holds (Waiting); not a
// place's before its Wait, nor direct acquires. It is gathered stripe by
// stripe, not at one instant.
func (q *Queue[K]) Holders() []Holder[K] {
	var out []Holder[K]
	for i := range q.holders.stripes {
		st := &q.holders.stripes[i]
		st.mu.Lock()
		for r := st.all; r != nil; r = r.next {
			hs := r.g.held()
			switch {
			case r.pending && r.cool:
				hs = hs[:r.g.plain] // every lane but the rate lanes
			case r.pending:
				hs = hs[:r.at] // the lanes held so far
			case r.owner == nil:
				continue // free
			}
			since := q.timeOf(r.since)
			for j := range hs {
				h := &hs[j]
				if h.e.kind == Rate {
					continue
				}
				out = append(out, Holder[K]{Lane: h.e.name, Kind: h.e.kind, Key: r.key, Weight: h.n, Since: since, Waiting: r.pending})
			}
		}
		st.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b Holder[K]) int { return a.Since.Compare(b.Since) })
	return out
}
