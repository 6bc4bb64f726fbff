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

// Permit is the handle of permits taken from a semaphore. Every lanes
// package returns this same type (keyedsem.Permit is it under another
// name), except redislane's own Acquire methods, whose *redislane.Permit
// adds a lease and a fencing token (its lanes of a lanequeue.Queue return
// this type, and redislane.PermitOf finds the Redis permit behind it).
//
// A Permit is owned by whoever received it from an acquire call, or whoever
// it was handed to; it may be passed to another goroutine, which then owns
// it. The owner must call [Permit.Release] once. The zero Permit holds
// nothing.
type Permit permit.Permit

// Release gives the permits back and returns true the first time it is
// called for a grant. A second Release, or a Release through a copy of the
// handle, returns false, frees nothing and is counted in
// [Stats].DoubleReleases, even after the permit's memory has been reused
// for a later grant. On the zero Permit it returns false and counts
// nothing. It is safe to call from any goroutine.
//
// A Release happens before the Acquire that it unblocks returns.
func (p Permit) Release() bool { return permit.Permit(p).Release() }

// Weight returns the number of permits held (0 for the zero Permit). It
// does not change when the permit is released.
func (p Permit) Weight() int64 { return permit.Permit(p).Weight() }

// Valid reports whether p came from a grant, that is, whether it is not
// the zero Permit. It does not tell whether p has been released.
func (p Permit) Valid() bool { return permit.Permit(p).Valid() }

// Clock is the time source of [WithMaxWait]; tests replace it with a fake
// clock. Its Timer is one-shot.
type Clock = clock.Clock

// Timer is a one-shot timer made by a [Clock].
type Timer = clock.Timer

// Sentinel errors, for errors.Is. Each is defined here once and shared by
// every lanes package: keyedsem, lanequeue and redislane re-export these
// same values (keyedsem.ErrClosed == semaphore.ErrClosed), so that
// errors.Is(err, semaphore.ErrClosed) holds whichever layer returned err.
// Their text therefore names no package; a layer that adds context (the
// lane's name) wraps them. Context errors are returned as they are.
var (
	// ErrClosed is returned by acquire calls on a closed semaphore, and to
	// the waiters that Close wakes.
	ErrClosed = errors.New("lanes: closed")
	// ErrQueueFull is returned when waiting would exceed WithMaxWaiters or
	// WithMaxWaitingWeight.
	ErrQueueFull = errors.New("lanes: wait queue full")
	// ErrWaitTooLong is returned to a waiter that waited longer than
	// WithMaxWait.
	ErrWaitTooLong = errors.New("lanes: waited too long")
	// ErrTooHeavy is returned for a request of more permits than the
	// capacity, which could never be granted; also to a waiter whose request
	// no longer fits after SetCapacity shrank the semaphore.
	ErrTooHeavy = errors.New("lanes: weight exceeds capacity")
	// ErrInvalidWeight is returned for a request of zero or fewer permits.
	ErrInvalidWeight = errors.New("lanes: weight must be positive")
	// ErrInvalidConfig is wrapped by the error that reports a setting out
	// of range: a capacity or an option given to a constructor. [Validate]
	// returns it; [New], which has no error result, panics with it (the
	// panic value is that error).
	ErrInvalidConfig = errors.New("lanes: invalid configuration")
	// ErrPlaceUsed is returned by the Wait of a place in line ([Place],
	// and the Places of keyedsem and lanequeue) that was already waited
	// for or given up, or that is the zero Place: a place is used once, so
	// that its permit has one owner.
	ErrPlaceUsed = errors.New("lanes: place already waited for or left")
)

// MaxCapacity is the largest capacity a semaphore can have: 2^47-1, about
// 1.4e14. The count of available permits shares one 64-bit word with the
// fast path's flags and tokens (a test pins it to that word's layout).
const MaxCapacity = 140_737_488_355_327

// Weighted is a weighted semaphore with strict FIFO service: a waiter is
// never overtaken, neither by a later lighter request nor by TryAcquire.
// [WithPriorities] orders the waiters by priority with aging instead,
// [WithFairShare] serves them by group, and [WithBarging] trades the order
// for throughput, within a bound.
//
// It must be created with [New] and must not be copied after first use. All
// methods are safe for concurrent use.
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
	cancelled   uint64
	timedOut    uint64
	rejected    uint64
	failed      uint64
	config                    // the settings, immutable after New
	prio        aging         // WithPriorities, immutable after New
	doubleRel   atomic.Uint64 // counted without mu
	wcache      waitq.Cache   // free waiters
	grantedWait uint64        // grants that had to wait
}

