package keyedsem

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// Layout of entry.state, the word that every lookup, acquire and release of
// a key works on with one compare-and-swap:
//
//	bit  63      dead: the entry is unpublished (pooled, or being removed
//	             from the map); no reference can be raised on it
//	bit  62      busy: the entry is referenced; the bits below are then
//	bit  61        queued: waiters are queued; acquirers change avail only
//	               under the entry's mutex, and releases go through it
//	bit  60        woken (WithBarging only): a waiter is woken to compete
//	               for the free permits; releases leave them to it
//	bit  59        strict (WithBarging only): a waiter has waited the
//	               bound; nobody takes permits ahead of the queue
//	bit  58        fresh: the entry was made for its one reference and
//	               nobody has joined it since (see dropFresh)
//	bits 28..57    refs: holders + waiters + callers between lookup and
//	               acquire (30 bits)
//	bits 0..27     avail: permits free (28 bits)
//	bits 0..61   with busy and dead clear, the entry is idle: no references,
//	             all permits free, no waiters; the bits hold the time it went
//	             idle, in nanoseconds since the semaphore was made
//
// Folding the idle time into the word makes an eviction precise: the
// compare-and-swap that kills an idle entry fails if the entry was used in
// between and went idle again at another time. (With the coarse clock two
// idle stamps may tie; the kill then evicts an entry that was used and is
// idle again, which is only a matter of eviction order: a kill always
// requires zero references.)
const (
	deadBit   = 1 << 63
	busyBit   = 1 << 62
	queuedBit = 1 << 61
	refShift  = 28
	refOne    = 1 << refShift
	refMask   = (1<<30 - 1) << refShift
	kWoken    = 1 << 60
	kStrict   = 1 << 59
	kFresh    = 1 << 58
	availMask = maxPerKeyCapacity // 1<<refShift - 1
	stampMask = 1<<62 - 1
)

func avail(st uint64) int64 { return int64(st & availMask) }

// cacheLine is the size of a cache line on the machines we target (amd64,
// arm64 servers).
const cacheLine = 64

// entry is the semaphore of one key. It holds no token of its own: tokens
// come from a pool for the time a permit is out, so that an idle entry is
// six words with a string key (48 bytes, the size class five took; the
// sixth is WithReorderHold's number), where an x/sync semaphore alone
// takes 80. It has no goroutine, timer or channel. (With idle timeout 0
// and capacity 1 no entry is ever idle, and each is made with a token of
// its own: see pair.)
//
// Entries are recycled through a pool. A goroutine may still hold a pointer
// to an entry after it was removed from the map and reused for another key,
// so: only a holder of a reference may read key; an entry whose reference
// was raised through a stale pointer is recognised by its key (see join);
// and the party that sets the dead bit owns the entry until it puts it back
// in the pool.
type entry[K comparable] struct {
	state atomic.Uint64 // see the layout above
	mu    sync.Mutex    // protects q, and the queued bit's transitions
	q     waitq.Queue   // the waiters: one pointer
	key   K             // written while the entry is dead; read by reference holders and by the owner of a dead entry
	last  int64         // WithReorderHold: the highest Sequence granted, noSeq if none; under mu (see hold.go)
}

// token is a permit's token, pooled per semaphore, for the time a permit
// is out. Its owner is its stripe.
type token[K comparable] struct {
	permit.Token               // first, so that a *permit.Token of ours is a *token (see tokenOf)
	gen          atomic.Uint64 // the generation of Token
	e            *entry[K]     // the entry of the permit out; written by the granter, read by the releaser
}

// pair is an entry with a token of its own, what a semaphore with idle
// timeout 0 and per-key capacity 1 makes instead of a bare entry (see
// Keyed.paired): such an entry is alive only while referenced and has at
// most one permit out, so one token per entry serves every grant on it,
// and a new key takes its entry and its token in one pool round trip.
// The entry comes first, so that a pointer to it is a pointer to the pair.
type pair[K comparable] struct {
	e entry[K]
	t token[K]
}

// pairOf returns the pair whose entry e is; e must be an entry of a paired
// semaphore.
func pairOf[K comparable](e *entry[K]) *pair[K] { return (*pair[K])(unsafe.Pointer(e)) }

// tokenOf returns the token that t is the first field of. t must be a
// token of a semaphore of key type K: its owner is a *stripe[K].
func tokenOf[K comparable](t *permit.Token) *token[K] {
	return (*token[K])(unsafe.Pointer(t))
}

