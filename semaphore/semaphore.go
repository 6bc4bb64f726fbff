package semaphore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/fastctx"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// Permit is the handle of permits taken from a semaphore. Every lanes
// package returns this same type.
//
// A Permit is owned by whoever received it from an acquire call, or whoever
// it was handed to; it may be passed to another goroutine, which then owns
// it. Release gives the permits back and returns true the first time; a
// second Release, or a Release through a copy of the handle, returns false,
// frees nothing and is counted in [Stats].DoubleReleases, even after the
// permit's memory has been reused for a later grant. Weight returns the
// number of permits held. The zero Permit holds nothing and its Release
// returns false.
//
// A Release happens before the Acquire that it unblocks returns.
type Permit = permit.Permit

// Clock is the time source of [WithMaxWait]; tests replace it with a fake
// clock. Its Timer is one-shot.
type Clock = clock.Clock

// Timer is a one-shot timer made by a [Clock].
type Timer = clock.Timer

// Sentinel errors, for errors.Is. Context errors are returned as they are.
var (
	// ErrClosed is returned by acquire calls on a closed semaphore, and to
	// the waiters that Close wakes.
	ErrClosed = errors.New("semaphore: closed")
	// ErrQueueFull is returned when waiting would exceed WithMaxWaiters or
	// WithMaxWaitingWeight.
	ErrQueueFull = errors.New("semaphore: wait queue full")
	// ErrWaitTooLong is returned to a waiter that waited longer than
	// WithMaxWait.
	ErrWaitTooLong = errors.New("semaphore: waited too long")
	// ErrTooHeavy is returned for a request of more permits than the
	// capacity, which could never be granted; also to a waiter whose request
	// no longer fits after SetCapacity shrank the semaphore.
	ErrTooHeavy = errors.New("semaphore: weight exceeds capacity")
	// ErrInvalidWeight is returned for a request of zero or fewer permits.
	ErrInvalidWeight = errors.New("semaphore: weight must be positive")
)

// MaxCapacity is the largest capacity a semaphore can have: 2^47-1, about
// 1.4e14. The count of available permits shares one 64-bit word with the
// fast path's flags and tokens.
const MaxCapacity = 1<<(63-availShift) - 1

// Layout of Weighted.state, the word the fast paths work on with one
// compare-and-swap each:
//
//	bits 0..14   free inline tokens (bit i set: tokens[i] is free)
//	bit  15      slow: waiters are queued or the semaphore is closed; every
//	             change of the word then happens under mu
//	bits 16..63  available permits, signed (negative after a shrink)
//
// Fifteen inline tokens: a grant beyond them takes a spare token, whose
// release goes through mu, so the inline ones cover the capacities that
// are commonly used (up to 15 permits out at once) and the count still
// has 47 bits. The state word has a cache line of its own, and so does each
// inline token's generation: a core that keeps taking the same slot keeps
// that generation's line, so two cores working at once bounce only the
// state word's line between them (with the generations packed beside the
// state word, two goroutines at capacity 8 ran at half x/sync's speed).
// With seven tokens, capacity 8 under 32 goroutines released one grant in
// eight through mu, which showed as a tenth of its profile.
//
// The layout is permit's, so that Permit.Release returns an inline token
// to the word by itself, with no call into the semaphore.
const (
	inlineTokens = permit.WordTokens
	tokenMask    = 1<<inlineTokens - 1
	flagSlow     = permit.WordSlow
	availShift   = permit.WordShift
)

// cacheLine is the size of a cache line on the machines we target (amd64,
// arm64 servers).
const cacheLine = 64

type paddedGen struct {
	atomic.Uint64
	_ [cacheLine - 8]byte
}

func avail(st uint64) int64 { return int64(st) >> availShift }

// Weighted is a weighted semaphore with strict FIFO service: a waiter is
// never overtaken, neither by a later lighter request nor by TryAcquire.
//
// It must be created with [New] and must not be copied after first use. All
// methods are safe for concurrent use.
type Weighted struct {
	// state is the fast-path word (see the layout above). It changes by
	// compare-and-swap or atomic add, from any goroutine; with the slow
	// flag set, acquirers change it only under mu.
	state atomic.Uint64
	_     [cacheLine - 8]byte
	// gens are the generations of the inline tokens, each on its own line.
	gens [inlineTokens]paddedGen

	capacity atomic.Int64               // written under mu; read anywhere
	tokens   [inlineTokens]permit.Token // immutable after New

	mu sync.Mutex // protects everything below
	// head is the oldest waiter; waiters form a doubly linked list.
	head, tail *waiter
	waiters    int
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
	maxWaiters  int
	maxWaitWt   int64
	maxWait     time.Duration
	clock       Clock
	doubleRel   atomic.Uint64 // counted without mu
	wcache      waitq.Cache   // free waiters
	grantedWait uint64        // grants that had to wait
}

