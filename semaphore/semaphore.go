package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/hist"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// Permit is a grant of permits, the handle every lanes package returns. The
// zero Permit holds nothing. Ownership: see the package doc.
type Permit permit.Permit

// Release gives the permits back and returns true the first time; see the
// package doc for later calls. On the zero Permit it returns false.
func (p Permit) Release() bool { return permit.Permit(p).Release() }

// Weight returns the number of permits held, 0 for the zero Permit (and
// only for it), also once released.
func (p Permit) Weight() int64 { return permit.Permit(p).Weight() }

// Clock is the time source of a semaphore ([WithClock]), and of the other
// packages' WithClock options. Its methods: Now() time.Time, and
// NewTimer(d time.Duration) Timer. A test's fake needs only those two.
type Clock = clock.Clock

// Timer is a one-shot timer made by a [Clock]. Its methods: C() <-chan
// time.Time, which receives once when it fires, and Stop() bool, which
// prevents the firing and reports whether it did.
type Timer = clock.Timer

// Sentinel errors, defined here once and shared by every lanes package
// (semaphore.ErrClosed == semaphore.ErrClosed); a lane may wrap them.
var (
	// ErrClosed: the semaphore was closed, before the call or while it waited.
	ErrClosed = errors.New("lanes: closed")
	// ErrQueueFull: waiting would pass WithMaxWaiters or WithMaxWaitingWeight.
	ErrQueueFull = errors.New("lanes: wait queue full")
	// ErrWaitTooLong: the call waited WithMaxWait.
	ErrWaitTooLong = errors.New("lanes: waited too long")
	// ErrTooHeavy: more permits than the capacity, now or after a shrink.
	ErrTooHeavy = errors.New("lanes: weight exceeds capacity")
	// ErrInvalidWeight: a request of zero or fewer permits.
	ErrInvalidWeight = errors.New("lanes: weight must be positive")
	// ErrInvalidConfig is wrapped by the errors naming a bad setting or option.
	ErrInvalidConfig = errors.New("lanes: invalid configuration")
	// ErrPlaceUsed: the place was waited for or left already.
	ErrPlaceUsed = errors.New("lanes: place already waited for or left")
)

// MaxCapacity, 2^47-1, is the largest capacity a 64-bit state word holds.
const MaxCapacity = 140_737_488_355_327

// Weighted is a weighted semaphore, made by [New]; see the package doc for
// its contract.
type Weighted struct {
	// state is the fast-path word (see the layout above). It changes by
	// compare-and-swap or atomic add, from any goroutine; with the slow
	// flag set, acquirers change it only under mu.
	state atomic.Uint64
	_     [cacheLine - 8]byte
	// gens are the generations of the inline tokens.
	gens [inlineTokens]atomic.Uint64

	capacity atomic.Int64               // written under mu; read anywhere
	tm       *hist.Timings              // WithHistograms; nil: off. Immutable after New
	tokens   [inlineTokens]permit.Token // immutable after New

	// barge is WithBarging's state, nil without it; immutable after New.
	// It sits beside mu, so the slow paths' branch on it loads the line
	// they lock next.
	barge   *barger
	mu      sync.Mutex  // protects everything below
	q       waitq.Queue // the waiters
	fair    *fairQueue  // WithFairShare's keys; nil: FIFO
	waiters int
	// waitWeight is the total weight of the waiters, which can pass
	// math.MaxInt64 (2^16 waiters of MaxCapacity do): it is counted in
	// two words, waitHi the high one.
	waitWeight  uint64
	waitHi      uint64
	closed      bool
	spare       []*permit.Token // free tokens beyond the inline ones
	spareOut    int64           // spare tokens currently granted
	spareFreed  uint64          // releases through spare tokens
	handOff     int8            // 0: hand off at capacity 1 (handOffAt); 1 always, -1 never (the ablation's knobs); under mu
	cancelled   uint64
	timedOut    uint64
	rejected    uint64
	failed      uint64
	config                     // the settings, immutable after New
	prio        aging          // WithPriorities, immutable after New
	mw          *waitq.MaxWait // WithMaxWait's bound on a wait, nil: none; immutable after New
	doubleRel   atomic.Uint64  // counted without mu
	wcache      waitq.Cache    // free waiters
	grantedWait uint64         // grants that had to wait
}

