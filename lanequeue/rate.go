package lanequeue

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// NewRateLane returns a rate lane over lim, for [Queue.Add]: a grant
// spends n tokens, for good. A call that would get them only after ctx's
// deadline, or never ([semaphore.ErrTooHeavy]), fails at once, spending
// nothing. A failed call gives back what lim can without passing its
// bucket, so some may stay spent. The lane orders its calls on lim, so it
// must be lim's only user: read lim, and change its limit and burst by
// [Queue.SetRate] (code taking tokens from lim directly can make the lane
// over-grant). A limit that is not positive (rate.Inf is) or a burst below
// 1 makes a lane that Add refuses.
func NewRateLane[K comparable](lim *rate.Limiter) Lane[K] {
	if lim == nil {
		panic("lanequeue: nil rate.Limiter")
	}
	if err := checkRate(lim.Limit(), lim.Burst()); err != nil {
		return &badLane[K]{kind: Rate, err: err}
	}
	return newRateLane[K](lim, int64(lim.Burst()))
}

// checkRate refuses a limit or burst out of range.
func checkRate(limit rate.Limit, burst int) error {
	if !(limit > 0) || (math.IsInf(float64(limit), 1) && limit != rate.Inf) {
		return fmt.Errorf("limit %v tokens a second: %w", float64(limit), errInvalidRate)
	}
	if burst < 1 {
		return fmt.Errorf("burst %d: must be at least 1: %w", burst, errInvalidCapacity)
	}
	return nil
}

func newRateLane[K comparable](lim *rate.Limiter, burst int64) *rateLane[K] {
	l := &rateLane[K]{lim: lim, closed: make(chan struct{})}
	l.burst.Store(burst)
	return l
}

// rateLane takes tokens from a rate.Limiter through reservations, so that a
// wait that ends with an error, or a grant that AcquireAll must roll back,
// puts its tokens back.
//
// The lane makes every call on its limiter under mu, with the time read
// under mu, so the times it passes the limiter never go back. rate.Limiter
// takes the time from its caller and, given one older than its last
// update, moves its clock back to it, so that the stretch between refills
// twice: goroutines that read the clock, then queue for the limiter's lock
// behind others that read it later, made a lane grant thousands of tokens
// over its allowance in 100ms under contention (see
// BenchmarkRateCancelOverGrant).
type rateLane[K comparable] struct {
	lim *rate.Limiter
	// burst is the limiter's burst, which only Queue.SetRate changes (see
	// NewRateLane), or -1: ask the limiter each time.
	burst atomic.Int64
	// clk is the lane's time source; nil, as always outside this
	// package's tests, is the system clock. rate.Limiter is told the time
	// at each call, so a fake clock drives the limiter as well.
	clk clock.Clock

	mu sync.Mutex // orders the lane's calls on lim; guards uses
	// uses counts the lane's calls that may have changed lim's state (a
	// reservation or grant, a cancellation), so that a reservation can
	// tell whether lim has moved since it was made. NewRateLane asks to be
	// lim's only user; code that uses lim anyway does so unseen.
	uses uint64

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	isClosed  atomic.Bool   // set by Close before closed is closed

	waiters   atomic.Int64
	acquired  atomic.Uint64
	cancelled atomic.Uint64
	rejected  atomic.Uint64
	waited    atomic.Uint64 // grants that waited for their tokens
	failed    atomic.Uint64 // waits ended by Close
}

func (l *rateLane[K]) Kind() Kind { return Rate }

// now reads the lane's clock.
func (l *rateLane[K]) now() time.Time {
	if l.clk == nil {
		return time.Now()
	}
	return l.clk.Now()
}