// Option configures a semaphore made by [New].
type Option func(*Weighted)

// WithMaxWaiters bounds the number of callers that may wait at once; an
// Acquire that would be waiter n+1 fails at once with [ErrQueueFull].
// n <= 0 means no bound (the default).
func WithMaxWaiters(n int) Option { return func(s *Weighted) { s.maxWaiters = n } }

// WithMaxWaitingWeight bounds the total weight of the waiting requests; an
// Acquire that would take it over w fails at once with [ErrQueueFull].
// w <= 0 means no bound (the default).
func WithMaxWaitingWeight(w int64) Option { return func(s *Weighted) { s.maxWaitWt = w } }

// WithMaxWait bounds how long a caller waits in the queue: after d it
// leaves with [ErrWaitTooLong], as if its context had been cancelled.
// d <= 0 means no bound (the default). The context's own deadline still
// applies.
func WithMaxWait(d time.Duration) Option { return func(s *Weighted) { s.maxWait = d } }

// WithClock replaces the clock that WithMaxWait uses; tests pass a fake
// clock. Every waiting Acquire calls its NewTimer, concurrently: it must be
// safe for concurrent use. nil means the system clock.
func WithClock(c Clock) Option { return func(s *Weighted) { s.clock = c } }

// New returns a semaphore with the given capacity, all of it available.
//
// New panics if capacity is negative or above [MaxCapacity]; a capacity of
// 0 makes every acquire fail with [ErrTooHeavy] until SetCapacity grows it.
func New(capacity int64, opts ...Option) *Weighted {
	if capacity < 0 || capacity > MaxCapacity {
		panic(fmt.Sprintf("semaphore: capacity %d out of range [0, %d]", capacity, int64(MaxCapacity)))
	}
	s := &Weighted{}
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	for i := range s.tokens {
		s.tokens[i].Init((*owner)(s), i, &s.gens[i].Uint64)
		s.tokens[i].SetWord(&s.state)
	}
	s.capacity.Store(capacity)
	s.state.Store(uint64(capacity)<<availShift | tokenMask)
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
// of their calls.
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
func (s *Weighted) Acquire(ctx context.Context, n int64) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	// The word is loaded before ctx is looked at, and claimed only as it
	// was loaded: if the load saw permits that a release gave back, it
	// also sees a cancellation that came before that release (atomics are
	// sequentially consistent), so a context that ended before the
	// permits came free always wins. A context that has ended has a
	// non-nil Err (and a closed Done); Err is one atomic load for the
	// standard contexts, cheaper than a select.
	st := s.state.Load()
	if ctxEnded(ctx) {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
		if p, ok := s.acquireContended(ctx, n); ok {
			return p, nil
		}
	}
	return s.acquireSlow(ctx, n)
}

// ctxEnded reports whether ctx has ended; a context that never ends
// (Background, TODO) is not asked.
func ctxEnded(ctx context.Context) bool {
	return !fastctx.NeverDone(ctx) && ctx.Err() != nil
}

// acquireContended retries the fast path after its compare-and-swap lost
// to another core, backing off first for a while that doubles each round.
// Without the backoff two cores taking and returning permits at once pass
// the state word's cache line back and forth on every operation (two
// goroutines on capacity 8 ran at half x/sync's speed, whose mutex lets
// one of them run alone while the other waits); with it, each runs bursts
// of operations with the line in its own cache. It gives up as soon as
// the fast path no longer applies (permits or tokens run out, or waiters
// queue: they are served in order under mu), and after backoffRounds
// attempts. Waiters never spin here: FIFO service is unaffected.
//
// Each reload is followed by a look at ctx, as in Acquire: permits given
// back while it spun must not go to a context that ended before they came
// free (the slow path then returns ctx's error).
func (s *Weighted) acquireContended(ctx context.Context, n int64) (Permit, bool) {
	for i := 0; i < backoffRounds; i++ {
		spinWait(backoffSpins << i)
		st := s.state.Load()
		if !fastOK(st, n) || ctxEnded(ctx) {
			return Permit{}, false
		}
		if p, ok := s.claimInline(st, n); ok {
			return p, true
		}
	}
	return Permit{}, false
}