// config holds the settings that the options set.
type config struct {
	maxWaiters int
	maxWaitWt  int64
	maxWait    time.Duration
	clock      Clock
	// The ordering options: WithPriorities and WithFairShare compose;
	// WithBarging, which orders nothing, takes neither.
	prioSet, fairSet, bargeSet bool
	agingStep                  time.Duration    // WithPriorities' step
	fairWeight                 func(string) int // WithFairShare's weights; nil: equal
	bargeBound                 time.Duration    // WithBarging's bound
	histograms                 bool             // WithHistograms
	hc                         hist.Clock       // the clock of timings and waiters' stamps, from clock
}

// Option configures [New]; an out-of-range or nil Option is refused.
type Option func(*config)

// WithMaxWaiters(n) fails a call with [ErrQueueFull] rather than let it be
// waiter n+1; 0, the default, is no bound. A woken [WithBarging] waiter
// that loses rejoins past this bound or WithMaxWaitingWeight's.
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }

// WithMaxWaitingWeight(w) fails a call with [ErrQueueFull] rather than let
// the total weight waiting pass w. 0, the default, is no bound.
func WithMaxWaitingWeight(w int64) Option { return func(c *config) { c.maxWaitWt = w } }

// WithMaxWait(d) ends a wait in line after d with [ErrWaitTooLong], as a
// context would. 0, the default, is no bound.
func WithMaxWait(d time.Duration) Option { return func(c *config) { c.maxWait = d } }

// WithClock replaces the system clock, for tests; it must be safe for
// concurrent use. nil means the system clock.
func WithClock(cl Clock) Option { return func(c *config) { c.clock = cl } }

// Validate returns the error [New] would panic with for capacity and opts
// (it wraps [ErrInvalidConfig] and names the setting), or nil.
func Validate(capacity int64, opts ...Option) error {
	var c config
	return c.configure(capacity, opts)
}

// configure applies opts to c and checks the result and capacity: the one
// place where the settings of a semaphore are checked.
func (c *config) configure(capacity int64, opts []Option) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("semaphore: option %d is nil: %w", i, ErrInvalidConfig)
		}
		o(c)
	}
	switch {
	case capacity < 0 || capacity > MaxCapacity:
		return fmt.Errorf("semaphore: capacity %d out of range [0, %d]: %w", capacity, int64(MaxCapacity), ErrInvalidConfig)
	case c.maxWaiters < 0:
		return fmt.Errorf("semaphore: WithMaxWaiters(%d): must not be negative: %w", c.maxWaiters, ErrInvalidConfig)
	case c.maxWaitWt < 0:
		return fmt.Errorf("semaphore: WithMaxWaitingWeight(%d): must not be negative: %w", c.maxWaitWt, ErrInvalidConfig)
	case c.maxWait < 0:
		return fmt.Errorf("semaphore: WithMaxWait(%v): must not be negative: %w", c.maxWait, ErrInvalidConfig)
	case c.bargeSet && (c.prioSet || c.fairSet):
		return fmt.Errorf("semaphore: WithBarging lets callers pass the line, so it takes no WithPriorities or WithFairShare: %w", ErrInvalidConfig)
	case c.prioSet && c.agingStep <= 0:
		return fmt.Errorf("semaphore: WithPriorities(%v): the step must be positive: %w", c.agingStep, ErrInvalidConfig)
	}
	return c.checkBarging()
}

