package keyedsem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/fastctx"
	"github.com/sessionlane/lanes/internal/nan"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// Permit is the handle of permits taken from a key; it is the same type as
// [semaphore.Permit], with the same once-only Release.
type Permit = semaphore.Permit

// Sentinel errors, for errors.Is. Context errors are returned as they are;
// a request of zero or fewer permits fails with [semaphore.ErrInvalidWeight],
// and one above the per-key capacity with [semaphore.ErrTooHeavy].
var (
	// ErrClosed is returned by acquire calls after Close, and to the
	// waiters that Close wakes.
	ErrClosed = errors.New("keyedsem: closed")
	// ErrTooManyKeys is returned, with WithHardMaxKeys, for a key that has
	// no entry when the cap is reached and no idle entry can be evicted.
	ErrTooManyKeys = errors.New("keyedsem: too many keys")
	// ErrQueueFull is returned when waiting would exceed
	// WithMaxWaitersPerKey.
	ErrQueueFull = errors.New("keyedsem: wait queue full")
	// ErrNaNKey is returned for a key that is not equal to itself: a
	// float or complex NaN, or a struct, array or interface value holding
	// one. Such a key could never find its entry again (as in a Go map,
	// where NaN keys cannot be looked up or deleted), so it is refused
	// before anything is made for it.
	ErrNaNKey = errors.New("keyedsem: key is not equal to itself (it holds a NaN)")
)

// MaxPerKeyCapacity is the largest per-key capacity (2^28-1). A key's
// available permits share one 64-bit word with its reference count and
// flags.
const MaxPerKeyCapacity = 1<<28 - 1

// Layout of entry.state, the word that every lookup, acquire and release of
// a key works on with one compare-and-swap:
//
//	bit  63      dead: the entry is unpublished (pooled, or being removed
//	             from the map); no reference can be raised on it
//	bit  62      busy: the entry is referenced; the bits below are then
//	bit  61        queued: waiters are queued; acquirers change avail only
//	               under the entry's mutex, and releases go through it
//	bits 28..60    refs: holders + waiters + callers between lookup and
//	               acquire (33 bits)
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
	refMask   = (1<<33 - 1) << refShift
	availMask = MaxPerKeyCapacity // 1<<refShift - 1
	stampMask = 1<<62 - 1
)

func avail(st uint64) int64 { return int64(st & availMask) }

// cacheLine is the size of a cache line on the machines we target (amd64,
// arm64 servers).
const cacheLine = 64

// entry is the semaphore of one key. It holds no token of its own: tokens
// come from a pool for the time a permit is out, so that an idle entry is
// five words with a string key (40 bytes, a 48-byte size class), where an
// x/sync semaphore alone takes 80. It has no goroutine, timer or channel.
//
// Entries are recycled through a pool. A goroutine may still hold a pointer
// to an entry after it was removed from the map and reused for another key,
// so: only a holder of a reference may read key; an entry whose reference
// was raised through a stale pointer is recognised by its key (see join);
// and the party that sets the dead bit owns the entry until it puts it back
// in the pool.
type entry[K comparable] struct {
	state atomic.Uint64 // see the layout above
	mu    sync.Mutex    // protects head, and the queued bit's transitions
	head  *waiter       // oldest waiter; the list is circular (head.Prev is the newest)
	key   K             // written while the entry is dead; read by reference holders and by the owner of a dead entry
}

// token is a permit's token, pooled per semaphore, for the time a permit
// is out. Its owner is its stripe.
type token[K comparable] struct {
	permit.Token               // first, so that a *permit.Token of ours is a *token (see tokenOf)
	gen          atomic.Uint64 // the generation of Token
	e            *entry[K]     // the entry of the permit out; written by the granter, read by the releaser
}

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
	s        *KeyedSemaphore[K]
	acquired atomic.Uint64
	released atomic.Uint64
	_        [cacheLine - 24]byte
}

// KeyedSemaphore is a weighted FIFO semaphore per key: callers of the same
// key share the per-key capacity (1 by default: one at a time, in arrival
// order), and callers of different keys never wait for each other. Entries
// are made on first use and evicted when idle, so memory follows the keys
// in use, not every key ever seen.
//
// It must be created with [New] and must not be copied after first use. All
// methods are safe for concurrent use. The zero KeyedSemaphore is not
// usable: each of its methods panics with "keyedsem: use New".
type KeyedSemaphore[K comparable] struct {
	// Read-mostly: configuration, the map and the closed flag.
	m          *xsync.Map[K, *entry[K]]
	capacity   int64
	idle       int64 // idle timeout in nanoseconds; 0: an entry dies with its last reference
	maxKeys    int64
	target     int64 // an eviction pass brings the entries down to this
	step       int64 // the least time between two expiry passes: max(idle/8, 1)
	hard       bool
	maxWaiters int
	nanKeys    bool // K can hold a value not equal to itself (a NaN)
	clock      semaphore.Clock
	realClock  bool
	coarse     coarse.Clock // the real clock's readings, when realClock
	epoch      time.Time
	stripes    []stripe[K]
	mask       uint32
	closed     atomic.Bool
	// Read on every idle transition, written rarely. expiry is the time
	// (as now returns it) from which an idle entry may have been idle for
	// the timeout, set by each eviction pass: the next idle transition or
	// new key from then runs an expiry pass. starved says that the last
	// pass that had to make room found nothing idle and no entry has gone
	// idle since (see trimLocked and makeRoom). owed says that a new key
	// took the count over the soft cap while another pass held the
	// eviction lock, which then runs the pass for it (see unlockEvict).
	//
	// due folds what an idle transition must look at into the one word
	// that the release path loads: it is expiry, or 0 while the count may
	// be over the soft cap or starved is set, so that an idle transition
	// takes the slow path (wentIdle) only when there is work (see rearm).
	due     atomic.Int64
	expiry  atomic.Int64
	starved atomic.Bool
	owed    atomic.Bool
	_       [cacheLine]byte

	tokens     sync.Pool // *token[K]
	entries    sync.Pool // *entry[K], dead
	nextStripe atomic.Uint32
	alive      atomic.Int64 // entries in the map (including dead ones not yet removed)
	waiters    atomic.Int64
	created    atomic.Uint64
	evicted    atomic.Uint64
	cancelled  atomic.Uint64
	rejected   atomic.Uint64
	doubleRel  atomic.Uint64

	wcache waitq.Cache // free waiters

	// evict is the eviction lock, a channel with room for one: whoever
	// sent to it runs the one eviction pass at a time, and owns buf. It is
	// a channel, not a sync.Mutex, so that a new key waiting for a running
	// pass can stop waiting when its context ends (see makeRoom).
	evict  chan struct{}
	buf    []candidate[K] // reused by eviction passes
	passes uint64         // eviction passes run, for tests; under the eviction lock

	stopJanitor, janitorDone chan struct{} // nil without WithJanitor

	beforeWait func() // a test's hook, run by an acquire on its way to wait; nil
}

