package lanequeue

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/semaphore"
)

// NewTokenLane returns a [Rate] lane, for [Queue.Add], of perMinute
// tokens in any minute, as providers count them; a call takes its
// estimate ([LaneWeight]) and its ticket settles the actual count after
// ([Ticket.Settle]). A perMinute out of [1, semaphore.MaxCapacity] makes a
// lane that Add refuses. See docs/api-details.md.
func NewTokenLane[K comparable](perMinute int64) Lane[K] {
	if perMinute < 1 || perMinute > semaphore.MaxCapacity {
		return &badLane[K]{kind: Rate, err: fmt.Errorf("%d tokens a minute: must be in [1, %d]: %w", perMinute, int64(semaphore.MaxCapacity), errInvalidCapacity)}
	}
	return newTokenLane[K](perMinute, nil, nil)
}

// window is how many one-second slots a token lane counts: a token
// charged at any instant of second s leaves the count when second s+window
// begins. The lane reads the queue's coarse clock, which lags the time by
// its resolution (a millisecond, more on a loaded machine): with 62 slots
// a token leaves at least a minute after it was charged for any lag up to
// a second, so the tokens charged in any minute never pass the budget (the
// count is up to two seconds too long, never too short).
const window = 62

// tokenLane is NewTokenLane's lane: the tokens charged in each of the last
// window seconds, under a mutex, and their total. The head of the line,
// the holder of the one value in head, waits for room; the others wait for
// head, which Go's channels hand over in the order they asked. The head
// posts the tokens it waits for (headN), so that a call joining behind it
// knows the least it will wait, and fails at once if its deadline comes
// first.
type tokenLane[K comparable] struct {
	max int64 // the budget of a minute
	// filled is the second of the last fill (see fill): a refund of a
	// grant charged in it or before is dropped. math.MinInt64: none.
	// Written under mu, rarely; read without it by settle's refunds, away
	// from the words that settles and grants write.
	filled atomic.Int64
	// The time, in nanoseconds: the clocks of the queue that registered
	// the lane (its coarse clock: one atomic load, where the system
	// clock's reading costs 70ns on a virtual machine; or a test's clock),
	// set once by bind; nil before, the system clock.
	clocks atomic.Pointer[tokenClocks]
	head   chan struct{} // holds one value while nobody is the head
	kick   chan struct{} // a settle's refund wakes the head
	once   sync.Once
	done   chan struct{}

	mu    sync.Mutex
	slots [window]int64 // tokens charged in second s, at s % window
	total int64         // their sum: may pass max (a debt)
	// headN is the tokens the head of the line waits for room for, 0 when
	// none waits: posted by the head once it waits (post), taken down by
	// its grant (take) or its leaving, read by the calls that join behind
	// it (see behind).
	headN int64
	// headDL is the head's deadline, if headHasDL: a head whose tokens
	// come after it leaves, and behind does not count them. Under mu.
	headDL    time.Time
	headHasDL bool
	// now is the second of the newest slot (seconds of nanos): written
	// under mu, read without it by settle's fast path.
	now atomic.Int64
	// pend is what settles charged to one second without mu, not yet in
	// the slots: see settle. Zero: nothing.
	pend atomic.Uint64

	closed                      atomic.Bool
	waiters                     atomic.Int64
	acquired, waited, cancelled atomic.Uint64
	rejected, failed            atomic.Uint64
}

// tokenClocks is the clocks a token lane reads: clk if not nil, else coarse.
type tokenClocks struct {
	clk    clock.Clock
	coarse *coarse.Clock
}