// config holds the settings that the options set.
type config struct {
	maxWaiters int
	maxWaitWt  int64
	maxWait    time.Duration
	clock      Clock
	// The ordering options: at most one (order names it; orderClash
	// names a pair given together).
	order, orderClash string
	agingStep         time.Duration    // WithPriorities' step
	fairWeight        func(string) int // WithFairShare's weights; nil: equal
	bargeBound        time.Duration    // WithBarging's bound
	histograms        bool             // WithHistograms
	hc                hist.Clock       // the clock of timings and waiters' stamps, from clock
}

// Option configures a semaphore made by [New]. Options are applied in
// order, then checked together, once, by the same code that [Validate]
// runs: a value out of range, or a nil Option, is refused, never clamped
// or ignored.
type Option func(*config)

// WithMaxWaiters bounds the number of callers that may wait at once; an
// Acquire that would be waiter n+1 fails at once with [ErrQueueFull].
// n == 0 means no bound (the default); n < 0 is refused.
func WithMaxWaiters(n int) Option { return func(c *config) { c.maxWaiters = n } }

// WithMaxWaitingWeight bounds the total weight of the waiting requests; an
// Acquire that would take it over w fails at once with [ErrQueueFull].
// w == 0 means no bound (the default); w < 0 is refused.
func WithMaxWaitingWeight(w int64) Option { return func(c *config) { c.maxWaitWt = w } }

// WithMaxWait bounds how long a caller waits in the queue: after d it
// leaves with [ErrWaitTooLong], as if its context had been cancelled.
// d == 0 means no bound (the default); d < 0 is refused. The context's
// own deadline still applies.
func WithMaxWait(d time.Duration) Option { return func(c *config) { c.maxWait = d } }

// WithClock replaces the clock that WithMaxWait and WithPriorities use;
// tests pass a fake clock. Every waiting Acquire calls its NewTimer (with
// WithMaxWait) and its Now (with WithPriorities), concurrently: it must be
// safe for concurrent use. nil means the system clock.
func WithClock(cl Clock) Option { return func(c *config) { c.clock = cl } }

// Validate reports whether [New] accepts capacity and opts: nil, or an
// error wrapping [ErrInvalidConfig] that names the setting and its value
// (the value New would panic with). Callers that take settings from
// outside the program (package lanequeue, a configuration file) call it
// to get an error instead of a panic.
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
	case c.orderClash != "":
		return fmt.Errorf("semaphore: %s: one ordering option at most: %w", c.orderClash, ErrInvalidConfig)
	case c.order == "WithPriorities" && c.agingStep <= 0:
		return fmt.Errorf("semaphore: WithPriorities(%v): the step must be positive: %w", c.agingStep, ErrInvalidConfig)
	}
	return c.checkBarging()
}