func (l *rateLane[K]) MaxWeight() int64 {
	if b := l.burst.Load(); b >= 0 {
		return b
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
	if err := takeRates(ctx, reqs[:], l.closed, nil); err != nil {
		if we, ok := err.(*rateWaitError); ok {
			err = we.err // the caller knows the lane
		}
		return semaphore.Permit{}, err
	}
	commitRates(reqs[:])
	return semaphore.Permit{}, nil
}

// TryAcquire spends n tokens if the limiter has them now.
func (l *rateLane[K]) TryAcquire(_ K, n int64) (semaphore.Permit, bool) {
	if n <= 0 || n > l.MaxWeight() || l.isClosed.Load() {
		return semaphore.Permit{}, false // an answer, counted nowhere (see semaphore.Counters)
	}
	l.mu.Lock()
	now := l.now()
	ok := l.lim.AllowN(now, int(n))
	if ok {
		l.uses++
	}
	l.mu.Unlock()
	if !ok {
		return semaphore.Permit{}, false
	}
	l.acquired.Add(1)
	return semaphore.Permit{}, true
}

// reserve reserves q.n tokens as of now, read under l.mu, and records the
// reservation in q; it returns now. With wait false, a reservation that
// would have to wait is given back at once, and q holds none. If the
// burst is below q.n, q.r is a reservation that is not OK.
func (l *rateLane[K]) reserve(q *rateReq[K], wait bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.lim.ReserveN(now, int(q.n))
	if heapReservations {
		keepReservation(r)
	}
	if !r.OK() {
		q.r, q.has = *r, true
		return now
	}
	l.uses++
	d := r.DelayFrom(now)
	if d > 0 && !(l.lim.Limit() > 0) {
		// The limiter does not refill (a limit of 0 or below, set by
		// SetLimit behind the lane's back): the tokens never come.
		r.CancelAt(now)
		l.uses++
		q.never = true
		return now
	}
	if d > 0 && !wait {
		r.CancelAt(now) // due after now: gives every token back
		l.uses++
		return now
	}
	q.r, q.has, q.due, q.use = *r, true, now.Add(d), l.uses
	return now
}

// heapReservations, set by BenchmarkAblationReservationCopy only, puts a
// copy of each reservation on the heap, as keeping ReserveN's pointer
// did: the cost that holding reservations by value in rateReq saves.
var heapReservations bool

// reservationSink keeps the ablation's copies reachable.
var reservationSink atomic.Pointer[rate.Reservation]

func keepReservation(r *rate.Reservation) {
	c := *r
	reservationSink.Store(&c)
}

// late reports whether n tokens would come after deadline if reserved now
// (the limiter's own arithmetic, so it is exact while no other caller
// reserves meanwhile; takeRates checks again once it has reserved), and
// how long until they would come (0 for never).
func (l *rateLane[K]) late(n int64, deadline time.Time) (bool, time.Duration) {
	now := l.now()
	missing := float64(n) - l.lim.TokensAt(now)
	if missing <= 0 {
		return false, 0
	}
	limit := l.lim.Limit()
	if limit == rate.Inf {
		return false, 0
	}
	if limit <= 0 {
		return true, 0 // never
	}
	wait := missing / float64(limit)
	return wait > deadline.Sub(now).Seconds(), time.Duration(wait * float64(time.Second))
}

// setRate sets the limiter's limit and burst as of now, read under l.mu
// as every other call on lim is, so that its clock does not go back.
func (l *rateLane[K]) setRate(limit rate.Limit, burst int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.lim.SetLimitAt(now, limit)
	l.lim.SetBurstAt(now, burst)
	l.uses++ // the limiter moved: a reservation made before cannot be given back as of its due time
	if l.burst.Load() >= 0 {
		l.burst.Store(int64(burst))
	}
}

// cancel gives back the tokens of q's reservation as far as that can be
// done without granting more than the bucket allows; see cancelRates.
func (l *rateLane[K]) cancel(q *rateReq[K]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := l.now()
	if q.due.Before(at) && l.uses == q.use {
		// The tokens were due before now, but the lane has not used the
		// limiter since it reserved them: cancelled as of their due time,
		// they come back as if never reserved, and the limiter's clock
		// does not go back (unless code outside the lane used a shared
		// limiter meanwhile; see NewRateLane).
		at = q.due
	}
	q.r.CancelAt(at)
	l.uses++
}

// Stats reports the burst as the capacity, and what the limiter has not
// refilled as Used; a rate lane holds nothing, so Held is 0. Acquired
// counts grants; Released stays 0.
func (l *rateLane[K]) Stats() LaneStats {
	return LaneStats{
		Kind:     Rate,
		Capacity: l.MaxWeight(),
		Used:     l.used(),
		Waiters:  int(l.waiters.Load()),
		Closed:   l.isClosed.Load(),
		Counters: semaphore.Counters{
			Acquired:  l.acquired.Load(),
			Waited:    l.waited.Load(),
			Cancelled: l.cancelled.Load(),
			Rejected:  l.rejected.Load(),
			Failed:    l.failed.Load(),
		},
	}
}

// used is what the limiter has not refilled: its burst less its tokens
// now, rounded up (a token partly refilled cannot be taken yet), at least
// 0. A wait's reservation takes the tokens below 0, and used past the
// burst. Without a limit (rate.Inf) nothing is ever used. A burst raised
// by SetRate counts as used until the limiter refills it.
func (l *rateLane[K]) used() int64 {
	l.mu.Lock() // the limiter's calls, with their times, in order; one snapshot
	limit, burst := l.lim.Limit(), l.MaxWeight()
	tokens := l.lim.TokensAt(l.now())
	l.mu.Unlock()
	if limit == rate.Inf {
		return 0
	}
	// What used forgives of the limiter's float arithmetic: the tokens of
	// a few nanoseconds, which the limiter's durations are rounded to. So
	// 3 taken of 10 read as 3, not 4, when its count comes out at
	// 6.9999999999, and a grant that waited reads as the burst, not one
	// over it, at the instant it comes due (the limiter then holds -2e-9).
	slack := max(1e-9, 4e-9*float64(limit))
	u := float64(burst) - tokens
	switch {
	case !(u > slack): // and NaN
		return 0
	case u >= semaphore.MaxCapacity:
		return semaphore.MaxCapacity
	}
	return int64(math.Ceil(u - slack))
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
	l *rateLane[K]
	n int64
	// r is the reservation, while has is set. It is a copy of what
	// ReserveN returns: ReserveN is inlined, so its result stays on the
	// caller's stack, where keeping the pointer would move every
	// reservation to the heap (BenchmarkAblationReservationCopy).
	r   rate.Reservation
	has bool
	due time.Time // when r's tokens are there
	use uint64    // l.uses just after r was made
	// never is set by reserve, with no reservation, when the tokens would
	// never come: the limiter does not refill.
	never bool
	// waited is set by takeRates when the call waited for the tokens, for
	// commitRates to count.
	waited bool
}

// errRateDeadline is wrapped in the error of a rate wait that could not
// end before the context's deadline.
var errRateDeadline = fmt.Errorf("lanequeue: rate tokens not available before the context deadline: %w", context.DeadlineExceeded)

// takeRates reserves the tokens of every lane of reqs, one lane after the
// other, and waits until the last of them are there. On failure it gives
// every reservation back (cancelRates). On success the reservations stay
// in reqs: the caller keeps them with commitRates or, if a later lane
// fails, gives them back with cancelRates.
//
// done, if not nil, ends the wait with semaphore.ErrClosed (a lane's or the queue's
// Close); a lane closed while the wait is for another lane's tokens is
// noticed when the wait ends.
//
// On failure it returns ctx.Err() (also when ctx had already ended, or
// ended by the time the tokens were there), an error wrapping
// context.DeadlineExceeded (the tokens would come after the deadline:
// nothing is spent and the call does not wait), semaphore.ErrClosed, or
// semaphore.ErrInvalidWeight / semaphore.ErrTooHeavy.
func takeRates[K comparable](ctx context.Context, reqs []rateReq[K], done <-chan struct{}, waiting func()) error {
	ctxDone := ctx.Done()
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
	for i := range reqs {
		q := &reqs[i]
		if err := q.l.check(q.n); err != nil {
			return err
		}
	}
	// A call whose tokens cannot come before its deadline fails at once.
	// Look before reserving: a reservation given back at once is not free
	// (rate.Reservation.CancelAt gives back fewer tokens when others
	// reserved after it, golang/go#56924), and under load the calls that
	// time out would eat the lane's budget.
	if dl, ok := ctx.Deadline(); ok {
		for i := range reqs {
			if late, after := reqs[i].l.late(reqs[i].n, dl); late {
				for j := range reqs {
					reqs[j].l.cancelled.Add(1)
				}
				return &rateWaitError{i: i, after: after, err: errRateDeadline}
			}
		}
	}
	var last, due time.Time // the latest time read, the latest due time
	slow := 0               // the lane whose tokens are due last
	for i := range reqs {
		q := &reqs[i]
		last = q.l.reserve(q, true)
		if q.never {
			q.never = false
			q.l.rejected.Add(1)
			cancelRates(reqs[:i])
			return neverErr(q.l.lim.Limit(), q.n)
		}
		if !q.r.OK() { // the burst shrank below n since the check
			q.has = false
			q.l.rejected.Add(1)
			cancelRates(reqs[:i])
			return fmt.Errorf("lanequeue: %d rate tokens above the burst: %w", q.n, semaphore.ErrTooHeavy)
		}
		if i == 0 || q.due.After(due) {
			due, slow = q.due, i
		}
	}
	if delay := due.Sub(last); delay > 0 {
		if waiting != nil {
			waiting()
		}
		if err := waitRates(ctx, ctxDone, reqs, done, due, delay); err != nil {
			if err != semaphore.ErrClosed {
				err = &rateWaitError{i: slow, after: due.Sub(reqs[slow].l.now()), err: err}
			}
			return err
		}
		for i := range reqs {
			reqs[i].waited = true
		}
		for i := range reqs {
			if reqs[i].l.isClosed.Load() {
				cancelRates(reqs)
				for j := range reqs {
					reqs[j].l.failed.Add(1)
				}
				return semaphore.ErrClosed
			}
		}
	}
	// The tokens are there. If ctx ended meanwhile (before the
	// reservation, or while the timer and ctx were both ready, when the
	// select above picks either), the end of ctx wins: a cancellation
	// that came before the grant must not lose to it (go.dev/issue/63615).
	if ctxDone != nil && isDone(ctxDone) {
		cancelRates(reqs)
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

// commitRates keeps the reservations of reqs: the tokens are spent.
func commitRates[K comparable](reqs []rateReq[K]) {
	for i := range reqs {
		reqs[i].l.acquired.Add(1)
		if reqs[i].waited {
			reqs[i].l.waited.Add(1)
		}
		reqs[i].has = false
	}
}

// tryRates takes the tokens of every lane of reqs if all are available now,
// and gives back those it took otherwise. On success the reservations stay
// in reqs, as with takeRates.
func tryRates[K comparable](reqs []rateReq[K]) bool {
	for i := range reqs {
		q := &reqs[i]
		if q.n <= 0 || q.n > q.l.MaxWeight() || q.l.isClosed.Load() {
			return false // an answer, counted nowhere (see semaphore.Counters)
		}
	}
	// Look before reserving: a reservation that must wait, even if
	// cancelled at once, can leave the limiter's record of the latest
	// reservation in the future (rate.Limiter rounds through float64), and
	// then later cancellations give back fewer tokens than they should.
	for i := range reqs {
		l := reqs[i].l
		if l.lim.TokensAt(l.now()) < float64(reqs[i].n) {
			return false
		}
	}
	for i := range reqs {
		q := &reqs[i]
		q.l.reserve(q, false)
		if !q.has || !q.r.OK() { // another caller took the tokens since the look
			q.has = false
			cancelRates(reqs[:i])
			return false
		}
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
		return semaphore.ErrClosed
	case n > l.MaxWeight():
		l.rejected.Add(1)
		return fmt.Errorf("lanequeue: %d rate tokens above the burst: %w", n, semaphore.ErrTooHeavy)
	}
	if err := l.never(n); err != nil {
		l.rejected.Add(1)
		return err
	}
	return nil
}

// never returns the error for n tokens that the limiter can never grant:
// it does not refill (a limit of 0 or below) and has fewer than n left.
// It counts nothing.
func (l *rateLane[K]) never(n int64) error {
	limit := l.lim.Limit()
	if limit > 0 {
		return nil
	}
	l.mu.Lock()
	left := l.lim.TokensAt(l.now())
	l.mu.Unlock()
	if left >= float64(n) {
		return nil
	}
	return neverErr(limit, n)
}

// neverErr is the error of n tokens from a limiter that does not refill.
// It wraps semaphore.ErrTooHeavy, the error of a request that can never be granted.
func neverErr(limit rate.Limit, n int64) error {
	return fmt.Errorf("lanequeue: %d rate tokens never come: the limiter's limit is %v tokens a second and its tokens left are fewer: %w", n, float64(limit), semaphore.ErrTooHeavy)
}

// waitRates waits delay for the reservations of reqs, the last of which
// are due at due, or until ctx or done ends the wait; then it gives the
// reservations back and returns the error.
func waitRates[K comparable](ctx context.Context, ctxDone <-chan struct{}, reqs []rateReq[K], done <-chan struct{}, due time.Time, delay time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && dl.Before(due) {
		cancelRates(reqs)
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
		err = semaphore.ErrClosed
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
		cancelRates(reqs)
		for i := range reqs {
			if err == semaphore.ErrClosed {
				reqs[i].l.failed.Add(1)
			} else {
				reqs[i].l.cancelled.Add(1)
			}
		}
	}
	return err
}

// cancelRates gives back the reservations of reqs, newest first, as far as
// rate.Limiter can without granting more than the bucket allows.
//
// rate.Reservation.CancelAt(t) gives nothing back for a reservation due
// before t, and moves the limiter's clock back to t if the limiter was
// used after t. A request that takes several rate lanes waits for the
// slowest, so the others' tokens are often due (at once) long before the
// request fails. Each is cancelled as of now, which gives back the tokens
// not yet due; tokens already due come back only if the lane has not used
// the limiter since they were reserved: cancelled as of their due time,
// they come back as if never reserved (a limiter shared with code outside
// the lane may have been used meanwhile, unseen; see NewRateLane).
// Otherwise they stay spent, and the lane grants less than it could, never
// more:
// cancelling them as of their due time anyway, as this package once did,
// refilled the stretch from then to now twice, up to about a token per
// lane more than the bucket allows (TestRateCancelAsOfNow).
func cancelRates[K comparable](reqs []rateReq[K]) {
	for i := len(reqs) - 1; i >= 0; i-- {
		q := &reqs[i]
		if !q.has {
			continue
		}
		q.l.cancel(q)
		q.has = false
	}
}