type config struct {
	capacity   int64
	idle       time.Duration
	maxKeys    int
	hard       bool
	maxWaiters int
	clock      semaphore.Clock
	janitor    time.Duration
}

// Option configures a keyed semaphore made by [New].
type Option func(*config)

// WithPerKeyCapacity sets the capacity of every key (default 1: callers of
// one key run one at a time). New panics if n is not in [1,
// MaxPerKeyCapacity].
func WithPerKeyCapacity(n int64) Option { return func(c *config) { c.capacity = n } }

// WithIdleTimeout sets how long an idle entry (no holder, no waiter) is
// kept (default one hour). Keeping entries makes the next use of a key
// cheap (no allocation). Entries idle for the timeout are evicted by
// normal use, with no goroutine or timer: the first release that leaves
// an entry idle, or the first new key, after the oldest idle entry is due
// runs an eviction pass (at most one per eighth of the timeout, so an
// entry goes between d and about 9d/8 after it went idle while the
// semaphore is in use); the pass runs in that call and takes time in
// proportion to the number of entries, as Sweep does. [WithJanitor] runs
// the passes on a goroutine of its own instead, also while the semaphore
// is not used; [KeyedSemaphore.Sweep] runs one at once. Idle entries are
// also evicted when there are more than WithMaxKeys. d == 0 drops an entry
// as soon as nobody uses it: the cheapest choice for keys used once
// (sub-agents with unique ids), where keeping entries only means evicting
// them later. New panics if d is negative.
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithMaxKeys sets the cap on the number of entries (default 4096). It is
// soft: when a new key takes the count over the cap, the oldest idle
// entries are evicted, in a batch that brings the count a quarter under
// the cap (a pass visits every entry, so a large batch keeps the cost per
// new key low); entries in use are never evicted, so they may exceed it,
// and an entry that goes idle while the count is over the cap is evicted
// at once. So only entries in use are ever over the cap, once the calls
// in flight have returned (a new key made while an eviction pass runs is
// trimmed when that pass ends). New panics if n < 1.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithHardMaxKeys makes the cap of WithMaxKeys hard: a key without an entry
// when the cap is reached, and no idle entry to evict, fails at once with
// [ErrTooManyKeys]. Use it when keys come from untrusted input.
func WithHardMaxKeys() Option { return func(c *config) { c.hard = true } }

// WithMaxWaitersPerKey bounds the callers that may wait for one key; an
// acquire that would be waiter n+1 fails at once with [ErrQueueFull].
// n <= 0 means no bound (the default).
func WithMaxWaitersPerKey(n int) Option { return func(c *config) { c.maxWaiters = n } }