// New returns a semaphore with the given capacity, all of it available.
//
// A capacity of 0 makes every acquire fail with [ErrTooHeavy] until
// SetCapacity grows it. New panics, with the error that [Validate]
// returns (it wraps [ErrInvalidConfig]), if capacity is negative or above
// [MaxCapacity], or an option is out of range.
func New(capacity int64, opts ...Option) *Weighted {
	s := &Weighted{}
	if err := s.config.configure(capacity, opts); err != nil {
		panic(err)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	switch s.order {
	case "WithPriorities":
		s.prio.start(s.agingStep, s.clock.Now())
	case "WithFairShare":
		s.fair = newFairQueue(s.fairWeight)
	}
	if s.order == "WithBarging" {
		s.barge = newBarger(&s.config)
	}
	s.hc = hist.NewClock(s.clock)
	if s.histograms {
		s.tm = new(hist.Timings)
	}
	for i := range s.tokens {
		s.tokens[i].Init((*owner)(s), i, &s.gens[i])
		s.tokens[i].SetWord(&s.state)
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

// Acquire takes n permits, waiting in FIFO order until they are available.
//
// On success it returns a [Permit] that the caller owns and must release
// once. On failure it returns the zero Permit and an error, and leaves the
// semaphore as it was: ctx.Err() if the context ends first (or had already
// ended: Acquire then fails at once, even if permits are free);
// [ErrInvalidWeight] for n <= 0; [ErrTooHeavy] for n above the capacity,
// or while waiting, when SetCapacity shrinks the capacity below n;
// [ErrClosed] after Close, or while waiting, when Close is called;
// [ErrQueueFull] when the wait queue is at its bound; [ErrWaitTooLong]
// after waiting WithMaxWait.
//
// Callers are served in the order they joined the queue (under the
// semaphore's lock), which for callers that do not overlap is the order
// of their calls; on a semaphore made [WithPriorities], by priority with
// aging, at the [Priority] opts give (0 without); on one made
// [WithFairShare], in the [Group] opts give ("" without); on one made [WithBarging], callers
// take free permits ahead of the queue until a waiter has waited the bound.
//
// Cancellation: a caller whose context ends while it waits leaves the queue
// at once, and the waiters behind it move up (if it was at the head, the
// next ones are served if they fit). A context that ends before the
// permits are granted wins, even when the grant follows at once, before
// the waiter has run: if the permits were granted while the cancellation
// was in flight, or after it, Acquire gives them back (they go to the
// waiters behind, as if it had left first) and returns the context's
// error. WithMaxWait's deadline is treated the same way. If Close or a
// shrink failed the waiter first, Acquire returns that error instead.
// Either way the caller owns a permit if and only if the error is nil.
//
// Acquire panics if ctx is nil.
func (s *Weighted) Acquire(ctx context.Context, n int64, opts ...AcquireOption) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	var t call.Turn
	if len(opts) != 0 {
		var err error
		if t, err = s.turnOf(opts); err != nil {
			s.reject()
			return Permit{}, err
		}
	}
	// The word is loaded before ctx is looked at, and claimed only as it
	// was loaded: if the load saw permits that a release gave back, it
	// also sees a cancellation that came before that release (atomics are
	// sequentially consistent), so a context that ended before the
	// permits came free always wins. A context that has ended has a
	// non-nil Err (and a closed Done); Err is one atomic load for the
	// standard contexts, cheaper than a select. Background and TODO never
	// end: for them neither the call nor the ordering matters.
	st := s.state.Load()
	if !neverEnds(ctx) && ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
	}
	if st&flagTimed != 0 {
		return s.acquireTimed(ctx, n, st, t)
	}
	return s.acquireSlow(ctx, n, t)
}

// TryAcquire takes n permits if they are available now and nobody is
// waiting, without blocking. It reports whether it did; on false the
// semaphore is unchanged. It never overtakes a waiter (on a semaphore made
// [WithBarging], it overtakes waiters that have not waited the bound). It returns false for
// n <= 0, n above the capacity, and after Close. On true the caller owns
// the permit, as with Acquire.
func (s *Weighted) TryAcquire(n int64) (Permit, bool) {
	if st := s.state.Load(); n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, true
		}
	}
	if n <= 0 {
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
	return p, ok
}

// Do acquires n permits, runs fn with ctx, and releases the permits when fn
// returns, also if fn panics (the panic then goes on). It returns the
// acquire error, or fn's error.
//
// Cancellation: if ctx ends while Do waits, Do returns ctx.Err() without
// calling fn, also when the permits were granted after ctx ended but
// before Do's wait saw it (and any other error of Acquire, such as
// ErrClosed or ErrWaitTooLong, likewise). Once fn runs, the permits are
// held until fn returns, whatever happens to ctx or to Close: work that
// ignores its deadline keeps its permits.
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error, opts ...AcquireOption) error {
	p, err := s.Acquire(ctx, n, opts...)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

// SetCapacity changes the capacity to n. Growing makes the new permits
// available and serves waiters in FIFO order; shrinking takes permits away
// from what is available, which may go negative until holders release:
// nothing is taken from holders. Waiters whose request is now above the
// capacity fail with [ErrTooHeavy].
//
// SetCapacity panics if n is negative or above [MaxCapacity], as New does:
// with an error that wraps [ErrInvalidConfig].
func (s *Weighted) SetCapacity(n int64) {
	if n < 0 || n > MaxCapacity {
		panic(fmt.Errorf("semaphore: SetCapacity(%d): out of range [0, %d]: %w", n, int64(MaxCapacity), ErrInvalidConfig))
	}
	var wake waitq.Chain
	s.mu.Lock()
	delta := n - s.capacity.Load()
	s.capacity.Store(n)
	s.state.Add(uint64(delta) << availShift)
	waitq.Fail(&s.q, (*owner)(s), n, ErrTooHeavy, &wake)
	waitq.Grant(&s.q, (*owner)(s), &wake)
	s.mu.Unlock()
	wake.Wake()
}

// Close stops the semaphore: every waiter is woken with [ErrClosed], and
// later acquire calls fail with ErrClosed (TryAcquire returns false).
// Permits already held stay valid, and their releases are still counted.
// Close is idempotent.
func (s *Weighted) Close() {
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

// Capacity returns the current capacity, as Stats().Capacity does, with
// one atomic load: no lock, so it is cheap enough for a hot path (a lane
// of package lanequeue reads it on every AcquireAll once its semaphore
// may be resized).
func (s *Weighted) Capacity() int64 { return s.capacity.Load() }
