package lanequeue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/fastctx"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// NewGlobalLane returns a [Global] lane over s: every key shares its
// capacity. The lane's Close closes s.
//
// Use it to share one semaphore between a queue and code that acquires it
// directly, or to watch the semaphore's own [semaphore.Stats].
// [Queue.AddLane] builds the semaphore itself ([Queue.GlobalSemaphore]
// returns it).
func NewGlobalLane[K comparable](s *semaphore.Weighted) Lane[K] {
	if s == nil {
		panic("lanequeue: nil semaphore")
	}
	l := &globalLane[K]{s: s}
	l.capacity.Store(-1)
	return l
}

// globalLane adapts a semaphore.Weighted. Its methods are thin: the
// semaphore does the work and keeps the counters.
type globalLane[K comparable] struct {
	s *semaphore.Weighted
	// capacity is the semaphore's fixed capacity when the lane made it
	// (AddLane: nobody else can change it), or -1 for a semaphore from
	// outside, whose capacity is read from its Stats each time (it may be
	// changed by SetCapacity). Queue.GlobalSemaphore, which hands the
	// semaphore out, sets it to -1 for good.
	capacity atomic.Int64
}

func (l *globalLane[K]) Kind() Kind { return Global }

func (l *globalLane[K]) MaxWeight() int64 {
	if c := l.capacity.Load(); c >= 0 {
		return c
	}
	return l.s.Stats().Capacity
}

func (l *globalLane[K]) Acquire(ctx context.Context, _ K, n int64) (semaphore.Permit, error) {
	return l.s.Acquire(ctx, n)
}

func (l *globalLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	return l.s.TryAcquire(n)
}

func (l *globalLane[K]) Stats() LaneStats {
	st := l.s.Stats()
	return LaneStats{
		Kind:      Global,
		Capacity:  st.Capacity,
		Held:      st.Held,
		Waiters:   st.Waiters,
		Acquired:  st.Acquired,
		Released:  st.Released,
		Cancelled: st.Cancelled + st.TimedOut,
		Rejected:  st.Rejected,
	}
}

func (l *globalLane[K]) Close() { l.s.Close() }

// NewSessionLane returns a [Keyed] lane over s: each key has its own
// budget of s's per-key capacity (1 by default: one at a time per key, in
// arrival order). The lane's Close closes s.
//
// [Queue.AddSessionLane] builds the keyed semaphore itself
// ([Queue.KeyedSemaphore] returns it).
func NewSessionLane[K comparable](s *keyedsem.KeyedSemaphore[K]) Lane[K] {
	if s == nil {
		panic("lanequeue: nil keyed semaphore")
	}
	return &sessionLane[K]{s: s}
}

// sessionLane adapts a keyedsem.KeyedSemaphore.
type sessionLane[K comparable] struct {
	s *keyedsem.KeyedSemaphore[K]
}

func (l *sessionLane[K]) Kind() Kind       { return Keyed }
func (l *sessionLane[K]) MaxWeight() int64 { return l.s.PerKeyCapacity() }

func (l *sessionLane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	return l.s.AcquireN(ctx, key, n)
}

func (l *sessionLane[K]) TryAcquire(key K, n int64) (semaphore.Permit, bool) {
	return l.s.TryAcquireN(key, n)
}

func (l *sessionLane[K]) Stats() LaneStats {
	st := l.s.Stats()
	return LaneStats{
		Kind:      Keyed,
		Capacity:  l.s.PerKeyCapacity(),
		Held:      st.Held,
		Waiters:   st.Waiters,
		Keys:      st.Keys,
		Acquired:  st.Acquired,
		Released:  st.Released,
		Cancelled: st.Cancelled,
		Rejected:  st.Rejected,
	}
}

func (l *sessionLane[K]) Close() { l.s.Close() }

