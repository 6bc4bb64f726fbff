// Package permit holds the permit handle that every lanes package returns.
//
// A [Permit] is a small value: a pointer to a [Token], the token's generation
// at the time of the grant, and the weight. The token is owned by whatever
// granted the permit (a semaphore, a keyed semaphore's entry, a Redis lane)
// and is reused after release, so the generation is what makes Release
// once-only: the first Release moves the token's generation on with a
// compare-and-swap, and every later Release, through any copy of the handle,
// finds a different generation and does nothing. Generations are 64-bit, so
// they do not wrap in the life of a process.
//
// Users do not import this package: semaphore.Permit is a defined type on
// [Permit] (a conversion either way costs nothing), which gives the methods
// their public docs; keyedsem and redislane make their permits through
// Make and convert them.
package permit

import (
	"math"
	"sync/atomic"
)

// Owner is what a [Token] gives its permits back to.
type Owner interface {
	// ReleaseToken takes back the n permits held through t. It is called
	// exactly once per grant, after the token's generation has moved on.
	ReleaseToken(t *Token, n int64)
	// CountDoubleRelease records a Release that found the permit already
	// released. It must not touch t beyond its immutable fields.
	CountDoubleRelease(t *Token)
}

// Token is the reusable part of a permit. Its fields never change after
// Init; the generation it points to moves on by one with each release. The
// generation is kept apart from the token so that an owner can place it
// where its fast path wants it (a semaphore gives each inline token's
// generation a cache line of its own).
type Token struct {
	gen *atomic.Uint64
	// word, when set, is the owner's state word in the layout of
	// WordTokens/WordOwn/WordSlow/WordShift: Release then gives the permits and the
	// token back with one atomic add, without calling the owner, unless
	// the flag's look before the add (handOff) or the add finds the slow
	// flag set (see Waker).
	word  *atomic.Uint64
	owner Owner
	// Slot is the owner's index for the token (for example its bit in a
	// free-token bitmap); -1 when the owner does not index it. 16 bits,
	// so that the flags below and since share the token's first 48 bytes.
	Slot int16
	// observed, set once before the first grant, says that the owner is
	// an Observer. A flag, not a second interface, so that a keyed
	// semaphore's pooled token stays in one cache line.
	observed bool
	// timed, set by the granter for each grant (SetSince, SetUntimed),
	// says that the grant was stamped: on an observed token its first
	// Release tells the Observer (off, the hot path pays one test of two
	// bytes on a line it reads anyway). An owner may time one grant in N
	// (see hist.Sampler).
	timed bool
	// handOff, set by SetWord and SetHandOff, makes Release look at the
	// slow flag before its add, and give the permits and the token to the
	// owner's ReleaseQueued instead while it is set (see Waker). Atomic,
	// because the owner may turn it on or off while permits are out (a
	// semaphore hands off at capacity 1 only); either way is correct.
	handOff atomic.Bool
	// since is when the grant out through the token began, on the
	// observer's clock: written by the granter between claiming the
	// token and handing the permit out, read by the first Release before
	// the token goes back (see Observer).
	since int64
}

// Observer is told of the first Release of each timed grant through a
// token it observes (see Token.Observe and SetSince), with the weight and
// the time the granter stamped on the token: the point where a release
// learns its acquire time, for hold-time histograms. It is called by the
// releasing goroutine after the permits and the token went back (the
// token may be granted again by then, so it is not passed), so that what
// it records is not counted as held time; it must not block.
type Observer interface {
	Released(n int64, since int64)
}

// Observe makes Release tell t's owner, which must be an [Observer], of
// the first release of each grant stamped with SetSince. Like Init, it is
// called once, before the first grant.
func (t *Token) Observe() {
	if _, ok := t.owner.(Observer); !ok {
		panic("permit: an observed token needs an owner that is an Observer")
	}
	t.observed = true
}

// SetSince stamps the start of the grant being made through t, for its
// Observer, which the grant's first Release tells (if t is observed). The
// granter calls it, or SetUntimed, after claiming t and before the permit
// leaves its hands.
func (t *Token) SetSince(since int64) { t.since, t.timed = since, true }

// SetUntimed marks the grant being made through t as one whose release
// the Observer is not told of (a grant left out of a sample). It is called
// where SetSince would be.
func (t *Token) SetUntimed() { t.timed = false }

// Timed reports whether the grant out through t was stamped with
// SetSince; like Since, it is meaningful only to the holder of the grant
// or to the token's owner under the lock that orders its grants.
func (t *Token) Timed() bool { return t.timed }

// Since returns the stamp of the grant out through t; it is meaningful
// only to the holder of the grant, or to the token's owner under the lock
// that orders its grants.
func (t *Token) Since() int64 { return t.since }

// NewToken returns a token owned by o with the given slot and a generation
// of its own.
func NewToken(o Owner, slot int) *Token {
	t := &struct {
		Token
		g atomic.Uint64
	}{}
	t.Init(o, slot, &t.g)
	return &t.Token
}

// Init sets the owner, slot and generation word of a token embedded in a
// larger struct. It must be called before the token is first granted, and
// never again.
func (t *Token) Init(o Owner, slot int, gen *atomic.Uint64) {
	if slot < -1 || slot > math.MaxInt16 {
		panic("permit: a token's slot is -1 or an index up to 32767")
	}
	t.owner = o
	t.Slot = int16(slot)
	t.gen = gen
}