// New returns a semaphore with the given capacity, all of it available. It
// panics with [Validate]'s error for a capacity outside [0, [MaxCapacity]]
// or an option out of range.
func New(capacity int64, opts ...Option) *Weighted {
	s := &Weighted{}
	if err := s.config.configure(capacity, opts); err != nil {
		panic(err)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.prioSet {
		s.prio.step = int64(s.agingStep)
	}
	if s.fairSet {
		s.fair = newFairQueue(s.fairWeight)
	}
	if s.bargeSet {
		s.barge = newBarger(&s.config)
	}
	if s.maxWait > 0 {
		s.mw = &waitq.MaxWait{D: s.maxWait, Clock: s.clock, Err: ErrWaitTooLong}
	}
	s.hc = hist.NewClock(s.clock)
	if s.histograms {
		s.tm = new(hist.Timings)
	}
	for i := range s.tokens {
		s.tokens[i].Init((*owner)(s), i, &s.gens[i])
		s.tokens[i].SetWord(&s.state, s.handsOffAt(capacity))
		s.observe(&s.tokens[i])
	}
	s.capacity.Store(capacity)
	st := uint64(capacity)<<availShift | tokenMask
	if s.tm != nil {
		st |= flagTimed
	}
	s.state.Store(st)
	return s
}

// Acquire takes n permits, waiting in line if need be, at the place
// [Priority] or [Group] gives. It returns the Permit, or the zero Permit
// and ctx.Err(), [ErrInvalidWeight], [ErrTooHeavy], [ErrClosed],
// [ErrQueueFull], [ErrWaitTooLong] or, for a refused option,
// [ErrInvalidConfig]. Cancellation: see the package doc. Acquire panics if
// ctx is nil.
func (s *Weighted) Acquire(ctx context.Context, n int64, opts ...AcquireOption) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	// The word is loaded before ctx is looked at, and claimed only as it
	// was loaded: if the load saw permits that a release gave back, it
	// also sees a cancellation that came before that release (atomics are
	// sequentially consistent), so a context that ended before the
	// permits came free always wins. A context that has ended has a
	// non-nil Err (and a closed Done); Err is one atomic load for the
	// standard contexts, cheaper than a select. Background and TODO never
	// end: for them neither the call nor the ordering matters. An ended
	// context comes before any refusal, as in keyedsem.
	st := s.state.Load()
	if !neverEnds(ctx) && ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if len(opts) != 0 {
		return s.acquireWith(ctx, n, st, opts)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
	}
	if st&flagTimed != 0 {
		return s.acquireTimed(ctx, n, st, &noTurn)
	}
	return s.acquireSlow(ctx, n, &noTurn)
}

// noTurn is the place of a call without options; the paths that take a
// turn only read it.
var noTurn call.Turn

// acquireWith is Acquire for a call with options, which it reads once,
// into a Call of its own (a plain Acquire does not zero one), and then
// passes down by pointer: the Call that call.Read returned and the Turn
// passed by value cost an uncontended call with one option some 30 ns
// (docs/internals.md).
func (s *Weighted) acquireWith(ctx context.Context, n int64, st uint64, opts []AcquireOption) (Permit, error) {
	var c call.Call
	if err := s.turnOf(opts, &c); err != nil {
		s.reject()
		return Permit{}, err
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
	}
	if st&flagTimed != 0 {
		return s.acquireTimed(ctx, n, st, &c.Turn)
	}
	return s.acquireSlow(ctx, n, &c.Turn)
}

// TryAcquire takes n permits if they are free and nobody waits (under
// [WithBarging], nobody has waited the bound); it reports whether it did,
// so false after Close, and false for an n that Acquire refuses with an
// error (n < 1, n above the capacity): only Acquire names the mistake, and
// no counter counts a try.
func (s *Weighted) TryAcquire(n int64) (Permit, bool) {
	if st := s.state.Load(); n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, true
		}
	}
	if n <= 0 {
		s.mustBeMade()
		return Permit{}, false
	}
	if s.tm != nil {
		if st := s.state.Load(); timedOK(st, n) {
			if p, ok := s.claimInline(st, n); ok {
				return s.stamp(p), true
			}
		}
	}
	if b := s.barge; b != nil {
		return s.tryBarging(n, b)
	}
	s.mu.Lock()
	p, ok := s.takeLocked(n)
	s.mu.Unlock()
	if !ok {
		s.mustBeMade() // a zero Weighted has capacity 0: every try comes here
	}
	return p, ok
}