// WithClock replaces the clock that measures idle time; tests pass a fake
// clock. Only its Now method is used, from many goroutines at once and
// under a key's lock: it must be safe for concurrent use and must not
// block. nil means the system clock.
func WithClock(c semaphore.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithJanitor starts, in New, one goroutine that every d (on the system
// clock) runs an expiry pass if one is due, so that idle entries expire
// also while nobody uses the semaphore; Close stops it and waits for it.
// Without it (the default, d == 0) entries expire by normal use (see
// WithIdleTimeout), which bounds the memory of a semaphore in use; the
// janitor gives back that of one left unused. New panics if d is
// negative.
func WithJanitor(d time.Duration) Option { return func(cf *config) { cf.janitor = d } }

// New returns a keyed semaphore with no entries. Keys are compared with ==,
// as in a Go map. A key that is not equal to itself (a float NaN, or a
// struct, array or interface holding one) could never find its entry
// again, so acquire calls refuse it with [ErrNaNKey]; the check costs
// nothing for key types that cannot hold a NaN (strings, integers,
// structs of them). An interface key holding a value whose type is not
// comparable panics, as it would as a map key.
func New[K comparable](opts ...Option) *KeyedSemaphore[K] {
	c := config{capacity: 1, idle: time.Hour, maxKeys: 4096}
	for _, o := range opts {
		o(&c)
	}
	if c.capacity < 1 || c.capacity > MaxPerKeyCapacity {
		panic(fmt.Sprintf("keyedsem: per-key capacity %d out of range [1, %d]", c.capacity, MaxPerKeyCapacity))
	}
	if c.idle < 0 {
		panic(fmt.Sprintf("keyedsem: negative idle timeout %v", c.idle))
	}
	if c.maxKeys < 1 {
		panic(fmt.Sprintf("keyedsem: max keys %d < 1", c.maxKeys))
	}
	if c.janitor < 0 {
		panic(fmt.Sprintf("keyedsem: negative janitor interval %v", c.janitor))
	}
	s := &KeyedSemaphore[K]{
		m:          xsync.NewMap[K, *entry[K]](),
		evict:      make(chan struct{}, 1),
		capacity:   c.capacity,
		idle:       int64(c.idle),
		maxKeys:    int64(c.maxKeys),
		target:     int64(c.maxKeys - max(1, c.maxKeys/4)),
		step:       max(int64(c.idle)/8, 1),
		hard:       c.hard,
		maxWaiters: c.maxWaiters,
		nanKeys:    nan.Possible[K](),
		clock:      c.clock,
	}
	if _, ok := c.clock.(clock.Real); ok || c.clock == nil {
		s.clock, s.realClock = clock.Real{}, true
	}
	s.epoch = s.clock.Now()
	s.expiry.Store(int64(c.idle)) // the first entry can expire no earlier
	if c.idle == 0 {
		s.expiry.Store(math.MaxInt64) // entries die with their last reference
	}
	s.due.Store(s.expiry.Load())
	s.coarse.Init(s.epoch)
	n := uint32(1)
	for n < 2*uint32(max(1, runtime.GOMAXPROCS(0))) {
		n <<= 1
	}
	s.stripes, s.mask = make([]stripe[K], n), n-1
	for i := range s.stripes {
		s.stripes[i].s = s
	}
	s.tokens.New = func() any {
		t := new(token[K])
		t.Init(&s.stripes[s.nextStripe.Add(1)&s.mask], -1, &t.gen)
		return t
	}
	s.entries.New = func() any {
		e := new(entry[K])
		e.state.Store(deadBit)
		return e
	}
	if c.janitor > 0 && c.idle > 0 {
		s.stopJanitor, s.janitorDone = make(chan struct{}), make(chan struct{})
		go s.janitor(c.janitor)
	}
	return s
}

// janitor runs an expiry pass every d if one is due, until Close.
func (s *KeyedSemaphore[K]) janitor(d time.Duration) {
	defer close(s.janitorDone)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stopJanitor:
			return
		case <-t.C:
			if s.now() >= s.expiry.Load() {
				s.expire()
			}
		}
	}
}

// Acquire takes one permit for key, waiting in FIFO order behind the
// key's earlier callers. It is AcquireN(ctx, key, 1).
//
// Cancellation: as for [KeyedSemaphore.AcquireN].
func (s *KeyedSemaphore[K]) Acquire(ctx context.Context, key K) (Permit, error) {
	return s.AcquireN(ctx, key, 1)
}

// AcquireN takes n permits for key, waiting in FIFO order until the key
// has them free. Other keys are not affected: no lock shared by keys is
// held while a caller waits.
//
// On success it returns a [Permit] that the caller owns and must release
// once. On failure it returns the zero Permit and an error, and leaves the
// key as it was: ctx.Err() if the context ends first (or had already
// ended: AcquireN then fails at once, even if permits are free);
// [semaphore.ErrInvalidWeight] for n <= 0; [semaphore.ErrTooHeavy] for n
// above the per-key capacity; [ErrClosed] after Close; [ErrQueueFull] when
// the key's waiters are at WithMaxWaitersPerKey; [ErrTooManyKeys] when
// WithHardMaxKeys refuses a new key; [ErrNaNKey] for a key not equal to
// itself (a NaN, or a value holding one), which, as in a Go map, could
// never be found again. A waiter that Close fails returns ErrClosed, also
// if its context ended meanwhile. A new key that
// WithHardMaxKeys finds no room for waits for a running eviction pass
// (Sweep or another caller's) before it is refused or admitted, unless ctx
// ends first.
//
// Cancellation: a caller whose context ends while it waits leaves the
// key's queue at once, and the waiters behind it move up (if it was at the
// head, the next ones are served if they fit). If the permits were granted
// while the cancellation was in flight, or the context has ended by the
// time the waiter wakes with them, AcquireN gives them back (to the
// waiters behind it, as if it had left in time) and returns the context's
// error: a context that ended before the permits came free always wins,
// and the caller owns a permit if and only if the error is nil. This holds
// on the path without waiting too: the context is looked at after the
// key's state is read and before free permits are taken from it. Such a
// grant given back counts only in Stats.Cancelled.
//
// AcquireN panics if ctx is nil.
func (s *KeyedSemaphore[K]) AcquireN(ctx context.Context, key K, n int64) (Permit, error) {
	if ctx == nil {
		panic("keyedsem: nil Context")
	}
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		s.mustBeMade()
		if err := ended(ctx); err != nil {
			s.cancelled.Add(1)
			return Permit{}, err // an ended context comes before any refusal
		}
		return Permit{}, s.refuse(n)
	}
	// The context is looked at by lookup, after it loaded the state that
	// it claims permits from and before the claim: had it looked before
	// the load, a release (and with idle timeout 0 the removal of the
	// entry, and a new one) after the look could give the permit to a
	// context cancelled before the release.
	e, took, err := s.lookup(ctx, key, n, false)
	if err != nil {
		if err == ErrTooManyKeys {
			s.rejected.Add(1)
		} else { // ctx had ended, or ended while waiting for an eviction pass
			s.cancelled.Add(1)
		}
		return Permit{}, err
	}
	if took {
		return s.grant(e, n), nil
	}
	if s.beforeWait != nil {
		s.beforeWait()
	}
	return s.wait(ctx, e, n)
}

// TryAcquire takes one permit for key if it is free now; it is
// TryAcquireN(key, 1).
func (s *KeyedSemaphore[K]) TryAcquire(key K) (Permit, bool) {
	return s.TryAcquireN(key, 1)
}