// NewRateLane returns a [Rate] lane over lim: a grant spends n tokens of
// lim and gives nothing back on release (its Permit is the zero Permit).
// The lane's MaxWeight is lim's burst.
//
// A rate lane waits for its tokens, rather than failing at once, unless the
// context's deadline comes before they would be available: then it fails
// at once with an error that wraps context.DeadlineExceeded, and spends
// nothing. A cancelled wait gives its tokens back (rate.Reservation's
// CancelAt). A context that has ended by the time the tokens are there
// wins over them (also when the wait's timer and the end come together):
// the tokens are given back and Acquire returns ctx.Err(). Close wakes the
// waiters with [ErrClosed].
//
// [Queue.AddRateLane] builds the limiter itself.
func NewRateLane[K comparable](lim *rate.Limiter) Lane[K] {
	if lim == nil {
		panic("lanequeue: nil rate.Limiter")
	}
	return newRateLane[K](lim, -1)
}

func newRateLane[K comparable](lim *rate.Limiter, burst int64) *rateLane[K] {
	return &rateLane[K]{lim: lim, burst: burst, closed: make(chan struct{})}
}

// rateLane takes tokens from a rate.Limiter through reservations, so that a
// wait that ends with an error, or a grant that AcquireAll must roll back,
// puts its tokens back.
type rateLane[K comparable] struct {
	lim *rate.Limiter
	// burst is the limiter's fixed burst when the lane made it (AddRateLane:
	// nobody else can change it), or -1 for a limiter from outside, whose
	// burst is asked each time (SetBurst may change it).
	burst int64
	// clk is the lane's time source; nil, as always outside this
	// package's tests, is the system clock. rate.Limiter is told the time
	// at each call, so a fake clock drives the limiter as well.
	clk clock.Clock

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	isClosed  atomic.Bool   // set by Close before closed is closed

	waiters   atomic.Int64
	acquired  atomic.Uint64
	cancelled atomic.Uint64
	rejected  atomic.Uint64
}

func (l *rateLane[K]) Kind() Kind { return Rate }

// now reads the lane's clock.
func (l *rateLane[K]) now() time.Time {
	if l.clk == nil {
		return time.Now()
	}
	return l.clk.Now()
}

// ratesNow reads the clock of the lanes of reqs (the first lane's: the
// lanes of one queue share one).
func ratesNow[K comparable](reqs []rateReq[K]) time.Time {
	if len(reqs) == 0 {
		return time.Now()
	}
	return reqs[0].l.now()
}

func (l *rateLane[K]) MaxWeight() int64 {
	if l.burst >= 0 {
		return l.burst
	}
	return int64(l.lim.Burst())
}

// Acquire spends n tokens, waiting until the limiter has them. See
// [NewRateLane].
func (l *rateLane[K]) Acquire(ctx context.Context, _ K, n int64) (semaphore.Permit, error) {
	if ctx == nil {
		panic("lanequeue: nil Context")
	}
	reqs := [1]rateReq[K]{{l: l, n: n}}
	if err := takeRates(ctx, reqs[:], l.closed); err != nil {
		return semaphore.Permit{}, err
	}
	commitRates(reqs[:])
	return semaphore.Permit{}, nil
}

// TryAcquire spends n tokens if the limiter has them now.
func (l *rateLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	if n <= 0 || n > l.MaxWeight() || l.isClosed.Load() {
		l.rejected.Add(1)
		return semaphore.Permit{}, false
	}
	if !l.lim.AllowN(l.now(), int(n)) {
		return semaphore.Permit{}, false
	}
	l.acquired.Add(1)
	return semaphore.Permit{}, true
}

// Stats reports the burst as the capacity; a rate lane holds nothing, so
// Held is 0. Acquired counts grants; Released stays 0.
func (l *rateLane[K]) Stats() LaneStats {
	return LaneStats{
		Kind:      Rate,
		Capacity:  l.MaxWeight(),
		Waiters:   int(l.waiters.Load()),
		Acquired:  l.acquired.Load(),
		Cancelled: l.cancelled.Load(),
		Rejected:  l.rejected.Load(),
	}
}

func (l *rateLane[K]) Close() {
	l.closeOnce.Do(func() {
		l.isClosed.Store(true)
		close(l.closed)
	})
}