func newTokenLane[K comparable](perMinute int64, clk clock.Clock, cc *coarse.Clock) *tokenLane[K] {
	l := &tokenLane[K]{
		max:  perMinute,
		head: make(chan struct{}, 1),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	l.filled.Store(math.MinInt64)
	if clk != nil || cc != nil {
		l.clocks.Store(&tokenClocks{clk: clk, coarse: cc})
	}
	l.now.Store(l.nanos() / int64(time.Second))
	l.head <- struct{}{}
	return l
}

// bind gives the lane the clocks of the queue that registers it, if it
// has none yet and has charged nothing: a lane registered or used
// already keeps the clock its count is in.
func (l *tokenLane[K]) bind(clk clock.Clock, cc *coarse.Clock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total != 0 || l.acquired.Load() != 0 || !l.clocks.CompareAndSwap(nil, &tokenClocks{clk: clk, coarse: cc}) {
		return
	}
	l.now.Store(l.nanos() / int64(time.Second))
}

// nanos reads the lane's clock.
func (l *tokenLane[K]) nanos() int64 {
	c := l.clocks.Load()
	switch {
	case c == nil:
		return time.Now().UnixNano()
	case c.clk != nil:
		return c.clk.Now().UnixNano()
	}
	return c.coarse.Read()
}

// testClock is the test's clock the lane reads, or nil.
func (l *tokenLane[K]) testClock() clock.Clock {
	if c := l.clocks.Load(); c != nil {
		return c.clk
	}
	return nil
}

// until returns the time left until t on the lane's clock.
func (l *tokenLane[K]) until(t time.Time) time.Duration {
	if c := l.testClock(); c != nil {
		return t.Sub(c.Now())
	}
	return time.Until(t)
}

// timer returns a timer of the lane's clock.
func (l *tokenLane[K]) timer(d time.Duration) clock.Timer {
	if c := l.testClock(); c != nil {
		return c.NewTimer(d)
	}
	return clock.Real{}.NewTimer(d)
}

// slot is the index of second s in the slots, for any s (a test's clock
// may read before 1970, and the seconds before the coarse clock's start
// are negative): each of the window's seconds has its own.
func slot(s int64) int64 { return (s%window + window) % window }

// advance moves the count to second now, dropping the slots that left
// the window; l.mu is held.
func (l *tokenLane[K]) advance(now int64) {
	last := l.now.Load()
	if now <= last {
		return
	}
	if now-last >= window {
		l.slots, l.total = [window]int64{}, 0
	} else {
		for s := last + 1; s <= now; s++ {
			l.total -= l.slots[slot(s)]
			l.slots[slot(s)] = 0
		}
	}
	l.now.Store(now)
}

// sync brings the count to second now with what settle left in pend;
// l.mu is held. Everything that reads the count calls it first.
func (l *tokenLane[K]) sync(now int64) {
	if w := l.pend.Load(); w != 0 {
		l.fold(l.pend.Swap(0))
	}
	l.advance(now)
}

// fold adds what settle left in pend, word w, to the count; l.mu is held.
// The word holds a second's low 32 bits: settle leaves one only within a
// window of the count's second (see settle), so the nearest second to it
// with those bits is the one.
func (l *tokenLane[K]) fold(w uint64) {
	last := l.now.Load()
	s := last + int64(int32(uint32(w>>32)-uint32(last)))
	delta := int64(int32(uint32(w)))
	if delta > 0 && s > last {
		l.advance(s) // a debt read the clock ahead of the count
	}
	l.charge(s, delta)
}

// charge charges delta more tokens to second s, if it is still in the
// window of the count's second: a debt (delta > 0) adds to it; a refund
// (delta < 0) takes from it, never more than it holds, so that the count
// never falls below what it would have been had the grant asked for the
// actual count, and nothing of a second a fill covers. l.mu is held.
func (l *tokenLane[K]) charge(s, delta int64) {
	if s <= l.now.Load()-window {
		return // s has left the window already
	}
	if delta < 0 {
		if s <= l.filled.Load() {
			return // the fill stands for the provider's count of that grant (see settle)
		}
		delta = -min(-delta, l.slots[slot(s)])
	}
	l.slots[slot(s)] += delta
	l.total += delta
}

// take charges n tokens now, if the window has room for them, and
// returns the second they were charged in; otherwise it says how long
// until enough leave the window. A grant takes down the tokens the head
// posted (see post).
func (l *tokenLane[K]) take(n int64) (sec int64, wait time.Duration, ok bool) {
	t := l.nanos()
	now := t / int64(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(now)
	if l.max-l.total >= n {
		l.slots[slot(now)] += n
		l.total += n
		l.headN = 0
		return now, 0, true
	}
	return 0, l.room(n, t, now), false
}

// post sets the tokens the head waits for, n, and its context's deadline
// (dl, if hasDeadline), for the calls that join behind it (see behind); 0
// takes the post down.
func (l *tokenLane[K]) post(n int64, dl time.Time, hasDeadline bool) {
	l.mu.Lock()
	l.headN = n
	l.headDL, l.headHasDL = dl, hasDeadline
	l.mu.Unlock()
}

// behind returns how long a call of n tokens that joins the back of the
// line waits at least: until the window has room for the head's tokens
// and its own together, the head's granted first. It is 0 when that room
// is there now, or when no head waits for room. A head whose own tokens
// now come after its deadline (a settle's debt or a fill since it posted
// can put them there) leaves when it looks again, so its tokens are not
// counted: the call is judged by its own.
func (l *tokenLane[K]) behind(n int64) time.Duration {
	t := l.nanos()
	now := t / int64(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(now)
	if l.headN == 0 || l.max-l.total >= l.headN+n {
		return 0
	}
	if l.headHasDL && l.max-l.total < l.headN && l.until(l.headDL) < l.room(l.headN, t, now) {
		// The head will leave: the call is judged by its own tokens.
		if l.max-l.total >= n {
			return 0
		}
		return l.room(n, t, now)
	}
	return l.room(l.headN+n, t, now)
}

// room returns how long until the window has room for n more tokens,
// which it has not now, at time t of second now; l.mu is held and the
// count synced. The oldest slots leave first: the one whose leaving makes
// room says when. For n above the budget (the head's tokens and another
// call's together), it is when the whole window has left: the later call
// waits at least that long, since it cannot be granted while the head's
// grant, made no earlier than now, is in the window.
func (l *tokenLane[K]) room(n, t, now int64) time.Duration {
	need := n - (l.max - l.total)
	for s := now - window + 1; s <= now; s++ {
		need -= l.slots[slot(s)]
		if need <= 0 {
			return time.Duration((s+window)*int64(time.Second) - t)
		}
	}
	return time.Duration((now+window)*int64(time.Second) - t) // a debt beyond the window, or n above the budget
}

// used returns the tokens the window counts now, settles included.
func (l *tokenLane[K]) used() int64 {
	now := l.nanos() / int64(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(now)
	return l.total
}

// fill charges the lane up to its budget in the newest second, the
// answer to a provider's refusal of its tokens (Queue.Exhaust): the provider's count
// of its window is full, whatever the lane's says. The lane's count falls
// short of the provider's by what the calls in flight use beyond their
// estimates, which it learns only when they settle; left short, it would
// let a call through as soon as a pause ends, and the provider would
// refuse again within the same window. Filled, it admits only as its
// older seconds leave the window, as the provider's do, until the fill
// leaves it too. A refund of a grant charged in the fill's second or
// before is dropped (charge): the provider's count, which the fill stands
// for, holds that grant's actual use already (none, for the refused call
// that a caller settles to 0 after the fill), and giving it back too
// would count it twice. Nothing is granted in the fill's second after
// it: the count is full until a second leaves.
func (l *tokenLane[K]) fill() {
	now := l.nanos() / int64(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(now)
	now = l.now.Load() // a reader may have moved the count ahead of this clock reading
	if d := l.max - l.total; d > 0 {
		l.slots[slot(now)] += d
		l.total += d
	}
	l.filled.Store(now)
}

// restamp moves a grant of n tokens charged in second sec to the
// count's current second, the time the call it was for is let through
// (see restampTail), and returns that second; it fails, changing
// nothing, if sec has left the window (the grant counts nothing any
// more: the call must take the lane again). A move never passes the
// budget: the current second's window holds sec already, so its total
// stays; every later window holds the current second, so it holds the
// grant whether or not it held sec; only windows that ended already lose
// it. It grants nothing, so it takes no place in the lane's line. After a
// fill (see fill) the move stands too: it only lengthens the time the
// grant counts, and a refund of it from its new second is then dropped
// only if the fill is of that second.
func (l *tokenLane[K]) restamp(sec, n int64) (int64, bool) {
	now := l.nanos() / int64(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sync(now)
	now = l.now.Load() // a reader may have moved the count ahead of this clock reading
	switch {
	case sec <= now-window:
		return 0, false
	case sec >= now:
		return sec, true
	}
	moved := min(n, l.slots[slot(sec)]) // never more than the second holds: the total stays
	l.slots[slot(sec)] -= moved
	l.slots[slot(now)] += moved
	return now, true
}

// settle charges delta more tokens for a grant charged in second sec: a
// debt (delta > 0) in the current second, which a provider counts now; a
// refund (delta < 0) from sec's own slot (see charge).
//
// It takes no lock when it can: it adds delta to pend, one word holding a
// second and the sum charged to it, with one compare-and-swap, and the
// next take (or settle that cannot) folds the word into the count under
// mu before it reads it. So a grant sees every settle made before it, as
// it would under the lock; a settle's only ordering is with the grants,
// and a refund that waits in pend only delays the grants it makes room
// for until the head looks again (it is woken). The lock is taken when
// pend holds another second or settles of the other sign (see add), when
// the sum would not fit its 32 bits, or
// when the count's second is a window or more behind the clock: the word
// holds the second's low 32 bits, and a word is left only for a second
// within two windows of the count's, which the fold then finds again.
// BenchmarkSettle has the figures (docs/benchmarks-policies.md).
func (l *tokenLane[K]) settle(sec, delta int64) {
	if delta == 0 {
		return
	}
	now := l.nanos() / int64(time.Second)
	if delta > 0 {
		sec = now
	} else if sec <= now-window {
		return // that grant's tokens have left the window already
	} else if sec <= l.filled.Load() {
		return // a fill covers that grant (see fill)
	}
	l.add(sec, delta, now)
}

// add is settle's charge of delta to second sec, at clock second now,
// once settle has found it due. A refund that read filled before a fill
// can reach here after it: charge then drops it, which is right only if
// pend's word never holds a refund and a debt together (their sum would
// drop the debt with the refund, or let part of the refund through). So a
// word holds settles of one sign, and one of the other sign takes the
// lock (TestSettleRefundAfterAFillKeepsTheDebt).
func (l *tokenLane[K]) add(sec, delta, now int64) {
	if now-l.now.Load() < window {
		for {
			w := l.pend.Load()
			sum := delta
			if w != 0 {
				if uint32(w>>32) != uint32(sec) {
					break
				}
				held := int64(int32(uint32(w)))
				if (held < 0) != (delta < 0) {
					break
				}
				sum += held
			}
			if sum != int64(int32(sum)) {
				break
			}
			if l.pend.CompareAndSwap(w, uint64(uint32(sec))<<32|uint64(uint32(int32(sum)))) {
				l.settled(delta)
				return
			}
		}
	}
	l.mu.Lock()
	l.sync(now)
	l.charge(sec, delta)
	l.mu.Unlock()
	l.settled(delta)
}

// settled wakes the head of the line after a refund, which may have made
// the room it waits for.
func (l *tokenLane[K]) settled(delta int64) {
	if delta < 0 && l.waiters.Load() != 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *tokenLane[K]) Kind() Kind       { return Rate }
func (l *tokenLane[K]) MaxWeight() int64 { return l.max }

// refusal is the error of a call for n tokens that the lane refuses at
// once, or nil: a queue checks weights before it calls a lane, but a lane
// called directly must not take a weight of 0 (a grant of nothing) or
// below (which would lower the minute's total).
func (l *tokenLane[K]) refusal(n int64) error {
	switch {
	case l.closed.Load():
		return semaphore.ErrClosed
	case n <= 0:
		return semaphore.ErrInvalidWeight
	case n > l.max:
		return semaphore.ErrTooHeavy
	}
	return nil
}

func (l *tokenLane[K]) Acquire(ctx context.Context, _ K, n int64) (semaphore.Permit, error) {
	if err := l.refusal(n); err != nil {
		l.rejected.Add(1)
		return semaphore.Permit{}, err
	}
	if l.waiters.Add(1) > 1 {
		// Others are in line: one whose deadline comes before the head's
		// tokens and its own can be granted fails now, not at the end of
		// its wait. The time left is read before the wait is worked out,
		// so that a clock that moves between the two readings can only
		// make the call wait, never refuse it early.
		if dl, has := ctx.Deadline(); has {
			left := l.until(dl)
			if d := l.behind(n); d > 0 && left < d {
				l.waiters.Add(-1)
				l.cancelled.Add(1)
				return semaphore.Permit{}, &tokensLate{after: d}
			}
		}
	}
	defer l.waiters.Add(-1)
	select {
	case <-l.head:
	case <-ctx.Done():
		l.cancelled.Add(1)
		return semaphore.Permit{}, ctx.Err()
	case <-l.done:
		l.failed.Add(1)
		return semaphore.Permit{}, semaphore.ErrClosed
	}
	posted := false
	defer func() {
		if posted {
			l.post(0, time.Time{}, false) // the head leaves without its tokens (a grant took the post down)
		}
		l.head <- struct{}{}
	}()
	dl, hasDeadline := ctx.Deadline()
	waited := false
	for {
		if err := ctx.Err(); err != nil {
			l.cancelled.Add(1)
			return semaphore.Permit{}, err
		}
		var left time.Duration
		if hasDeadline {
			left = l.until(dl) // before take's reading, as above
		}
		sec, d, ok := l.take(n)
		if ok {
			posted = false
			l.acquired.Add(1)
			if waited {
				l.waited.Add(1)
			}
			return semaphore.Permit(permit.Mark(uint64(sec), n)), nil
		}
		if hasDeadline && left < d {
			l.cancelled.Add(1)
			return semaphore.Permit{}, &tokensLate{after: d}
		}
		if !posted {
			// Only once the head stays: a call behind must not be judged
			// by the tokens of a head that leaves at once.
			l.post(n, dl, hasDeadline)
			posted = true
		}
		waited = true
		t := l.timer(d)
		select {
		case <-t.C():
		case <-l.kick:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
		case <-l.done:
			t.Stop()
			l.failed.Add(1)
			return semaphore.Permit{}, semaphore.ErrClosed
		}
	}
}

// tokensLate is a token lane's refusal of a call whose tokens would come
// after its deadline: it matches context.DeadlineExceeded, and says when
// by RetryIn, which a queue's LaneError takes as its RetryAfter (and
// prints).
type tokensLate struct{ after time.Duration }

func (e *tokensLate) Error() string { return errTokensLate.Error() }

func (e *tokensLate) Unwrap() error { return context.DeadlineExceeded }

// RetryIn returns when the tokens come.
func (e *tokensLate) RetryIn() time.Duration { return e.after }

func (l *tokenLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	if l.refusal(n) != nil {
		return semaphore.Permit{}, false
	}
	select {
	case <-l.head:
	default:
		return semaphore.Permit{}, false
	}
	sec, _, ok := l.take(n)
	l.head <- struct{}{}
	if !ok {
		return semaphore.Permit{}, false
	}
	l.acquired.Add(1)
	return semaphore.Permit(permit.Mark(uint64(sec), n)), true
}

// Stats reports the budget as the capacity, and the tokens charged in the
// window as Used (see LaneStats.Used).
func (l *tokenLane[K]) Stats() LaneStats {
	st := LaneStats{Kind: Rate, Capacity: l.max, Used: l.used(), Waiters: int(l.waiters.Load()), Closed: l.closed.Load()}
	st.Acquired = l.acquired.Load()
	st.Waited = l.waited.Load()
	st.Cancelled = l.cancelled.Load()
	st.Rejected = l.rejected.Load()
	st.Failed = l.failed.Load()
	return st
}

func (l *tokenLane[K]) Close() {
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.done)
	})
}

// Settle charges the ticket's token lane the tokens the call used in all
// so far: a debt later calls wait out, or a refund within the budget. On a
// lane of NewTokenLane it allocates nothing; on a fleet's
// (redislane.AsRateLane) it is one call to Redis, bounded as that lane's
// Charge.Settle is, and its error is that call's.
func (t *Ticket[K]) Settle(lane string, actual int64) error {
	if actual < 0 || actual > semaphore.MaxCapacity {
		return errSettleNegative
	}
	r := t.lock()
	if r == nil {
		return errSettleReleased
	}
	hs := r.g.held()
	for i := range hs {
		h := &hs[i]
		if h.e.name != lane {
			continue
		}
		tl, ok := h.e.lane.(*tokenLane[K])
		if !ok {
			ps, ok := h.e.lane.(permitSettler)
			p := h.p
			r.home.mu.Unlock()
			if !ok {
				return errSettleNotTokens
			}
			return ps.SettlePermit(p, actual)
		}
		delta, sec := actual-h.n, int64(permit.MarkOf(permit.Permit(h.p)))
		h.n = actual
		r.home.mu.Unlock()
		tl.settle(sec, delta)
		return nil
	}
	r.home.mu.Unlock()
	return errSettleUnknown
}

// Settle's refusals: static, so that they allocate nothing.
var (
	errSettleNegative  = fmt.Errorf("lanequeue: Settle: a count below 0 or above semaphore.MaxCapacity: %w", semaphore.ErrInvalidWeight)
	errSettleReleased  = fmt.Errorf("lanequeue: Settle: the ticket is released: %w", semaphore.ErrClosed)
	errSettleNotTokens = fmt.Errorf("lanequeue: Settle: not a lane of tokens (NewTokenLane, redislane.AsRateLane): %w", semaphore.ErrInvalidConfig)
	errSettleUnknown   = fmt.Errorf("lanequeue: Settle: the ticket holds no such lane: %w", semaphore.ErrInvalidConfig)
)

// undoTokens gives back what the token lanes among hs[ext] charged a call
// that then failed (a later lane refused it, or its context ended): it
// ran nowhere, so it used nothing. A lane of another package settles to 0
// (for redislane's, one call to Redis, bounded by that lane).
func undoTokens[K comparable](hs []held[K], ext []int) {
	for _, i := range ext {
		h := &hs[i]
		if h.p == (semaphore.Permit{}) {
			continue
		}
		switch l := h.e.lane.(type) {
		case *tokenLane[K]:
			l.settle(int64(permit.MarkOf(permit.Permit(h.p))), -h.n)
		case permitSettler:
			_ = l.SettlePermit(h.p, 0) // its failure leaves the estimate charged: never over the budget
		default:
			continue
		}
		h.p = semaphore.Permit{}
	}
}

// restampHeld moves the charge of h, a token lane's grant, to now
// (tokenLane.restamp, or permitRestamper for another package's lane), and
// reports false if the charge has left the lane's window, changing
// nothing. A lane that cannot move its charges keeps them where they are.
func restampHeld[K comparable](ctx context.Context, h *held[K]) bool {
	switch l := h.e.lane.(type) {
	case *tokenLane[K]:
		sec, ok := l.restamp(int64(permit.MarkOf(permit.Permit(h.p))), h.n)
		if ok {
			h.p = semaphore.Permit(permit.Mark(uint64(sec), h.n))
		}
		return ok
	case permitRestamper:
		p, ok := l.RestampPermit(ctx, h.p)
		if ok {
			h.p = p
		}
		return ok
	}
	return true
}

// permitRestamper is a rate lane of another package that can move a
// charge it made to now, without passing its budget and without waiting
// (redislane.AsRateLane): the rate tail moves the charges a call took
// before a wait on another lane to the end of that wait (restampTail).
// RestampPermit returns the permit of the moved charge, or false when the
// charge has left the lane's window (it counts nothing; the call takes
// the lane again). A failure to reach the lane's store keeps the charge
// where it was and returns p, true: that charge still counts, from its
// old time.
type permitRestamper interface {
	RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool)
}

// permitSettler is a rate lane of another package whose grants are
// charged an estimate and settled to the actual count after the call, as
// a token lane's are (redislane.AsRateLane): Ticket.Settle passes it the
// permit its Acquire returned and the count, and a call that failed after
// the lane charged it passes 0.
func init() {
	call.Settles = func(q any, lane string) bool {
		s, ok := q.(interface{ settles(string) bool })
		return ok && s.settles(lane)
	}
}

// settles reports whether Ticket.Settle can settle lane (see call.Settles).
func (q *Queue[K]) settles(lane string) bool {
	ref, ok := q.tbl().byName[lane]
	if !ok {
		return false
	}
	switch ref.e.lane.(type) {
	case *tokenLane[K], permitSettler:
		return true
	}
	return false
}

type permitSettler interface {
	SettlePermit(p semaphore.Permit, actual int64) error
}