// fastOK reports whether state st lets a caller take n permits (n > 0)
// without the lock: nobody waits, the semaphore is open, n permits are
// available and an inline token is free.
func fastOK(st uint64, n int64) bool {
	return st&flagSlow == 0 && avail(st) >= n && st&tokenMask != 0
}

// claimInline takes n permits and the lowest free inline token from state
// st, for which fastOK holds, by one compare-and-swap. It returns false if
// the word changed meanwhile.
func (s *Weighted) claimInline(st uint64, n int64) (Permit, bool) {
	slot, ok := s.takeSlot(st, n)
	if !ok {
		return Permit{}, false
	}
	return permit.Make(&s.tokens[slot], s.gens[slot].Load(), n), true
}

// takeSlot takes n permits and the lowest free inline token (st must have
// one) from state st by one compare-and-swap, and returns the token's
// slot. It returns false if the word changed meanwhile.
func (s *Weighted) takeSlot(st uint64, n int64) (int, bool) {
	slot := bits.TrailingZeros64(st)
	return slot, s.state.CompareAndSwap(st, st-uint64(n)<<availShift-1<<slot)
}

// The backoff of acquireContended: backoffRounds rounds of spinWait, the
// first of backoffSpins iterations (under a microsecond), each twice the
// one before: a few microseconds in all at most, about what sync.Mutex
// spins before it parks. Shorter first rounds (512 iterations) left two
// cores passing the line back and forth most of the time, at twice the
// cost per operation.
const (
	backoffRounds = 3
	backoffSpins  = 2048
)

// spinWait busy-waits for k iterations of an empty loop, without touching
// memory that other cores write. It is not inlined, so that the loop is
// kept.
//
//go:noinline
func spinWait(k int) {
	for j := 0; j < k; j++ {
	}
}