// Layout of a state word that Release can update by itself (see
// Token.SetWord). It is the contract between a token with a word and the
// word's owner, who must keep to it in every other change of the word:
// bits 0..WordTokens-1 are free-token bits (a set bit is a free token, the
// token's Slot is its bit), bit WordOwn is the owner's own (Release never
// reads or changes it), bit WordSlow says that the owner must be told of
// releases (Release then calls its WakeAfterRelease), and the bits from
// WordShift up count the free permits, signed. Release adds the permit's
// permits and its token's bit with one atomic add; so the owner changes the
// word only by compare-and-swap or add, and never lets the count overflow
// into the sign.
const (
	WordTokens = 14
	WordOwn    = 1 << WordTokens
	WordSlow   = 1 << (WordTokens + 1)
	WordShift  = WordTokens + 2
)

// Waker is implemented by owners whose tokens have a state word, so that
// the owner serves its waiters after a release. With hand-off (SetWord's
// handOff), Release loads the word first: if the slow flag is set, it
// calls ReleaseQueued with the token and its permits, which have not gone
// back to the word; the owner, under its lock, either hands them to a
// waiter as its grant or puts them back in the word and serves. Otherwise
// (flag clear, or no hand-off) Release adds them to the word and calls
// WakeAfterRelease if the add found the slow flag set: the permits and the
// token are back in the word by then.
type Waker interface {
	WakeAfterRelease()
	ReleaseQueued(t *Token, n int64)
}

// SetWord makes Release return the token's permits and its Slot bit to w
// directly; handOff makes it look at the slow flag first (see [Waker]).
// The owner must implement Waker, and the token's Slot must be below
// WordTokens. Like Init, it is called before the first grant.
func (t *Token) SetWord(w *atomic.Uint64, handOff bool) {
	if t.Slot < 0 || t.Slot >= WordTokens {
		panic("permit: a token with a state word needs a slot below WordTokens")
	}
	if _, ok := t.owner.(Waker); !ok {
		panic("permit: a token with a state word needs an owner that is a Waker")
	}
	t.word = w
	t.handOff.Store(handOff)
}

// SetHandOff turns the hand-off of a token with a state word on or off
// (see SetWord); it may be called while permits are out.
func (t *Token) SetHandOff(on bool) { t.handOff.Store(on) }

// HandsOff reports whether t's releases look at the slow flag first (see
// SetHandOff).
func (t *Token) HandsOff() bool { return t.handOff.Load() }

// Gen returns the token's current generation. The owner reads it when it
// grants the token, while no permit for it is out.
func (t *Token) Gen() uint64 { return t.gen.Load() }

// OwnerOf returns t's owner. It is a function of this internal package,
// not a method, so that no user can reach an owner through a permit and
// give back permits that are still held.
func OwnerOf(t *Token) Owner { return t.owner }

// Permit is the handle of n permits granted through a token. The zero Permit
// holds nothing; its Release returns false.
//
// A Permit is owned by exactly one party at a time: whoever received it from
// an acquire call, or whoever it was handed to. The owner must call Release
// once; Release on a copy, or a second Release, returns false and frees
// nothing, even after the token has been granted again to somebody else.
type Permit struct {
	t   *Token
	gen uint64
	n   int64
}

// Make returns the permit for the grant of n permits through t at generation
// gen (the value of t.Gen() when the token was claimed).
func Make(t *Token, gen uint64, n int64) Permit {
	return Permit{t: t, gen: gen, n: n}
}

// Release gives the permit back. It returns true the first time it is called
// for a grant and false ever after, whichever copy of the handle it is called
// on; a false return is counted as a double release by the owner (except on
// the zero Permit, which belongs to nobody).
//
// A Release happens before the acquire call that it unblocks returns.
func (p Permit) Release() bool {
	t := p.t
	if t == nil {
		return false
	}
	if !t.gen.CompareAndSwap(p.gen, p.gen+1) {
		t.owner.CountDoubleRelease(t)
		return false
	}
	// A timed grant's stamp is read before the token goes back; the
	// Observer is told after, so that its recording is not held time.
	o, timed := t.owner, t.observed && t.timed
	var since int64
	if timed {
		since = t.since
	}
	if w := t.word; w != nil {
		// A release into a queue goes under the owner's lock anyway: with
		// the slow flag seen before the add, it hands the token to the
		// head there, and neither this add nor the head's claim (a
		// compare-and-swap) is paid. A flag set after this load makes the
		// add below find it, as without hand-off.
		//
		// SetWord checked that Slot is in [0, WordTokens): the mask only
		// spares the shift its checks for negative and oversized counts.
		switch {
		case t.handOff.Load() && w.Load()&WordSlow != 0:
			o.(Waker).ReleaseQueued(t, p.n)
		case w.Add(uint64(p.n)<<WordShift|1<<(uint(t.Slot)&63))&WordSlow != 0:
			o.(Waker).WakeAfterRelease()
		}
	} else {
		o.ReleaseToken(t, p.n)
	}
	if timed {
		o.(Observer).Released(p.n, since)
	}
	return true
}

// Weight returns the number of permits the permit holds (0 for the zero
// Permit). It does not change when the permit is released.
func (p Permit) Weight() int64 { return p.n }

// Valid reports whether p came from a grant (it is not the zero Permit). It
// does not tell whether p has been released.
func (p Permit) Valid() bool { return p.t != nil }

// TokenOf returns the token p was granted through (nil for the zero
// Permit), so that an owner can recognise its own permits. Like OwnerOf it
// is a function, not a method, so that it is out of users' reach.
func TokenOf(p Permit) *Token { return p.t }

// Mark returns a permit that holds nothing and carries m: Release does
// nothing and Valid is false, as for the zero Permit, but the lane that
// made it reads m back with MarkOf (a token lane's admission second), so
// that what a lane needs to know of one grant travels in the handle that
// the caller keeps anyway.
func Mark(m uint64, n int64) Permit { return Permit{gen: m, n: n} }

// MarkOf returns the mark of a permit made by Mark.
func MarkOf(p Permit) uint64 { return p.gen }