// TryAcquireN takes n permits for key if they are free now and nobody is
// waiting for the key, without blocking. It reports whether it did; on
// false nothing changed for the key. It never overtakes a waiter. It
// returns false for n <= 0, n above the per-key capacity, after Close, for
// a key not equal to itself (see [ErrNaNKey]), and for a new key that
// WithHardMaxKeys refuses. It never waits for a running Sweep, but a new
// key may itself run an eviction pass (over the cap, soft or hard, or when
// idle entries are due to expire; see [WithIdleTimeout]), whose time grows
// with the number of keys. On true the caller owns the permit, as with
// AcquireN.
func (s *KeyedSemaphore[K]) TryAcquireN(key K, n int64) (Permit, bool) {
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		s.mustBeMade() // a zero KeyedSemaphore has capacity 0: every try comes here
		return Permit{}, false
	}
	e, took, _ := s.lookup(context.TODO(), key, n, true)
	if !took {
		return Permit{}, false
	}
	return s.grant(e, n), true
}

// Do acquires one permit for key, runs fn with ctx, and releases the permit
// when fn returns, also if fn panics (the panic then goes on). It returns
// the acquire error, or fn's error.
//
// Cancellation: if ctx ends while Do waits, Do returns ctx.Err() without
// calling fn (and any other error of Acquire likewise), also if the
// permit came free in the same instant. Once fn runs, the permit is held
// until fn returns, whatever happens to ctx or to Close: work that ignores
// its deadline keeps its key.
func (s *KeyedSemaphore[K]) Do(ctx context.Context, key K, fn func(context.Context) error) error {
	p, err := s.Acquire(ctx, key)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

// refuse counts and returns the error for an acquire refused before any
// lookup.
func (s *KeyedSemaphore[K]) refuse(n int64) error {
	s.mustBeMade() // a zero KeyedSemaphore has capacity 0: every acquire comes here
	s.rejected.Add(1)
	switch {
	case n <= 0:
		return semaphore.ErrInvalidWeight
	case s.closed.Load():
		return ErrClosed
	case n > s.capacity:
		return semaphore.ErrTooHeavy
	default:
		return ErrNaNKey
	}
}

// mustBeMade panics if s is a zero KeyedSemaphore, not made by New.
func (s *KeyedSemaphore[K]) mustBeMade() {
	if s.m == nil {
		panic("keyedsem: use New")
	}
}

// ended returns ctx's error, or nil at once for a context that never ends
// (Background, TODO). An ended context has a non-nil Err: one atomic load
// for the standard contexts, cheaper than a select on Done.
//
// An acquire calls it after each load of the state (or of the map) that a
// claim of permits is made from, and before the claim: with Go's
// sequentially consistent atomics, a load that sees the release that freed
// the permits also lets ctx.Err see a cancellation that came before that
// release, so a context that ended before the permits came free always
// wins.
func ended(ctx context.Context) error {
	if fastctx.NeverDone(ctx) {
		return nil
	}
	return ctx.Err()
}

// errBusy is lookup's answer to a try whose key has no free permits.
var errBusy = errors.New("keyedsem: busy")

// next returns the state after raising a reference on an entry in state st
// (not dead), taking n permits if they are free and nobody waits, and
// whether it took them.
func (s *KeyedSemaphore[K]) next(st uint64, n int64) (uint64, bool) {
	if st&busyBit == 0 {
		return busyBit | refOne | uint64(s.capacity-n), true
	}
	if st&refMask == refMask {
		panic("keyedsem: too many references to one key")
	}
	if st&queuedBit == 0 && avail(st) >= n {
		return st + refOne - uint64(n), true
	}
	return st + refOne, false
}

// lookup finds or makes key's entry and raises a reference on it, in one
// atomic step, taking n permits if they are free and nobody waits. With try
// it takes a reference only together with the permits, and otherwise
// returns errBusy. The error is ErrTooManyKeys if the hard cap refused a
// new entry, or ctx's error if ctx ended while the hard cap waited for an
// eviction pass, or had ended when lookup was about to claim permits (with
// try, ctx is a context that never ends).
func (s *KeyedSemaphore[K]) lookup(ctx context.Context, key K, n int64, try bool) (*entry[K], bool, error) {
	// One hash and one pass over the bucket for the two common cases: the
	// key has a live entry (no lock taken), or it has none (the entry is
	// made under the bucket's lock).
	var made, full bool
	var count int64
	var cerr error
	e, loaded := s.m.LoadOrCompute(key, func() (*entry[K], bool) {
		if cerr = ended(ctx); cerr != nil {
			return nil, true // the map had no entry: it may have just been dropped
		}
		c, ok := s.reserve()
		if !ok {
			full = true
			return nil, true
		}
		made, count = true, c
		return s.publish(key, n), false
	})
	switch {
	case made:
		s.made(count)
		return e, true, nil
	case loaded:
		took, res, err := s.join(ctx, e, key, n, try)
		if res == joinOK {
			return e, took, err
		}
	case cerr != nil:
		return nil, false, cerr
	case full:
		if room, err := s.makeRoom(ctx, try); !room {
			return nil, false, err
		}
	}
	// The entry found was dead or reused, or room was made: look again
	// under the bucket's lock, replacing a dead entry.
	for {
		e, took, err, again := s.compute(ctx, key, n, try)
		if !again {
			return e, took, err
		}
	}
}

// publish makes a live entry for key, from the pool, with one reference
// and n permits taken for the caller. It must be called under key's bucket
// lock, with the map about to hold the entry: from the state's store on, a
// caller holding a stale pointer to the pooled entry may join it, and that
// is right, because it is key's entry.
func (s *KeyedSemaphore[K]) publish(key K, n int64) *entry[K] {
	e := s.entries.Get().(*entry[K])
	e.key = key
	e.state.Store(busyBit | refOne | uint64(s.capacity-n))
	return e
}

// made counts a new entry, which took the count of entries to count, and
// does the eviction work that is owed: if the count is over the soft cap,
// a pass that evicts the oldest idle entries; otherwise an expiry pass if
// one is due.
//
// When the entries over the cap are in use, a pass finds nothing to evict;
// running one for every new key would make a burst of busy keys cost the
// square of its size. So after such a pass none runs until an entry goes
// idle (starved): an entry that goes idle while the count is over the cap
// is evicted at once instead (see wentIdle), so none is missed.
func (s *KeyedSemaphore[K]) made(count int64) {
	s.created.Add(1)
	if s.idle == 0 {
		return // no entry is ever idle
	}
	if !s.hard && count > s.maxKeys {
		if s.due.Load() != 0 {
			s.due.Store(0) // entries going idle now must look at the count
		}
		if !s.starved.Load() {
			s.trim()
		}
		return
	}
	if s.now() >= s.expiry.Load() {
		s.expire()
	}
}

const (
	joinOK = iota
	joinStale
)

// join raises a reference on e, an entry that the map held for key a
// moment ago, taking n permits if it can. It returns joinStale if e is dead
// or no longer key's: the caller then looks again under the map's lock. If
// ctx has ended when join is about to raise the reference, it raises none
// and returns joinOK with ctx's error.
//
// e may have been evicted and reused for another key since the map
// returned it. The compare-and-swap fails on a dead entry; if it succeeds
// on a reused one, the reference keeps the entry (and its key) from
// changing while join compares the key, and is then dropped.
func (s *KeyedSemaphore[K]) join(ctx context.Context, e *entry[K], key K, n int64, try bool) (bool, int, error) {
	for {
		st := e.state.Load()
		if st&deadBit != 0 {
			return false, joinStale, nil
		}
		nst, took := s.next(st, n)
		if try && !took {
			// Busy, or a reused entry of another key that is busy: look
			// again under the bucket's lock, where the map is exact.
			return false, joinStale, nil
		}
		if err := ended(ctx); err != nil {
			return false, joinOK, err // after the load: see ended
		}
		if !e.state.CompareAndSwap(st, nst) {
			continue
		}
		if e.key == key {
			return took, joinOK, nil
		}
		var w int64
		if took {
			w = n
		}
		s.release(e, w)
		return false, joinStale, nil
	}
}

// compute does lookup's work under the map's lock for key: it joins the
// live entry, or makes one (replacing a dead one that its owner has not
// removed yet). A new entry's permits are taken at once. again asks the
// caller to look again, after the hard cap made room. ctx is looked at
// after each load that a claim is made from, before the claim (see ended);
// if it has ended, nothing is taken and its error returned.
func (s *KeyedSemaphore[K]) compute(ctx context.Context, key K, n int64, try bool) (e *entry[K], took bool, err error, again bool) {
	var full, busy, made bool
	var count int64
	var cerr error
	s.m.Compute(key, func(cur *entry[K], loaded bool) (*entry[K], xsync.ComputeOp) {
		if loaded {
			for {
				st := cur.state.Load()
				if cerr = ended(ctx); cerr != nil {
					return cur, xsync.CancelOp // after the load: see ended
				}
				if st&deadBit != 0 {
					// Replace it below; its owner's removal will find it
					// gone, and leave its count to the new entry.
					count = s.alive.Load()
					break
				}
				nst, t := s.next(st, n)
				if try && !t {
					busy = true
					return cur, xsync.CancelOp
				}
				if cur.state.CompareAndSwap(st, nst) {
					e, took = cur, t
					return cur, xsync.CancelOp
				}
			}
		} else if cerr = ended(ctx); cerr != nil {
			return nil, xsync.CancelOp // no entry: it may have just been dropped
		} else if c, ok := s.reserve(); ok {
			count = c
		} else {
			full = true
			return nil, xsync.CancelOp
		}
		ne := s.publish(key, n)
		e, took, made = ne, true, true
		return ne, xsync.UpdateOp
	})
	switch {
	case cerr != nil:
		return nil, false, cerr, false
	case busy:
		return nil, false, errBusy, false
	case full:
		room, err := s.makeRoom(ctx, try)
		return nil, false, err, room
	case made:
		s.made(count)
	}
	return e, took, nil, false
}

// reserve counts a new entry in alive and returns the count with it, or
// reports that the hard cap has no room for it.
func (s *KeyedSemaphore[K]) reserve() (int64, bool) {
	if !s.hard {
		return s.alive.Add(1), true
	}
	for {
		c := s.alive.Load()
		if c >= s.maxKeys {
			return c, false
		}
		if s.alive.CompareAndSwap(c, c+1) {
			return c + 1, true
		}
	}
}

// grant returns the permit for n permits taken on e.
func (s *KeyedSemaphore[K]) grant(e *entry[K], n int64) Permit {
	t := s.token(e)
	return permit.Make(&t.Token, t.gen.Load(), n)
}

// token takes a token from the pool for a grant on e, and counts the grant.
func (s *KeyedSemaphore[K]) token(e *entry[K]) *token[K] {
	t := s.tokens.Get().(*token[K])
	t.e = e
	permit.OwnerOf(&t.Token).(*stripe[K]).acquired.Add(1)
	return t
}

// ReleaseToken gives back n permits held through t. It is called by
// Permit.Release, once per grant; it is not meant to be called directly.
func (st *stripe[K]) ReleaseToken(pt *permit.Token, n int64) {
	t := tokenOf[K](pt)
	e := t.e // copy before the token goes back to the pool
	t.e = nil
	st.released.Add(1)
	st.s.tokens.Put(t)
	st.s.release(e, n)
}

// CountDoubleRelease counts a Release of a permit already released. It is
// called by Permit.Release; it is not meant to be called directly.
func (st *stripe[K]) CountDoubleRelease(*permit.Token) { st.s.doubleRel.Add(1) }

// idleState returns the state of an entry that has just lost its last
// reference: idle since now, or dead with an idle timeout of 0.
func (s *KeyedSemaphore[K]) idleState() uint64 {
	if s.idle == 0 {
		return deadBit
	}
	return uint64(s.now())
}

// now returns the time since the semaphore was made, in nanoseconds. With
// the real clock it is read from a coarse clock (an atomic load, right to
// about a millisecond): a system clock read was more than a third of an
// uncontended acquire and release. Idle stamps then tie within a
// millisecond, which only blurs the order of eviction among them: an
// eviction's safety rests on the reference count, not on the stamp.
func (s *KeyedSemaphore[K]) now() int64 {
	var d time.Duration
	if s.realClock {
		d = time.Duration(s.coarse.Read())
	} else {
		d = s.clock.Now().Sub(s.epoch)
	}
	return min(max(int64(d), 0), stampMask)
}

// release drops a reference on e and gives back n permits with it (n may
// be 0). Without waiters it is one compare-and-swap; with waiters it
// serves them under e.mu. The last reference makes the entry idle, or
// dead (and removed) with an idle timeout of 0.
func (s *KeyedSemaphore[K]) release(e *entry[K], n int64) {
	var idle uint64
	haveIdle := false
	for {
		st := e.state.Load()
		if st&queuedBit != 0 {
			s.releaseQueued(e, n)
			return
		}
		nst := st - refOne + uint64(n)
		if nst&refMask == 0 {
			if avail(nst) != s.capacity {
				panic("keyedsem: internal error: last reference dropped with permits out")
			}
			if !haveIdle {
				idle, haveIdle = s.idleState(), true
			}
			nst = idle
		}
		if e.state.CompareAndSwap(st, nst) {
			// settle, by hand: the idle transition without work to do is
			// the uncontended release's common case, one load and compare.
			if nst&deadBit != 0 {
				s.drop(e)
			} else if nst&busyBit == 0 && int64(nst) >= s.due.Load() {
				s.wentIdle(e, nst)
			}
			return
		}
	}
}

// settle finishes the last release of e's reference, which left e in
// state st: a dead entry is removed, an idle one may owe eviction work.
// It must not be called with e.mu held.
func (s *KeyedSemaphore[K]) settle(e *entry[K], st uint64) {
	if st&deadBit != 0 {
		s.drop(e)
	} else if st&busyBit == 0 && int64(st) >= s.due.Load() {
		s.wentIdle(e, st)
	}
}

// wentIdle runs after e went idle, in state st (its idle time), when the
// time is at or past due, and does the eviction work of the soft cap and
// the idle timeout, so that both hold without Sweep:
//
//   - over the soft cap, an idle entry may not stay: e is evicted at once
//     (the older idle entries were evicted when the count went over);
//   - otherwise it notes that an entry is idle (after a pass that found
//     none, see starved), runs an expiry pass if one is due, and sets due
//     back to expiry if the count is no longer over the cap.
//
// After Close it does nothing: eviction is then left to Sweep.
func (s *KeyedSemaphore[K]) wentIdle(e *entry[K], st uint64) {
	if s.closed.Load() {
		return
	}
	if !s.hard && s.alive.Load() > s.maxKeys {
		s.kill(candidate[K]{e, st}) // fails if e was joined meanwhile
		return
	}
	if s.starved.Load() {
		s.starved.Store(false)
		// A new key may have taken the count over the cap and skipped its
		// pass for starved in between our two looks: run it for that key.
		if !s.hard && s.alive.Load() > s.maxKeys {
			s.trim()
		}
	}
	if int64(st) >= s.expiry.Load() {
		s.expire() // sets due itself, unless another pass runs or after Close
	}
	s.rearm()
}

// rearm sets due back to expiry, unless the count is over the soft cap or
// starved is set. Whoever makes either true stores 0 in due after that;
// rearm looks at both after its store, so that one of the two stores of
// 0 comes last.
func (s *KeyedSemaphore[K]) rearm() {
	v := s.expiry.Load()
	if s.due.Load() == v {
		return
	}
	s.due.Store(v)
	if (!s.hard && s.alive.Load() > s.maxKeys) || s.starved.Load() {
		s.due.Store(0)
	}
}

// releaseQueued is release when waiters are queued: under e.mu, it gives
// the permits back and serves the waiters that now fit, in order, and wakes
// them after unlocking.
func (s *KeyedSemaphore[K]) releaseQueued(e *entry[K], n int64) {
	e.mu.Lock()
	st := s.unrefLocked(e, n)
	var wake *waiter
	if st&(busyBit|deadBit) == busyBit && e.head != nil {
		wake = s.grantLocked(e)
	}
	e.mu.Unlock()
	waitq.WakeAll(wake)
	s.settle(e, st)
}

// unrefLocked drops a reference on e, giving back n permits, and clears
// the queued bit if nobody waits. It must be called with e.mu held. It
// returns the new state; if that is not busy (the entry died or went
// idle), the caller must settle it after unlocking.
func (s *KeyedSemaphore[K]) unrefLocked(e *entry[K], n int64) uint64 {
	var idle uint64
	haveIdle := false
	for {
		st := e.state.Load()
		nst := st - refOne + uint64(n)
		if nst&refMask == 0 {
			// Waiters hold references, so nobody waits.
			if !haveIdle {
				idle, haveIdle = s.idleState(), true
			}
			nst = idle
		} else if e.head == nil {
			nst &^= queuedBit
		}
		if e.state.CompareAndSwap(st, nst) {
			return nst
		}
	}
}

// grantLocked serves the waiters at the head of e's queue, in order, for
// as long as their requests fit, and clears the queued bit when the queue
// is empty. Each waiter's reference becomes its holder's. It returns the
// served waiters, linked through wnext, for the caller to wake after
// unlocking e.mu.
//
// Releases without waiters change the state by compare-and-swap without
// e.mu; once the queued bit is set, acquirers change avail only under
// e.mu, and a release that finds the bit set takes e.mu and comes here, so
// no waiter misses permits given back.
func (s *KeyedSemaphore[K]) grantLocked(e *entry[K]) *waiter {
	var chain waitq.Chain
	for w := e.head; w != nil; w = e.head {
		st := e.state.Load()
		if avail(st) < w.N {
			break
		}
		if !e.state.CompareAndSwap(st, st-uint64(w.N)) {
			continue
		}
		e.unlink(w)
		s.waiters.Add(-1)
		t := s.token(e)
		w.Tok, w.Gen, w.Served = &t.Token, t.gen.Load(), true
		chain.Add(w)
	}
	if e.head == nil {
		clearQueued(e)
	}
	return chain.First()
}

// clearQueued clears e's queued bit. It must be called with e.mu held, by
// a holder of a reference, once the queue is empty.
func clearQueued[K comparable](e *entry[K]) {
	for {
		st := e.state.Load()
		if st&queuedBit == 0 || e.state.CompareAndSwap(st, st&^queuedBit) {
			return
		}
	}
}

// wait queues the caller, who holds a reference on e but no permits, for n
// permits of e.
func (s *KeyedSemaphore[K]) wait(ctx context.Context, e *entry[K], n int64) (Permit, error) {
	e.mu.Lock()
	var err error
	cancelled := false
	for err == nil {
		if s.closed.Load() {
			err = ErrClosed
			break
		}
		st := e.state.Load()
		if e.head == nil && avail(st) >= n {
			// The permits came free since lookup: they may have come free
			// after ctx ended (see ended).
			if err = ended(ctx); err != nil {
				cancelled = true
				break
			}
			if e.state.CompareAndSwap(st, st-uint64(n)) {
				e.mu.Unlock()
				return s.grant(e, n), nil
			}
			continue
		}
		if s.maxWaiters > 0 && e.count(s.maxWaiters) >= s.maxWaiters {
			err = ErrQueueFull
			break
		}
		// Set the queued bit before queueing, so that no lock-free acquire
		// or release can slip past the queue. If the word moved, look
		// again: the permits may have come back.
		if st&queuedBit != 0 || e.state.CompareAndSwap(st, st|queuedBit) {
			break
		}
	}
	if err != nil {
		st := s.unrefLocked(e, 0)
		e.mu.Unlock()
		s.settle(e, st)
		if cancelled {
			s.cancelled.Add(1)
		} else {
			s.rejected.Add(1)
		}
		return Permit{}, err
	}
	w := s.wcache.Get()
	w.N = n
	e.push(w)
	s.waiters.Add(1)
	e.mu.Unlock()

	done := ctx.Done()
	if done == nil {
		<-w.Ready
		return s.outcome(e, w)
	}
	select {
	case <-w.Ready:
	case <-done:
		return Permit{}, s.leave(e, w, ctx.Err())
	}
	// When the grant and the end of ctx are both ready, select picks one
	// at random; the context may have ended strictly before the release
	// that granted w. Look at it once more: if it has ended, the caller
	// does not get the permit, which goes on as a cancelled waiter's would.
	select {
	case <-done:
		return Permit{}, s.giveBack(e, w, ctx.Err())
	default:
	}
	return s.outcome(e, w)
}

// giveBack settles w, served and woken, whose context has ended: a grant
// is taken back as if w had left the queue before it, as package semaphore
// does: the token goes back to the pool without a release (the permit
// never reached the caller), the grant is uncounted, so that it counts in
// neither Acquired nor Released but only in Cancelled, the permits and w's
// reference are given back (serving the waiters behind it), and err is
// returned. A failure (Close) is returned as it is.
func (s *KeyedSemaphore[K]) giveBack(e *entry[K], w *waiter, err error) error {
	if w.Err != nil {
		_, werr := s.outcome(e, w)
		return werr
	}
	t, n := tokenOf[K](w.Tok), w.N
	s.wcache.Put(w)
	permit.OwnerOf(&t.Token).(*stripe[K]).acquired.Add(^uint64(0)) // uncount the grant
	t.e = nil
	s.tokens.Put(t) // at the same generation: no handle of it was ever returned
	s.cancelled.Add(1)
	s.release(e, n)
	return err
}

// outcome reads what the waker decided for w, after w.Ready fired, and
// puts w back in the pool. A failed waiter drops its reference.
func (s *KeyedSemaphore[K]) outcome(e *entry[K], w *waiter) (Permit, error) {
	p, err := s.wcache.Outcome(w)
	if err != nil {
		s.rejected.Add(1)
		s.release(e, 0)
		return Permit{}, err
	}
	return p, nil
}

// leave takes w out of e's queue after its context ended. If w was already
// served it waits for the wake-up, gives back a grant (or takes the
// failure), and returns the error.
func (s *KeyedSemaphore[K]) leave(e *entry[K], w *waiter, err error) error {
	e.mu.Lock()
	if w.Served {
		e.mu.Unlock()
		<-w.Ready // sent just after the waker unlocked
		return s.giveBack(e, w, err)
	}
	wasHead := e.head == w
	e.unlink(w)
	s.waiters.Add(-1)
	var wake *waiter
	if wasHead && e.head != nil {
		wake = s.grantLocked(e)
	}
	st := s.unrefLocked(e, 0)
	e.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	s.settle(e, st)
	s.cancelled.Add(1)
	return err
}

// drop removes e, which the caller has just made dead (so owns), from the
// map if the map still holds it, and puts it back in the pool. The key is
// read from e only now: while e was referenced, another party could have
// killed and reused it the moment the reference was gone.
func (s *KeyedSemaphore[K]) drop(e *entry[K]) {
	removed := false
	s.m.Compute(e.key, func(cur *entry[K], loaded bool) (*entry[K], xsync.ComputeOp) {
		if loaded && cur == e {
			removed = true
			return nil, xsync.DeleteOp
		}
		return cur, xsync.CancelOp
	})
	if removed {
		// Otherwise a new entry replaced e, and took over its count.
		s.alive.Add(-1)
	}
	s.evicted.Add(1)
	var zero K
	e.key = zero
	s.entries.Put(e)
}

// Close stops the semaphore: every waiter is woken with [ErrClosed], and
// later acquire calls fail with ErrClosed (TryAcquire returns false).
// Permits already held stay valid, and their releases still count and,
// with idle timeout 0, still drop their entries; the eviction that normal
// use does stops, and so does the janitor (Sweep still evicts). Close is
// idempotent. An acquire call that overlaps Close and finds its permits
// free without waiting may still succeed (its permit must be released as
// any other); calls begun after Close returns fail.
func (s *KeyedSemaphore[K]) Close() {
	s.mustBeMade()
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	if s.stopJanitor != nil {
		close(s.stopJanitor)
		<-s.janitorDone
	}
	// The coarse clock is not stopped: entries released after Close still
	// go idle at the right time, and its timer stops by itself when idle.
	// A caller that queues on an entry checks closed under the entry's
	// mutex after the map gave it the entry: either it sees closed, or it
	// queued before this pass locks that entry's mutex.
	s.m.Range(func(_ K, e *entry[K]) bool {
		e.mu.Lock()
		var chain waitq.Chain
		for w := e.head; w != nil; w = e.head {
			e.unlink(w)
			s.waiters.Add(-1)
			w.Err, w.Served = ErrClosed, true
			chain.Add(w)
		}
		if chain.First() != nil {
			clearQueued(e) // the failed waiters still hold their references
		}
		e.mu.Unlock()
		waitq.WakeAll(chain.First())
		return true
	})
}

// Len returns the number of entries alive: keys in use, and idle keys not
// evicted yet.
func (s *KeyedSemaphore[K]) Len() int {
	s.mustBeMade()
	return int(s.alive.Load())
}

// PerKeyCapacity returns the capacity of every key.
func (s *KeyedSemaphore[K]) PerKeyCapacity() int64 {
	s.mustBeMade()
	return s.capacity
}

// Stats is a snapshot of a keyed semaphore.
type Stats struct {
	Keys     int   // entries alive (Len)
	Capacity int64 // per-key capacity
	Held     int64 // weight of the permits out, over all keys
	Waiters  int   // callers waiting, over all keys
	Closed   bool

	Acquired       uint64 // grants, with or without waiting; a grant given back because the waiter's context had ended is not counted (see Cancelled)
	Released       uint64 // first releases of granted permits
	Cancelled      uint64 // acquires that ended with a context error, also a waiter granted its permits after its context ended, which gives them back (counted only here, as in package semaphore)
	Rejected       uint64 // acquires refused: invalid weight, too heavy, closed (also waiters woken by Close), queue full, too many keys, NaN key; TryAcquire's false is not counted
	Created        uint64 // entries made
	Evicted        uint64 // entries removed: idle ones evicted, and with idle timeout 0 those dropped at their last release
	DoubleReleases uint64 // Release calls on permits already released
}

// Stats returns a snapshot of the semaphore. Held is summed over the
// entries and the counters are striped, so under concurrent use the fields
// are not read at one instant: a release in flight may be counted as
// released and still held. Once the calls have returned, Acquired -
// Released is the number of permits out, Created - Evicted == Keys, and
// Held is the weight they hold. Stats takes time in proportion to the
// number of entries.
func (s *KeyedSemaphore[K]) Stats() Stats {
	s.mustBeMade()
	st := Stats{Capacity: s.capacity, Closed: s.closed.Load()}
	s.m.RangeRelaxed(func(_ K, e *entry[K]) bool {
		if w := e.state.Load(); w&(busyBit|deadBit) == busyBit {
			st.Held += s.capacity - avail(w)
		}
		return true
	})
	for i := range s.stripes {
		st.Released += s.stripes[i].released.Load()
	}
	for i := range s.stripes {
		st.Acquired += s.stripes[i].acquired.Load()
	}
	st.Keys = s.Len()
	st.Waiters = int(s.waiters.Load())
	st.Cancelled = s.cancelled.Load()
	st.Rejected = s.rejected.Load()
	st.Evicted = s.evicted.Load()
	st.Created = s.created.Load()
	st.DoubleReleases = s.doubleRel.Load()
	return st
}

// waiter is one caller in a queue (see package waitq for the protocol).
type waiter = waitq.Waiter

// push appends w to e's queue. It must be called with e.mu held.
func (e *entry[K]) push(w *waiter) {
	if e.head == nil {
		w.Next, w.Prev = w, w
		e.head = w
		return
	}
	tail := e.head.Prev
	w.Prev, w.Next = tail, e.head
	tail.Next = w
	e.head.Prev = w
}

// unlink takes w out of e's queue. It must be called with e.mu held.
func (e *entry[K]) unlink(w *waiter) {
	if w.Next == w {
		e.head = nil
	} else {
		w.Prev.Next = w.Next
		w.Next.Prev = w.Prev
		if e.head == w {
			e.head = w.Next
		}
	}
	w.Next, w.Prev = nil, nil
}

// count returns the number of e's waiters, counting no further than limit.
// It must be called with e.mu held.
func (e *entry[K]) count(limit int) int {
	if e.head == nil {
		return 0
	}
	c := 1
	for w := e.head.Next; w != e.head && c < limit; w = w.Next {
		c++
	}
	return c
}