// TryAcquire takes n permits if they are available now and nobody is
// waiting, without blocking. It reports whether it did; on false the
// semaphore is unchanged. It never overtakes a waiter. It returns false for
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
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error) error {
	p, err := s.Acquire(ctx, n)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

func (s *Weighted) failFast(ctx context.Context) error {
	s.mu.Lock()
	s.cancelled++
	s.mu.Unlock()
	return ctx.Err()
}

// takeLocked takes n permits if nobody waits and they are available. It
// must be called with mu held.
func (s *Weighted) takeLocked(n int64) (Permit, bool) {
	if s.closed || s.head != nil || n > s.capacity.Load() {
		return Permit{}, false
	}
	for {
		st := s.state.Load()
		if avail(st) < n {
			return Permit{}, false
		}
		if t, ok := s.claimLocked(st, n); ok {
			return permit.Make(t, t.Gen(), n), true
		}
	}
}

// claimLocked takes n permits and a token from state st by one
// compare-and-swap, taking a spare token when no inline one is free. It
// returns false if the state changed meanwhile. It must be called with mu
// held and with avail(st) >= n.
func (s *Weighted) claimLocked(st uint64, n int64) (*permit.Token, bool) {
	if st&tokenMask != 0 {
		slot, ok := s.takeSlot(st, n)
		if !ok {
			return nil, false
		}
		return &s.tokens[slot], true
	}
	if !s.state.CompareAndSwap(st, st-uint64(n)<<availShift) {
		return nil, false
	}
	var t *permit.Token
	if k := len(s.spare); k > 0 {
		t = s.spare[k-1]
		s.spare[k-1] = nil
		s.spare = s.spare[:k-1]
	} else {
		t = permit.NewToken((*owner)(s), -1)
	}
	s.spareOut++
	return t, true
}

func (s *Weighted) acquireSlow(ctx context.Context, n int64) (Permit, error) {
	if n <= 0 {
		s.reject()
		return Permit{}, ErrInvalidWeight
	}
	s.mu.Lock()
	if s.closed {
		s.rejected++
		s.mu.Unlock()
		return Permit{}, ErrClosed
	}
	if n > s.capacity.Load() {
		s.rejected++
		s.mu.Unlock()
		return Permit{}, ErrTooHeavy
	}
	for {
		st := s.state.Load()
		// Permits given back since Acquire looked at ctx (a release of an
		// inline token needs no lock) must not go to a context that ended
		// before they came free: look again after each load.
		if ctxEnded(ctx) {
			s.cancelled++
			s.mu.Unlock()
			return Permit{}, ctx.Err()
		}
		if s.head == nil && avail(st) >= n {
			if t, ok := s.claimLocked(st, n); ok {
				s.mu.Unlock()
				return permit.Make(t, t.Gen(), n), nil
			}
			continue
		}
		// Under a bound on the waiting weight, waitWeight never exceeds
		// it, so the difference does not wrap (a sum could, past
		// math.MaxInt64, and let the waiter in).
		if (s.maxWaiters > 0 && s.waiters >= s.maxWaiters) ||
			(s.maxWaitWt > 0 && uint64(n) > uint64(s.maxWaitWt)-s.waitWeight) {
			s.rejected++
			s.mu.Unlock()
			return Permit{}, ErrQueueFull
		}
		// Set the slow flag before queueing, so that no fast-path release
		// can slip past the queue. If the word moved, look again: the
		// permits may have come back.
		if st&flagSlow != 0 || s.state.CompareAndSwap(st, st|flagSlow) {
			break
		}
	}
	w := s.wcache.Get()
	w.N = n
	s.push(w)
	s.mu.Unlock()

	done := ctx.Done()
	var timer Timer
	var expired <-chan time.Time
	if s.maxWait > 0 {
		timer = s.clock.NewTimer(s.maxWait)
		expired = timer.C()
	}
	var err error
	woken := false
	if done == nil && expired == nil {
		<-w.Ready
	} else {
		select {
		case <-w.Ready:
			// The wait may have ended too, before the grant: when both are
			// ready by the time the select runs, it picks one at random.
			// An ending that is there to see wins (go.dev/issue/63615).
			woken, err = true, ended(ctx, done, expired)
		case <-done:
			err = ctx.Err()
		case <-expired:
			err = ErrWaitTooLong
		}
	}
	if timer != nil {
		timer.Stop()
	}
	switch {
	case err == nil:
		return s.wcache.Outcome(w)
	case woken:
		return Permit{}, s.handBack(w, err)
	default:
		return Permit{}, s.leave(w, err)
	}
}

// ended returns the error of a wait that has ended, nil if it has not:
// ctx.Err() if done is closed, ErrWaitTooLong if the max-wait timer has
// fired. done and expired may be nil.
func ended(ctx context.Context, done <-chan struct{}, expired <-chan time.Time) error {
	select {
	case <-done:
		return ctx.Err()
	default:
	}
	select {
	case <-expired:
		return ErrWaitTooLong
	default:
	}
	return nil
}

// leave takes w out of the queue after its context ended or its wait grew
// too long. If w was already served (granted or failed) it waits for the
// wake-up, gives back a grant, and returns err.
func (s *Weighted) leave(w *waiter, err error) error {
	s.mu.Lock()
	if w.Served {
		s.mu.Unlock()
		<-w.Ready // sent just after the waker unlocked
		return s.handBack(w, err)
	}
	s.countLeft(err)
	wasHead := s.head == w
	s.unlink(w)
	var wake *waiter
	if wasHead {
		wake = s.grantLocked()
	} else {
		s.settleLocked()
	}
	s.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	return err
}

// handBack ends the wait of w, a served waiter whose wake-up has been
// received, after its wait ended (err: the context's error or
// ErrWaitTooLong). A waiter failed by Close or a shrink returns that error.
// A grant is taken back as if w had left the queue before it: the permits
// and the token return without a release (the permit never reached the
// caller, so the grant counts in neither Acquired, Released nor Waited,
// only in Cancelled or TimedOut), and the waiters behind are served.
func (s *Weighted) handBack(w *waiter, err error) error {
	if werr := w.Err; werr != nil {
		s.wcache.Put(w)
		return werr
	}
	s.mu.Lock()
	s.countLeft(err)
	s.grantedWait--
	if t := w.Tok; t.Slot >= 0 {
		// An inline token: its bit and the permits go back to the word
		// at once, as Permit.Release would, but at the same generation.
		s.state.Add(uint64(w.N)<<availShift | 1<<(uint(t.Slot)&63))
	} else {
		s.spare = append(s.spare, t)
		s.spareOut--
		s.state.Add(uint64(w.N) << availShift)
	}
	wake := s.grantLocked()
	s.mu.Unlock()
	s.wcache.Put(w)
	waitq.WakeAll(wake)
	return err
}

func (s *Weighted) countLeft(err error) {
	if err == ErrWaitTooLong {
		s.timedOut++
	} else {
		s.cancelled++
	}
}

func (s *Weighted) reject() {
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
}

// owner is the permit.Owner of a semaphore's tokens. It is a distinct,
// unexported type, so that the methods Permit.Release calls are out of
// users' reach: called directly, they would give back permits still held.
type owner Weighted

// ReleaseToken gives back n permits held through a spare token (inline
// tokens go back through their state word, see WakeAfterRelease). It is
// called by Permit.Release, once per grant.
func (o *owner) ReleaseToken(t *permit.Token, n int64) {
	s := (*Weighted)(o)
	s.mu.Lock()
	s.spare = append(s.spare, t)
	s.spareOut--
	s.spareFreed++
	s.state.Add(uint64(n) << availShift)
	wake := s.grantLocked()
	s.mu.Unlock()
	waitq.WakeAll(wake)
}

// WakeAfterRelease serves the waiters after Permit.Release returned an
// inline token and its permits to the state word with one atomic add that
// found the slow flag set (the add needs no lock, see grantLocked). It is
// called by Permit.Release.
func (o *owner) WakeAfterRelease() {
	s := (*Weighted)(o)
	s.mu.Lock()
	wake := s.grantLocked()
	s.mu.Unlock()
	waitq.WakeAll(wake)
}

// CountDoubleRelease counts a Release of a permit already released. It is
// called by Permit.Release.
func (o *owner) CountDoubleRelease(*permit.Token) { o.doubleRel.Add(1) }

// grantLocked serves the waiters at the head of the queue, in order, for as
// long as their requests fit, and clears the slow flag when the queue is
// empty. It returns the served waiters, linked through wnext, for the
// caller to wake after unlocking mu.
//
// Releases add to state with one atomic add, with or without mu: every
// other change of the word is a compare-and-swap that retries, or an add,
// so no update is lost. A release that finds the slow flag set (or that
// races with the flag being set) takes mu and runs grantLocked, so no
// waiter misses permits given back.
func (s *Weighted) grantLocked() *waiter {
	var chain waitq.Chain
	for w := s.head; w != nil; w = s.head {
		st := s.state.Load()
		if avail(st) < w.N {
			break
		}
		t, ok := s.claimLocked(st, w.N)
		if !ok {
			continue
		}
		s.unlink(w)
		s.grantedWait++
		w.Tok, w.Gen, w.Served = t, t.Gen(), true
		chain.Add(w)
	}
	s.settleLocked()
	return chain.First()
}

// settleLocked clears the slow flag once the queue is empty (unless
// closed). It must be called with mu held.
func (s *Weighted) settleLocked() {
	if s.head != nil || s.closed {
		return
	}
	for {
		st := s.state.Load()
		if st&flagSlow == 0 || s.state.CompareAndSwap(st, st&^flagSlow) {
			return
		}
	}
}

// failLocked serves every waiter for which fail returns an error with
// that error, and returns them linked for waking.
func (s *Weighted) failLocked(fail func(*waiter) error) *waiter {
	var chain waitq.Chain
	for w := s.head; w != nil; {
		next := w.Next
		if err := fail(w); err != nil {
			s.unlink(w)
			w.Err, w.Served = err, true
			chain.Add(w)
		}
		w = next
	}
	return chain.First()
}

// SetCapacity changes the capacity to n. Growing makes the new permits
// available and serves waiters in FIFO order; shrinking takes permits away
// from what is available, which may go negative until holders release:
// nothing is taken from holders. Waiters whose request is now above the
// capacity fail with [ErrTooHeavy].
//
// SetCapacity panics if n is negative or above [MaxCapacity].
func (s *Weighted) SetCapacity(n int64) {
	if n < 0 || n > MaxCapacity {
		panic(fmt.Sprintf("semaphore: capacity %d out of range [0, %d]", n, int64(MaxCapacity)))
	}
	s.mu.Lock()
	delta := n - s.capacity.Load()
	s.capacity.Store(n)
	s.state.Add(uint64(delta) << availShift)
	failed := s.failLocked(func(w *waiter) error {
		if w.N > n {
			return ErrTooHeavy
		}
		return nil
	})
	granted := s.grantLocked()
	s.mu.Unlock()
	waitq.WakeAll(failed)
	waitq.WakeAll(granted)
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
	failed := s.failLocked(func(*waiter) error { return ErrClosed })
	s.mu.Unlock()
	waitq.WakeAll(failed)
}

// Capacity returns the current capacity, as Stats().Capacity does, with
// one atomic load: no lock, so it is cheap enough for a hot path (a lane
// of package lanequeue reads it on every AcquireAll once its semaphore
// may be resized).
func (s *Weighted) Capacity() int64 { return s.capacity.Load() }

// Stats is a snapshot of a semaphore.
type Stats struct {
	Capacity      int64 // current capacity
	Available     int64 // permits free now (negative after a shrink, until holders release)
	Held          int64 // weight of the permits out: Capacity - Available
	Waiters       int   // callers waiting
	WaitingWeight int64 // total weight they wait for (math.MaxInt64 if more)
	Closed        bool

	// Counters since New. A grant taken back because the waiter's context
	// or max wait ended first counts only in Cancelled or TimedOut, as if
	// the waiter had left before the grant; waiters failed by Close or by
	// a shrink below their weight count in none of them.
	Acquired       uint64 // grants, with or without waiting
	Released       uint64 // first releases of granted permits
	Waited         uint64 // grants that had to wait in the queue
	Cancelled      uint64 // acquires that ended with a context error
	TimedOut       uint64 // acquires that ended with ErrWaitTooLong
	Rejected       uint64 // acquires refused at once: invalid weight, too heavy, closed, queue full
	DoubleReleases uint64 // Release calls on permits already released
}

// Stats returns a snapshot of the semaphore. The capacity, available count,
// waiters and the counters of the slow path are read together under the
// lock. Grants and releases on the lock-free fast path are counted through
// the tokens' generations: under concurrent use, a release in flight may be
// seen as released and still held for an instant; once the calls have
// returned, Acquired - Released is the number of permits out.
func (s *Weighted) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	var released uint64
	for i := range s.gens {
		released += s.gens[i].Uint64.Load()
	}
	released += s.spareFreed
	out := uint64(inlineTokens-bits.OnesCount64(st&tokenMask)) + uint64(s.spareOut)
	c := s.capacity.Load()
	a := avail(st)
	return Stats{
		Capacity:       c,
		Available:      a,
		Held:           c - a,
		Waiters:        s.waiters,
		WaitingWeight:  s.waitingWeight(),
		Closed:         s.closed,
		Acquired:       released + out,
		Released:       released,
		Waited:         s.grantedWait,
		Cancelled:      s.cancelled,
		TimedOut:       s.timedOut,
		Rejected:       s.rejected,
		DoubleReleases: s.doubleRel.Load(),
	}
}

// waiter is one caller in a queue (see package waitq for the protocol).
type waiter = waitq.Waiter

// waitingWeight returns the total weight of the waiters, or math.MaxInt64
// if it is more. It must be called with mu held.
func (s *Weighted) waitingWeight() int64 {
	if s.waitHi != 0 || s.waitWeight > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s.waitWeight)
}

func (s *Weighted) push(w *waiter) {
	w.Prev = s.tail
	if s.tail == nil {
		s.head = w
	} else {
		s.tail.Next = w
	}
	s.tail = w
	s.waiters++
	var carry uint64
	s.waitWeight, carry = bits.Add64(s.waitWeight, uint64(w.N), 0)
	s.waitHi += carry
}

func (s *Weighted) unlink(w *waiter) {
	if w.Prev == nil {
		s.head = w.Next
	} else {
		w.Prev.Next = w.Next
	}
	if w.Next == nil {
		s.tail = w.Prev
	} else {
		w.Next.Prev = w.Prev
	}
	w.Next, w.Prev = nil, nil
	s.waiters--
	var borrow uint64
	s.waitWeight, borrow = bits.Sub64(s.waitWeight, uint64(w.N), 0)
	s.waitHi -= borrow
}