// stripe counts grants and releases without every core updating one word,
// and is the permit.Owner of its tokens: a token counts in its own stripe,
// and tokens live in a sync.Pool, which keeps them near the processor that
// released them.
type stripe[K comparable] struct {
	s        *Keyed[K]
	acquired atomic.Uint64
	released atomic.Uint64
	waited   atomic.Uint64 // of acquired, the grants that waited
	_        [cacheLine - 32]byte
}

// grant returns the permit for n permits taken on e.
func (s *Keyed[K]) grant(e *entry[K], n int64) semaphore.Permit {
	t := s.token(e)
	return semaphore.Permit(permit.Make(&t.Token, t.gen.Load(), n))
}

// token takes a token for a grant on e, and counts the grant: e's own in a
// paired semaphore (its only permit is not out: the grant is taking it),
// otherwise one from the pool.
func (s *Keyed[K]) token(e *entry[K]) *token[K] {
	var t *token[K]
	if s.paired {
		t = &pairOf(e).t // t.e is e for the pair's life
	} else {
		t = s.tokens.Get().(*token[K])
		t.e = e
	}
	if s.tm != nil {
		s.stampOn(&t.Token)
	}
	permit.OwnerOf(&t.Token).(*stripe[K]).acquired.Add(1)
	return t
}

// stampOn stamps the grant being made through t if the hold sampler picks
// it (one grant in hist.SampleEvery through each token, after the
// semaphore's first ones, by the token's generation), and marks it
// untimed otherwise, so that its release records nothing.
func (s *Keyed[K]) stampOn(t *permit.Token) {
	if s.tm.Holds.Timed(&s.hc, uint32(t.Gen())) {
		t.SetSince(s.hc.Stamp())
	} else {
		t.SetUntimed()
	}
}

// ReleaseToken gives back n permits held through t. It is called by
// semaphore.Permit.Release, once per grant; it is not meant to be called directly.
func (st *stripe[K]) ReleaseToken(pt *permit.Token, n int64) {
	t := tokenOf[K](pt)
	e := t.e // copy before the token goes back to the pool
	tm := st.s.tm
	timed := tm != nil && t.Timed()
	var since int64
	if timed {
		since = t.Since()
	}
	st.released.Add(1)
	// The hand-off's first test inline, on the load the release starts
	// from: the uncontended release pays no call and no second load.
	s := st.s
	if es := e.state.Load(); !s.handsOff || es&queuedBit == 0 || !s.handOff(e, t, n) {
		s.putToken(t)
		s.releaseFrom(e, n, es) // a paired token is free again from here: the permit is back
	}
	if timed {
		// After the permit went back, as package semaphore's Observer is
		// told: the recording is not held time.
		tm.Hold.Observe(st.s.hc.Stamp() - since)
	}
}

// putToken gives back a token whose permit is released or was never
// handed out: to the pool, unless it is its entry's own (paired), which
// stays with the entry.
func (s *Keyed[K]) putToken(t *token[K]) {
	if s.paired {
		return
	}
	t.e = nil
	s.tokens.Put(t)
}

// CountDoubleRelease counts a Release of a permit already released. It is
// called by semaphore.Permit.Release; it is not meant to be called directly.
func (st *stripe[K]) CountDoubleRelease(*permit.Token) { st.s.doubleRel.Add(1) }

// idleState returns the state of an entry that has just lost its last
// reference: idle since now, or dead with an idle timeout of 0.
func (s *Keyed[K]) idleState() uint64 {
	if s.idle == 0 {
		return deadBit
	}
	return uint64(s.now())
}

// now returns the time since the semaphore was made, in nanoseconds. With
// the real clock it is read from a coarse clock (an atomic load, right to
// about a millisecond): a system clock read on every idle transition
// would cost about as much as the acquire and release themselves (see
// docs/internals.md). Idle stamps then tie within a millisecond, which
// only blurs the order of eviction among them: an eviction's safety rests
// on the reference count, not on the stamp.
func (s *Keyed[K]) now() int64 {
	var d time.Duration
	if s.realClock {
		d = time.Duration(s.coarse.Read())
	} else {
		d = s.clock.Now().Sub(s.epoch)
	}
	return min(max(int64(d), 0), stampMask)
}

// freshNow is now read from the clock itself, never from the coarse
// clock, for an eviction pass: the coarse reading can be older than its
// resolution (its timer runs late when the process is descheduled or
// stopped), and a pass that judged idleness by it would keep entries idle
// for longer than the timeout. A pass visits every entry: one clock read
// is nothing beside that.
func (s *Keyed[K]) freshNow() int64 {
	if !s.realClock {
		return s.now() // an injected clock is read directly already
	}
	return min(max(int64(time.Since(s.epoch)), 0), stampMask)
}
