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

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/internal/nan"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// Permit is the handle of permits taken from a key; it is the same type as
// [semaphore.Permit], with the same once-only Release.
type Permit = semaphore.Permit

// Sentinel errors, for errors.Is. ErrClosed, ErrQueueFull,
// ErrInvalidWeight, ErrTooHeavy and ErrInvalidConfig are the values of
// package semaphore, shared by every lanes package (errors.Is(err,
// semaphore.ErrClosed) holds for this package's errors too); ErrTooManyKeys
// and ErrNaNKey are this package's own. Context errors are returned as they
// are.
var (
	// ErrClosed is returned by acquire calls after Close, and to the
	// waiters that Close wakes. It is [semaphore.ErrClosed].
	ErrClosed = semaphore.ErrClosed
	// ErrQueueFull is returned when waiting would exceed
	// WithMaxWaitersPerKey. It is [semaphore.ErrQueueFull].
	ErrQueueFull = semaphore.ErrQueueFull
	// ErrInvalidWeight is returned for a request of zero or fewer permits.
	// It is [semaphore.ErrInvalidWeight].
	ErrInvalidWeight = semaphore.ErrInvalidWeight
	// ErrTooHeavy is returned for a request of more permits than the
	// per-key capacity. It is [semaphore.ErrTooHeavy].
	ErrTooHeavy = semaphore.ErrTooHeavy
	// ErrInvalidConfig is wrapped by the error that reports an option out
	// of range ([Validate] returns it, [New] panics with it). It is
	// [semaphore.ErrInvalidConfig].
	ErrInvalidConfig = semaphore.ErrInvalidConfig
	// ErrTooManyKeys is returned, with WithHardMaxKeys, for a key that has
	// no entry when the cap is reached and no idle entry can be evicted.
	ErrTooManyKeys = errors.New("keyedsem: too many keys")
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

// Keyed is a weighted FIFO semaphore per key: callers of the same
// key share the per-key capacity (1 by default: one at a time, in arrival
// order), and callers of different keys never wait for each other. Entries
// are made on first use and evicted when idle, so memory follows the keys
// in use, not every key ever seen.
//
// It must be created with [New] and must not be copied after first use. All
// methods are safe for concurrent use. The zero Keyed is not
// usable: each of its methods panics with "keyedsem: use New".
type Keyed[K comparable] struct {
	// Read-mostly: configuration, the map and the closed flag.
	m          *xsync.Map[K, *entry[K]]
	capacity   int64
	idle       int64 // idle timeout in nanoseconds; 0: an entry dies with its last reference
	maxKeys    int64
	target     int64 // an eviction pass brings the entries down to this
	step       int64 // the least time between two expiry passes: max(idle/8, 1)
	hard       bool
	maxWaiters int
	order      uint8 // 0 (FIFO), orderPriorities or orderSequence: see turn.go
	aging      int64 // WithPriorities' step in nanoseconds
	nanKeys    bool  // K can hold a value not equal to itself (a NaN)
	barging    bool  // WithBarging (see barging.go)
	clock      semaphore.Clock
	realClock  bool
	coarse     coarse.Clock // the real clock's readings, when realClock
	epoch      time.Time
	tm         *hist.Timings // WithHistograms; nil: off
	hc         hist.Clock    // the clock of the timings and of waiters' stamps
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
	failed     atomic.Uint64
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

	barge bargeState // WithBarging's, see barging.go
}

type config struct {
	capacity   int64
	idle       time.Duration
	maxKeys    int
	hard       bool
	maxWaiters int
	clock      semaphore.Clock
	janitor    time.Duration
	order      uint8         // see turn.go
	aging      time.Duration // WithPriorities' step
	barging    bool          // WithBarging given
	bargeBound time.Duration // its bound
	histograms bool          // WithHistograms
}

// Option configures a keyed semaphore made by [New]. Options are applied in
// order to a configuration, which is then checked, once, by the same code
// that [Validate] runs: a value out of range, or a nil Option, is refused,
// never clamped or ignored.
type Option func(*config)

// WithPerKeyCapacity sets the capacity of every key (default 1: callers of
// one key run one at a time). n must be in [1, MaxPerKeyCapacity].
func WithPerKeyCapacity(n int64) Option { return func(c *config) { c.capacity = n } }

// WithIdleTimeout sets how long an idle entry (no holder, no waiter) is
// kept (default one hour). Keeping entries makes the next use of a key
// cheap (no allocation). Entries idle for the timeout are evicted by
// normal use, with no goroutine or timer: the first release that leaves
// an entry idle, or the first new key, after the oldest idle entry is due
// runs an eviction pass (at most one per eighth of the timeout, so an
// entry goes between d and about 9d/8 after it went idle while the
// semaphore is in use; with the system clock, idle times are stamped from a
// clock read once a millisecond, so "d" is to within that, or within a
// longer stall of the process); the pass runs in that call and takes time in
// proportion to the number of entries, as Sweep does. [WithJanitor] runs
// the passes on a goroutine of its own instead, also while the semaphore
// is not used; [Keyed.Sweep] runs one at once. Idle entries are
// also evicted when there are more than WithMaxKeys. d == 0 drops an entry
// as soon as nobody uses it: the cheapest choice for keys used once
// (sub-agents with unique ids), where keeping entries only means evicting
// them later. d must not be negative.
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithMaxKeys sets the cap on the number of entries (default 4096). It is
// soft: when a new key takes the count over the cap, the oldest idle
// entries are evicted, in a batch that brings the count a quarter under
// the cap (a pass visits every entry, so a large batch keeps the cost per
// new key low); entries in use are never evicted, so they may exceed it,
// and an entry that goes idle while the count is over the cap is evicted
// at once. So only entries in use are ever over the cap, once the calls
// in flight have returned (a new key made while an eviction pass runs is
// trimmed when that pass ends). n must be at least 1.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithHardMaxKeys makes the cap of WithMaxKeys hard: a key without an entry
// when the cap is reached, and no idle entry to evict, fails at once with
// [ErrTooManyKeys]. Use it when keys come from untrusted input.
func WithHardMaxKeys() Option { return func(c *config) { c.hard = true } }

// WithMaxWaitersPerKey bounds the callers that may wait for one key; an
// acquire that would be waiter n+1 fails at once with [ErrQueueFull].
// n == 0 means no bound (the default); n < 0 is refused.
func WithMaxWaitersPerKey(n int) Option { return func(c *config) { c.maxWaiters = n } }

// WithClock replaces the clock that measures idle time (and WithBarging's
// bound); tests pass a fake clock. Only its Now method is used (and, with
// WithBarging, NewTimer, once per waiting call), from many goroutines at
// once and under a key's lock: it must be safe for concurrent use and must
// not block. nil means the system clock.
func WithClock(c semaphore.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithHistograms records the wait-time and hold-time distributions over
// all keys, reported in [Stats].Timings as package semaphore's
// WithHistograms defines them (the same buckets, the same clocks: a hold
// to about a millisecond; a fake clock from WithClock times both). Off by
// default; on, each acquire and release costs a clock read and a few
// atomic adds, and no allocation.
func WithHistograms() Option { return func(c *config) { c.histograms = true } }

// WithJanitor starts, in New, one goroutine that every d (on the system
// clock) runs an expiry pass if one is due, so that idle entries expire
// also while nobody uses the semaphore; Close stops it and waits for it.
// Without it (the default, d == 0) entries expire by normal use (see
// WithIdleTimeout), which bounds the memory of a semaphore in use; the
// janitor gives back that of one left unused. d must not be negative.
func WithJanitor(d time.Duration) Option { return func(cf *config) { cf.janitor = d } }

// Validate reports whether [New] accepts opts: nil, or an error wrapping
// [ErrInvalidConfig] that names the setting and its value (the value New
// would panic with). Package lanequeue calls it so that AddKeyedLane
// returns the error instead of panicking.
func Validate(opts ...Option) error {
	_, err := configure(opts)
	return err
}

// configure applies opts to the default configuration and checks the
// result: the one place where the settings of a keyed semaphore are
// checked.
func configure(opts []Option) (config, error) {
	c := config{capacity: 1, idle: time.Hour, maxKeys: 4096}
	for i, o := range opts {
		if o == nil {
			return c, fmt.Errorf("keyedsem: option %d is nil: %w", i, ErrInvalidConfig)
		}
		o(&c)
	}
	switch {
	case c.capacity < 1 || c.capacity > MaxPerKeyCapacity:
		return c, fmt.Errorf("keyedsem: WithPerKeyCapacity(%d): out of range [1, %d]: %w", c.capacity, MaxPerKeyCapacity, ErrInvalidConfig)
	case c.idle < 0:
		return c, fmt.Errorf("keyedsem: WithIdleTimeout(%v): must not be negative: %w", c.idle, ErrInvalidConfig)
	case c.maxKeys < 1:
		return c, fmt.Errorf("keyedsem: WithMaxKeys(%d): must be at least 1: %w", c.maxKeys, ErrInvalidConfig)
	case c.maxWaiters < 0:
		return c, fmt.Errorf("keyedsem: WithMaxWaitersPerKey(%d): must not be negative: %w", c.maxWaiters, ErrInvalidConfig)
	case c.janitor < 0:
		return c, fmt.Errorf("keyedsem: WithJanitor(%v): must not be negative: %w", c.janitor, ErrInvalidConfig)
	case c.barging && c.bargeBound < 0:
		return c, fmt.Errorf("keyedsem: WithBarging(%v): must not be negative: %w", c.bargeBound, ErrInvalidConfig)
	}
	return c, checkOrder(&c)
}

// New returns a keyed semaphore with no entries. Keys are compared with ==,
// as in a Go map. A key that is not equal to itself (a float NaN, or a
// struct, array or interface holding one) could never find its entry
// again, so acquire calls refuse it with [ErrNaNKey]; the check costs
// nothing for key types that cannot hold a NaN (strings, integers,
// structs of them). An interface key holding a value whose type is not
// comparable panics, as it would as a map key.
//
// New panics, with the error that [Validate] returns (it wraps
// [ErrInvalidConfig]), if an option is out of range.
func New[K comparable](opts ...Option) *Keyed[K] {
	c, err := configure(opts)
	if err != nil {
		panic(err)
	}
	s := &Keyed[K]{
		m:          xsync.NewMap[K, *entry[K]](),
		evict:      make(chan struct{}, 1),
		capacity:   c.capacity,
		idle:       int64(c.idle),
		maxKeys:    int64(c.maxKeys),
		target:     int64(c.maxKeys - max(1, c.maxKeys/4)),
		step:       max(int64(c.idle)/8, 1),
		hard:       c.hard,
		maxWaiters: c.maxWaiters,
		order:      c.order,
		aging:      int64(c.aging),
		nanKeys:    nan.Possible[K](),
		clock:      c.clock,
	}
	if _, ok := c.clock.(clock.Real); ok || c.clock == nil {
		s.clock, s.realClock = clock.Real{}, true
	}
	s.epoch = s.clock.Now()
	if c.barging {
		s.barging, s.barge.bound = true, c.bargeBound
		if s.barge.bound == 0 {
			s.barge.bound = semaphore.DefaultBargingBound
		}
	}
	s.hc = hist.NewClock(s.clock)
	if c.histograms {
		s.tm = new(hist.Timings)
	}
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
func (s *Keyed[K]) janitor(d time.Duration) {
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

// Acquire takes permits for key, one or [semaphore.Weight](n), waiting in
// the key's line until they are free; other keys are not affected. opts
// place the caller in that line: [semaphore.Priority] on a semaphore made
// [WithPriorities], [semaphore.Sequence] on one made [WithSequenceOrder]
// (any other is refused, see [semaphore.AcquireOption]).
//
// On success the caller owns the returned [Permit] and must release it
// once. On failure it gets the zero Permit, nothing is taken, and the
// error is: ctx.Err() (see the package doc, Cancellation); an error
// wrapping [ErrInvalidConfig] for an option refused (counted in Rejected);
// [ErrInvalidWeight] for a weight below 1; [ErrTooHeavy] above the per-key
// capacity; [ErrClosed] after Close, also for a waiter that Close fails;
// [ErrQueueFull] when the key's waiters are at WithMaxWaitersPerKey, or
// the key counts 2^31-1 references (holders, waiters, places, calls in
// flight); [ErrTooManyKeys] when WithHardMaxKeys refuses a new key (which
// first waits for a running eviction pass, unless ctx ends); [ErrNaNKey]
// for a key not equal to itself.
//
// Acquire panics if ctx is nil.
func (s *Keyed[K]) Acquire(ctx context.Context, key K, opts ...semaphore.AcquireOption) (Permit, error) {
	if ctx == nil {
		panic("keyedsem: nil Context")
	}
	if len(opts) == 0 {
		return s.acquire(ctx, key, 1, nil)
	}
	n, t, err := s.callOf(opts)
	if err != nil {
		if err := ended(ctx); err != nil {
			s.cancelled.Add(1)
			return Permit{}, err // an ended context comes before any refusal
		}
		s.rejected.Add(1)
		return Permit{}, err
	}
	if s.order == 0 {
		return s.acquire(ctx, key, n, nil)
	}
	return s.acquire(ctx, key, n, &t)
}

// acquire is Acquire for n permits at turn t (nil: the zero Turn, or a
// FIFO semaphore).
func (s *Keyed[K]) acquire(ctx context.Context, key K, n int64, t *call.Turn) (Permit, error) {
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
		if err == ErrTooManyKeys || err == errTooManyRefs {
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
	return s.wait(ctx, e, n, t)
}

// TryAcquire takes permits for key, one or [semaphore.Weight](n), if they
// are free now and nobody waits for the key, without blocking, and
// reports whether it did; on false nothing changed for the key. It never
// overtakes a waiter. It returns false where Acquire would fail at once,
// and takes no place in line, so only a weight and valid options matter.
// It never waits for a running Sweep, but a new key may run an eviction
// pass itself (see [WithIdleTimeout]). On true the caller owns the permit.
func (s *Keyed[K]) TryAcquire(key K, opts ...semaphore.AcquireOption) (Permit, bool) {
	if len(opts) == 0 {
		return s.tryAcquire(key, 1)
	}
	n, _, err := s.callOf(opts)
	if err != nil {
		s.rejected.Add(1)
		return Permit{}, false
	}
	return s.tryAcquire(key, n)
}

// tryAcquire is TryAcquire for n permits.
func (s *Keyed[K]) tryAcquire(key K, n int64) (Permit, bool) {
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		s.mustBeMade() // a zero Keyed has capacity 0: every try comes here
		return Permit{}, false
	}
	e, took, _ := s.lookup(context.TODO(), key, n, true)
	if !took {
		return Permit{}, false
	}
	return s.grant(e, n), true
}

// Do acquires as Acquire does, runs fn with ctx, and releases when fn
// returns, also if fn panics (the panic then goes on). It returns the
// acquire error without calling fn, or fn's error. Once fn runs the
// permit is held until it returns, whatever happens to ctx or to Close.
func (s *Keyed[K]) Do(ctx context.Context, key K, fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	p, err := s.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

// refuse counts and returns the error for an acquire refused before any
// lookup.
func (s *Keyed[K]) refuse(n int64) error {
	s.mustBeMade() // a zero Keyed has capacity 0: every acquire comes here
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

// mustBeMade panics if s is a zero Keyed, not made by New.
func (s *Keyed[K]) mustBeMade() {
	if s.m == nil {
		panic("keyedsem: use New")
	}
}

// Close stops the semaphore: every waiter is woken with [ErrClosed], and
// later acquire calls fail with ErrClosed (TryAcquire returns false).
// Permits already held stay valid, and their releases still count and,
// with idle timeout 0, still drop their entries; the eviction that normal
// use does stops, and so does the janitor (Sweep still evicts). Close is
// idempotent. An acquire call that overlaps Close and finds its permits
// free without waiting may still succeed (its permit must be released as
// any other); calls begun after Close returns fail.
func (s *Keyed[K]) Close() {
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
		var wake waitq.Chain
		e.mu.Lock()
		waitq.Fail(&e.q, line[K]{s, e}, 0, ErrClosed, &wake) // the failed waiters still hold their references
		e.mu.Unlock()
		wake.Wake()
		return true
	})
}

// Len returns the number of entries alive: keys in use, and idle keys not
// evicted yet.
func (s *Keyed[K]) Len() int {
	s.mustBeMade()
	return int(s.alive.Load())
}

// PerKeyCapacity returns the capacity of every key.
func (s *Keyed[K]) PerKeyCapacity() int64 {
	s.mustBeMade()
	return s.capacity
}
