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

// Sentinel errors, for errors.Is: this package's two. Its calls return
// package semaphore's too, defined there once: [semaphore.ErrClosed],
// [semaphore.ErrQueueFull] (at WithMaxWaitersPerKey, or 2^30-1 references
// to the key), [semaphore.ErrInvalidWeight], [semaphore.ErrTooHeavy] (a
// request above the per-key capacity), [semaphore.ErrInvalidConfig] and
// [semaphore.ErrPlaceUsed].
var (
	// ErrTooManyKeys: WithHardMaxKeys found no room for a new key.
	ErrTooManyKeys = errors.New("keyedsem: too many keys")
	// ErrNaNKey: the key is not equal to itself.
	ErrNaNKey = errors.New("keyedsem: key is not equal to itself (it holds a NaN)")
)

// maxPerKeyCapacity, 2^28-1, is the largest per-key capacity: a key's count
// shares a 64-bit word with its references and flags.
const maxPerKeyCapacity = 1<<28 - 1

// Keyed is a semaphore per key, made by [New]; see the package doc.
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
	order      uint8  // 0 (FIFO), orderPriorities or orderSequence: see turn.go
	aging      int64  // WithPriorities' step in nanoseconds
	hold       int64  // WithReorderHold's bound in nanoseconds; 0: no hold (see hold.go)
	nanKeys    bool   // K can hold a value not equal to itself (a NaN)
	barging    bool   // WithBarging (see barging.go)
	paired     bool   // idle timeout 0 and capacity 1: entries are made with a token of their own (see pair)
	fresh      uint64 // kFresh if a key used once may be dropped as it goes idle (see dropFresh), else 0
	handsOff   bool   // a release into a queue hands its token to the head (see handOff)
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
	entries    sync.Pool // *entry[K], dead (the entry of a *pair[K] if paired)
	nextStripe atomic.Uint32
	alive      atomic.Int64 // entries in the map (including dead ones not yet removed)
	waiters    atomic.Int64
	created    atomic.Uint64
	evicted    atomic.Uint64
	cancelled  atomic.Uint64
	rejected   atomic.Uint64
	failed     atomic.Uint64
	doubleRel  atomic.Uint64
	holdsOut   atomic.Uint64 // callers that went when their hold ran out (see hold.go)

	wcache waitq.Cache // free waiters

	// evict is the eviction lock, a channel with room for one: whoever
	// sent to it runs the one eviction pass at a time, and owns buf and
	// backlog. It is a channel, not a sync.Mutex, so that a new key
	// waiting for a running pass can stop waiting when its context ends
	// (see makeRoom).
	evict chan struct{}
	buf   []candidate[K] // reused by eviction passes
	// backlog is what the last pass left of buf: the idle entries it saw
	// and kept, consumed by the next trims (see evictOldest).
	backlog   []candidate[K]
	noBacklog bool   // a benchmark's knob: every trim runs a pass (see BenchmarkAblationBacklog)
	passes    uint64 // eviction passes run, for tests; under the eviction lock

	stopJanitor, janitorDone chan struct{} // nil without WithJanitor

	beforeWait func() // a test's hook, run by an acquire on its way to wait; nil

	barge waitq.Bound // WithBarging's bound, see barging.go
}

type config struct {
	capacity   int64
	idle       time.Duration
	maxKeys    int
	hard       bool
	maxWaiters int
	clock      semaphore.Clock
	janitor    time.Duration
	janitorSet bool
	order      uint8         // see turn.go
	aging      time.Duration // WithPriorities' step
	barging    bool          // WithBarging given
	bargeBound time.Duration // its bound
	histograms bool          // WithHistograms
	hold       time.Duration // WithReorderHold's bound
	holdSet    bool          // WithReorderHold given
}

// Option configures [New]. A value out of range, or a nil Option, is
// refused, never clamped.
type Option func(*config)

// WithPerKeyCapacity sets every key's capacity, in [1,
// 2^28-1]; the default, 1, runs a key's callers one at a time.
func WithPerKeyCapacity(n int64) Option { return func(c *config) { c.capacity = n } }

// WithIdleTimeout(d) keeps an idle entry for d (default 1h), so that the
// key's next use allocates nothing; 0 drops it at once, best for keys used
// once. Normal use evicts it between d and about 9d/8 after it went idle
// (to a millisecond): the release or new key that finds an eviction due
// runs a pass, in time proportional to the entries, as Sweep does.
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithMaxKeys(n) caps the entries (default 4096), softly: a new key over
// the cap evicts the oldest idle entries until a quarter under; entries in
// use may pass it, and one that goes idle over the cap is evicted at once.
// Once calls in flight have returned, only entries in use are over the cap.
// From a quarter under the cap on (at least one under), a key used once
// (made for one call, which nobody joined) is dropped as it goes idle, but
// for one new key in sixteen: a flood of keys used once then costs about
// what it does with idle timeout 0, and a key that comes back is kept
// after sixteen uses on average, or as soon as two calls use it at once
// (not with [WithReorderHold], whose idle entries hold the key's last
// number). The flood's one key in sixteen still counts against the cap:
// a flood of 16 times the cap's room or more evicts every idle entry made
// before it, oldest first, as any eviction does; entries in use stay.
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithHardMaxKeys makes the cap hard, for untrusted keys: a new key that
// finds no idle entry to evict fails with [ErrTooManyKeys].
func WithHardMaxKeys() Option { return func(c *config) { c.hard = true } }