// rateReq is one rate lane of a request, the tokens it takes there, and
// its reservation while it has one.
type rateReq[K comparable] struct {
	l   *rateLane[K]
	n   int64
	r   *rate.Reservation
	due time.Time // when r's tokens are there (r's time to act)
}

// errRateDeadline is wrapped in the error of a rate wait that could not
// end before the context's deadline.
var errRateDeadline = fmt.Errorf("lanequeue: rate tokens not available before the context deadline: %w", context.DeadlineExceeded)

// takeRates reserves the tokens of every lane of reqs at one instant and
// waits for the longest delay. On failure it gives every reservation back
// (cancelRates). On success the reservations stay in reqs: the caller keeps
// them with commitRates or, if a later lane fails, gives them back with
// cancelRates.
//
// done, if not nil, ends the wait with ErrClosed (a lane's or the queue's
// Close); a lane closed while the wait is for another lane's tokens is
// noticed when the wait ends.
//
// On failure it returns ctx.Err() (also when ctx had already ended), an
// error wrapping context.DeadlineExceeded (the tokens would come after the
// deadline: nothing is spent and the call does not wait), ErrClosed, or
// semaphore.ErrInvalidWeight / ErrTooHeavy.
func takeRates[K comparable](ctx context.Context, reqs []rateReq[K], done <-chan struct{}) error {
	var ctxDone <-chan struct{}
	if !fastctx.NeverDone(ctx) {
		ctxDone = ctx.Done()
		if ctxDone != nil {
			select {
			case <-ctxDone:
				for i := range reqs {
					reqs[i].l.cancelled.Add(1)
				}
				return ctx.Err()
			default:
			}
		}
	}
	for i := range reqs {
		q := &reqs[i]
		if err := q.l.check(q.n); err != nil {
			return err
		}
	}
	now := ratesNow(reqs)
	var delay time.Duration
	for i := range reqs {
		q := &reqs[i]
		r := q.l.lim.ReserveN(now, int(q.n))
		if !r.OK() { // the burst shrank below n since the check
			q.l.rejected.Add(1)
			cancelRates(reqs[:i], now)
			return fmt.Errorf("lanequeue: %d rate tokens above the burst: %w", q.n, semaphore.ErrTooHeavy)
		}
		d := r.DelayFrom(now)
		q.r, q.due = r, now.Add(d)
		delay = max(delay, d)
	}
	if delay > 0 {
		if err := waitRates(ctx, ctxDone, reqs, done, now, delay); err != nil {
			return err
		}
		for i := range reqs {
			if reqs[i].l.isClosed.Load() {
				cancelRates(reqs, ratesNow(reqs))
				for j := range reqs {
					reqs[j].l.rejected.Add(1)
				}
				return ErrClosed
			}
		}
	}
	// The tokens are there. If ctx ended meanwhile (before the
	// reservation, or while the timer and ctx were both ready, when the
	// select above picks either), the end of ctx wins: a cancellation
	// that came before the grant must not lose to it (go.dev/issue/63615).
	if ctxDone != nil && isDone(ctxDone) {
		cancelRates(reqs, ratesNow(reqs))
		for i := range reqs {
			reqs[i].l.cancelled.Add(1)
		}
		return ctx.Err()
	}
	return nil
}

// isDone reports whether done is closed, without waiting.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// ended reports whether ctx has ended: free for the contexts that never
// end, an atomic load (ctx.Err) for the standard ones.
func ended(ctx context.Context) bool {
	return !fastctx.NeverDone(ctx) && ctx.Err() != nil
}

// commitRates keeps the reservations of reqs: the tokens are spent.
func commitRates[K comparable](reqs []rateReq[K]) {
	for i := range reqs {
		reqs[i].l.acquired.Add(1)
		reqs[i].r = nil
	}
}