// Do runs fn (a nil fn panics) holding n permits, released when fn
// returns or panics, and returns Acquire's error (without calling fn) or
// fn's. Once fn runs it keeps the permits until it returns, whatever
// becomes of ctx.
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error, opts ...AcquireOption) error {
	if fn == nil { // found before a wait, not as a nil call with permits held
		panic("semaphore: Do with a nil fn")
	}
	p, err := s.Acquire(ctx, n, opts...)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

// handsOffAt reports whether releases into the queue hand their token to
// the head at capacity c (see ReleaseQueued). The hand-off pays where
// every release into a queue serves the head, at capacity 1; with more
// permits it makes every release take mu while waiters queue, and the
// queue a convoy (BenchmarkAblationHandOff, capacity 8: 2x). So it follows
// the capacity, also through SetCapacity: an adaptive lane that starts at
// 1 stops handing off as it grows. A barging lane never hands off: its
// releases wake the head to compete and grant nothing.
func (s *Weighted) handsOffAt(c int64) bool {
	return s.barge == nil && (s.handOff > 0 || (s.handOff == 0 && c == 1))
}

// SetCapacity sets the capacity (panicking as New does if n is out of
// range). A shrink takes only available permits, Available going negative
// until holders release, and fails the waiters now too heavy.
func (s *Weighted) SetCapacity(n int64) {
	if n < 0 || n > MaxCapacity {
		panic(fmt.Errorf("semaphore: SetCapacity(%d): out of range [0, %d]: %w", n, int64(MaxCapacity), ErrInvalidConfig))
	}
	s.mustBeMade()
	var wake waitq.Chain
	s.mu.Lock()
	delta := n - s.capacity.Load()
	s.capacity.Store(n)
	if on := s.handsOffAt(n); on != s.handsOffAt(n-delta) {
		for i := range s.tokens {
			s.tokens[i].SetHandOff(on)
		}
	}
	s.state.Add(uint64(delta) << availShift)
	waitq.Fail(&s.q, (*owner)(s), n, ErrTooHeavy, &wake)
	if s.barge != nil {
		waitq.BargeGrant(&s.q, (*owner)(s), &wake) // strict mode may end with the waiters failed
	} else {
		waitq.Grant(&s.q, (*owner)(s), &wake)
	}
	s.mu.Unlock()
	wake.Wake()
}

// Close fails the waiters and every later acquire with [ErrClosed]; permits
// held stay valid. Close is idempotent.
func (s *Weighted) Close() {
	s.mustBeMade()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for {
		st := s.state.Load()
		if s.state.CompareAndSwap(st, st|flagSlow) {
			break
		}
	}
	if s.barge != nil {
		s.barge.flags.Or(bClosed) // the barging paths read no mu
	}
	var wake waitq.Chain
	waitq.Fail(&s.q, (*owner)(s), 0, ErrClosed, &wake)
	s.mu.Unlock()
	wake.Wake()
}

// mustBeMade panics on a zero Weighted, which the package doc calls not
// usable: it would otherwise refuse every acquire with a misleading
// ErrTooHeavy, and SetCapacity would hand out permits of tokens never
// set up. New always sets the clock. Called on slow and failure paths
// only: a made Weighted's fast paths never reach it.
func (s *Weighted) mustBeMade() {
	if s.clock == nil {
		panic("semaphore: use New")
	}
}

// Capacity returns the current capacity with one atomic load.
func (s *Weighted) Capacity() int64 { return s.capacity.Load() }