// WithMaxWaitersPerKey(n) fails a call with [semaphore.ErrQueueFull]
// rather than let it be a key's waiter n+1; 0, the default, is no bound. A
// woken [WithBarging] waiter that loses rejoins past it.
func WithMaxWaitersPerKey(n int) Option { return func(c *config) { c.maxWaiters = n } }

// WithClock replaces the system clock (idle time, aging, the barging and
// reorder bounds) for tests; it is read concurrently, under a key's lock:
// it must be safe for concurrent use and not block. nil means the system
// clock.
func WithClock(c semaphore.Clock) Option { return func(cf *config) { cf.clock = c } }

// WithHistograms records [semaphore.Timings] over all keys.
func WithHistograms() Option { return func(c *config) { c.histograms = true } }

// WithJanitor(d) runs a goroutine that every d evicts what is due, so that
// an unused semaphore gives its memory back too; Close stops it. d must be
// at least a millisecond (a shorter one would keep a core busy ticking);
// with idle timeout 0 no entry is ever idle, and no janitor runs.
func WithJanitor(d time.Duration) Option {
	return func(cf *config) { cf.janitor, cf.janitorSet = d, true }
}

// Validate returns the error [New] would panic with for opts (it wraps
// [semaphore.ErrInvalidConfig] and names the setting), or nil.
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
			return c, fmt.Errorf("keyedsem: option %d is nil: %w", i, semaphore.ErrInvalidConfig)
		}
		o(&c)
	}
	switch {
	case c.capacity < 1 || c.capacity > maxPerKeyCapacity:
		return c, fmt.Errorf("keyedsem: WithPerKeyCapacity(%d): out of range [1, %d]: %w", c.capacity, maxPerKeyCapacity, semaphore.ErrInvalidConfig)
	case c.idle < 0:
		return c, fmt.Errorf("keyedsem: WithIdleTimeout(%v): must not be negative: %w", c.idle, semaphore.ErrInvalidConfig)
	case c.maxKeys < 1:
		return c, fmt.Errorf("keyedsem: WithMaxKeys(%d): must be at least 1: %w", c.maxKeys, semaphore.ErrInvalidConfig)
	case c.maxWaiters < 0:
		return c, fmt.Errorf("keyedsem: WithMaxWaitersPerKey(%d): must not be negative: %w", c.maxWaiters, semaphore.ErrInvalidConfig)
	case c.janitorSet && c.janitor < time.Millisecond:
		return c, fmt.Errorf("keyedsem: WithJanitor(%v): must be at least 1ms: %w", c.janitor, semaphore.ErrInvalidConfig)
	case c.barging && c.bargeBound < 0:
		return c, fmt.Errorf("keyedsem: WithBarging(%v): must not be negative: %w", c.bargeBound, semaphore.ErrInvalidConfig)
	}
	return c, checkOrder(&c)
}

// New returns a keyed semaphore with no entries. It panics with
// [Validate]'s error if an option is out of range. The NaN check of keys
// costs nothing for key types that cannot hold a NaN; an interface key
// whose value is not comparable panics, as it would in a map.
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
		hold:       int64(c.hold),
		nanKeys:    nan.Possible[K](),
		clock:      c.clock,
	}
	if _, ok := c.clock.(clock.Real); ok || c.clock == nil {
		s.clock, s.realClock = clock.Real{}, true
	}
	s.epoch = s.clock.Now()
	if c.barging {
		d := c.bargeBound
		if d == 0 {
			d = time.Millisecond // as package semaphore's: sync.Mutex's threshold
		}
		s.barging = true
		s.barge.Init(d, s.clock)
	}
	s.handsOff = c.capacity == 1 && !c.barging && c.hold == 0
	if c.idle != 0 && c.hold == 0 {
		// With idle timeout 0 every entry dies with its last reference;
		// with WithReorderHold an idle entry keeps its key's last number.
		s.fresh = kFresh
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
	// A new token's generation starts at the count of tokens made, not
	// at 0: the hold sampler picks a grant by its token's generation, and
	// tokens all starting at 0 would time every new token's first grant
	// (every grant of a run of new keys) instead of one in SampleEvery.
	s.tokens.New = func() any {
		t := new(token[K])
		n := s.nextStripe.Add(1)
		t.Init(&s.stripes[n&s.mask], -1, &t.gen)
		t.gen.Store(uint64(n))
		return t
	}
	s.paired = c.idle == 0 && c.capacity == 1
	s.entries.New = func() any {
		if s.paired {
			p := new(pair[K])
			p.e.state.Store(deadBit)
			n := s.nextStripe.Add(1)
			p.t.Init(&s.stripes[n&s.mask], -1, &p.t.gen)
			p.t.gen.Store(uint64(n)) // as a pooled token's
			p.t.e = &p.e
			return &p.e
		}
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
// the key's line at the place [semaphore.Priority] or [semaphore.Sequence]
// gives. It fails as package semaphore's Acquire does, and with
// [ErrTooManyKeys] (after waiting for a running eviction pass) or
// [ErrNaNKey]. Cancellation: see the package doc. It panics if ctx is nil.
func (s *Keyed[K]) Acquire(ctx context.Context, key K, opts ...semaphore.AcquireOption) (semaphore.Permit, error) {
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
			return semaphore.Permit{}, err // an ended context comes before any refusal
		}
		s.rejected.Add(1)
		return semaphore.Permit{}, err
	}
	if s.order == 0 {
		return s.acquire(ctx, key, n, nil)
	}
	return s.acquire(ctx, key, n, &t)
}