// tryRates takes the tokens of every lane of reqs if all are available now,
// and gives back those it took otherwise. On success the reservations stay
// in reqs, as with takeRates.
func tryRates[K comparable](reqs []rateReq[K]) bool {
	for i := range reqs {
		q := &reqs[i]
		if q.n <= 0 || q.n > q.l.MaxWeight() || q.l.isClosed.Load() {
			q.l.rejected.Add(1)
			return false
		}
	}
	now := ratesNow(reqs)
	// Look before reserving: a reservation that must wait, even if
	// cancelled at once, can leave the limiter's record of the latest
	// reservation in the future (rate.Limiter rounds through float64), and
	// then later cancellations give back fewer tokens than they should.
	for i := range reqs {
		if reqs[i].l.lim.TokensAt(now) < float64(reqs[i].n) {
			return false
		}
	}
	for i := range reqs {
		q := &reqs[i]
		r := q.l.lim.ReserveN(now, int(q.n))
		if !r.OK() || r.DelayFrom(now) > 0 { // another caller took the tokens since the look
			r.CancelAt(now)
			cancelRates(reqs[:i], now)
			return false
		}
		q.r, q.due = r, now
	}
	return true
}

// check refuses a request the lane can never grant, counting it.
func (l *rateLane[K]) check(n int64) error {
	switch {
	case n <= 0:
		l.rejected.Add(1)
		return semaphore.ErrInvalidWeight
	case l.isClosed.Load():
		l.rejected.Add(1)
		return ErrClosed
	case n > l.MaxWeight():
		l.rejected.Add(1)
		return fmt.Errorf("lanequeue: %d rate tokens above the burst: %w", n, semaphore.ErrTooHeavy)
	}
	return nil
}

// waitRates waits delay (from now) for the reservations of reqs, or until
// ctx or done ends the wait; then it gives the reservations back and
// returns the error.
func waitRates[K comparable](ctx context.Context, ctxDone <-chan struct{}, reqs []rateReq[K], done <-chan struct{}, now time.Time, delay time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && dl.Before(now.Add(delay)) {
		cancelRates(reqs, now)
		for i := range reqs {
			reqs[i].l.cancelled.Add(1)
		}
		return errRateDeadline
	}
	for i := range reqs {
		reqs[i].l.waiters.Add(1)
	}
	var (
		rt    *time.Timer // the system clock's
		ft    clock.Timer // a test clock's
		fired <-chan time.Time
	)
	if c := reqs[0].l.clk; c != nil {
		ft = c.NewTimer(delay)
		fired = ft.C()
	} else {
		rt = time.NewTimer(delay)
		fired = rt.C
	}
	var err error
	select {
	case <-fired:
		// ctx may have ended too: takeRates looks again.
	case <-ctxDone:
		err = ctx.Err()
	case <-done:
		err = ErrClosed
	}
	if rt != nil {
		rt.Stop()
	} else {
		ft.Stop()
	}
	for i := range reqs {
		reqs[i].l.waiters.Add(-1)
	}
	if err != nil {
		cancelRates(reqs, ratesNow(reqs))
		for i := range reqs {
			if err == ErrClosed {
				reqs[i].l.rejected.Add(1)
			} else {
				reqs[i].l.cancelled.Add(1)
			}
		}
	}
	return err
}

// cancelRates gives back the reservations of reqs, newest first, as of now
// or of each one's due time if that is earlier.
//
// rate.Reservation.CancelAt(t) gives nothing back for a reservation due
// before t: its tokens count as spent. A request that takes several rate
// lanes waits for the slowest, so the others are due (often at once) long
// before the request fails; cancelling them as of their due time gives
// their tokens back. The price: if others used the limiter between that
// due time and now, the limiter refills that stretch twice (rate.Limiter
// then moves its clock back), so it may grant up to rate x stretch extra
// tokens, never above its burst. With one rate lane a request is exact.
func cancelRates[K comparable](reqs []rateReq[K], now time.Time) {
	for i := len(reqs) - 1; i >= 0; i-- {
		q := &reqs[i]
		if q.r == nil {
			continue
		}
		at := now
		if q.due.Before(now) {
			at = q.due
		}
		q.r.CancelAt(at)
		q.r = nil
	}
}