// acquire is Acquire for n permits at turn t (nil: the zero Turn, or a
// FIFO semaphore).
func (s *Keyed[K]) acquire(ctx context.Context, key K, n int64, t *call.Turn) (semaphore.Permit, error) {
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		s.mustBeMade()
		if err := ended(ctx); err != nil {
			s.cancelled.Add(1)
			return semaphore.Permit{}, err // an ended context comes before any refusal
		}
		return semaphore.Permit{}, s.refuse(n)
	}
	// The context is looked at by lookup, after it loaded the state that
	// it claims permits from and before the claim: had it looked before
	// the load, a release (and with idle timeout 0 the removal of the
	// entry, and a new one) after the look could give the permit to a
	// context cancelled before the release.
	e, took, err := s.lookup(ctx, key, s.takeAtLookup(n, t), false)
	if err != nil {
		if err == ErrTooManyKeys || err == errTooManyRefs {
			s.rejected.Add(1)
		} else { // ctx had ended, or ended while waiting for an eviction pass
			s.cancelled.Add(1)
		}
		return semaphore.Permit{}, err
	}
	if took && !s.holds(t) {
		return s.grant(e, n), nil
	}
	if s.beforeWait != nil {
		s.beforeWait()
	}
	return s.wait(ctx, e, n, t)
}

// TryAcquire takes permits for key, one or [semaphore.Weight](n), if they
// are free and nobody waits for the key (under [WithBarging], nobody has
// waited the bound; under [WithReorderHold], its Sequence is not held),
// and reports whether it did. It never waits for an
// eviction pass, though a new key may run one. It reports false, too, for
// a call that Acquire refuses with an error (a weight out of range, an
// option without its order, a NaN key, the hard cap full, Close): only
// Acquire, or [Validate] for the options, names the mistake.
func (s *Keyed[K]) TryAcquire(key K, opts ...semaphore.AcquireOption) (semaphore.Permit, bool) {
	if len(opts) == 0 {
		return s.tryAcquire(key, 1)
	}
	n, t, err := s.callOf(opts)
	if err != nil {
		return semaphore.Permit{}, false // a try's false counts nowhere, as semaphore's
	}
	if s.holds(&t) {
		return s.tryHeld(key, n, t.Sequence)
	}
	return s.tryAcquire(key, n)
}

// tryAcquire is TryAcquire for n permits.
func (s *Keyed[K]) tryAcquire(key K, n int64) (semaphore.Permit, bool) {
	if n <= 0 || n > s.capacity || s.closed.Load() || (s.nanKeys && key != key) {
		s.mustBeMade() // a zero Keyed has capacity 0: every try comes here
		return semaphore.Permit{}, false
	}
	e, took, _ := s.lookup(context.TODO(), key, n, true)
	if !took {
		return semaphore.Permit{}, false
	}
	return s.grant(e, n), true
}

// Do runs fn holding key's permits, as [semaphore.Weighted.Do] does.
func (s *Keyed[K]) Do(ctx context.Context, key K, fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	if fn == nil { // found before a wait, not as a nil call with permits held
		panic("keyedsem: Do with a nil fn")
	}
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
		return semaphore.ErrClosed
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

// Close fails the waiters and later acquires with [semaphore.ErrClosed]; permits held
// stay valid. It stops the janitor and the eviction normal use does, but
// not [Keyed.Sweep], nor a release's drop of its entry under idle timeout
// 0. An acquire that overlaps Close and needs no wait may still succeed.
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
		waitq.Fail(&e.q, line[K]{s, e}, 0, semaphore.ErrClosed, &wake) // the failed waiters still hold their references
		e.mu.Unlock()
		wake.Wake()
		return true
	})
}

// Len returns the number of entries: keys in use, and idle ones not yet
// evicted.
func (s *Keyed[K]) Len() int {
	s.mustBeMade()
	return int(s.alive.Load())
}
