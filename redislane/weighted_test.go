package redislane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

const testLease = 500 * time.Millisecond

// handoverLease is the lease of the tests whose holder waits, holding, for
// a waiter to subscribe and queue: with testLease, a late refresh on a
// loaded machine ended the holder's permit, the waiter was granted
// directly, and the wait for it to queue timed out. Nothing in those tests
// waits for a lease to run out.
const handoverLease = 5 * time.Second

func TestAcquireReleaseUncontended(t *testing.T) {
	srv := startRedis(t)
	var cnt redistest.Calls
	rc := newClient(t, srv.Addr)
	rc.AddHook(&cnt)
	s, err := redislane.NewWeighted(rc, laneName(t), 3, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)

	// The first use of each script costs an EVALSHA that fails with
	// NOSCRIPT and an EVAL that loads it; after that, one EVALSHA each.
	w, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	w.Release()

	before := cnt.Evals()
	p, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	assert.EqualValues(t, 1, cnt.Evals()-before, "uncontended acquire is one call")
	assert.EqualValues(t, 2, p.Weight())
	assert.Positive(t, p.Fence())
	assert.NoError(t, p.Context().Err())
	assert.True(t, time.Until(p.Deadline()) > 0)
	assert.EqualValues(t, 2, s.Stats().Held)

	before = cnt.Evals()
	assert.True(t, p.Release())
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrReleased)
	assert.EqualValues(t, 1, cnt.Evals()-before, "release is one call")

	q, err := s.Acquire(ctx, 3)
	require.NoError(t, err)
	assert.Greater(t, q.Fence(), p.Fence())
	q.Release()
	assert.EqualValues(t, 0, s.Stats().Held)
	assert.EqualValues(t, 0, rc.ZCard(ctx, "{lanes:"+s.Name()+"}:g:h").Val())
}

func TestWaiterIsHandedReleasedUnits(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	name := laneName(t)
	a, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer a.Close()
	b, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer b.Close()

	p, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	got := make(chan *redislane.Permit)
	go func() {
		q, err := b.Acquire(ctx, 1)
		assert.NoError(t, err)
		got <- q
	}()
	waitFor(t, 5*time.Second, "b's waiter to queue in Redis", func() bool { return b.Stats().Waiters == 1 })
	select {
	case q := <-got:
		q.Release()
		t.Fatal("granted while the units were held")
	default:
	}
	p.Release()
	q := testkit.Within(t, 30*time.Second, "the hand-over", got)
	assert.Greater(t, q.Fence(), p.Fence())
	q.Release()
}

func newSem(t *testing.T, addr, name string, limit int64, opts ...redislane.Option) *redislane.Weighted {
	t.Helper()
	opts = append([]redislane.Option{redislane.WithLease(testLease), redislane.WithQuarantine(0)}, opts...)
	s, err := redislane.NewWeighted(newClient(t, addr), name, limit, opts...)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// A waiter that gives up leaves nothing behind in Redis, and the next
// caller gets the units as soon as they are free.
func TestCancelledWaiterLeavesNothingBehind(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newSem(t, srv.Addr, name, 2)
	b := newSem(t, srv.Addr, name, 2)
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t)

	p, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	q, err := b.Acquire(short, 1)
	failed(t, q, err, context.DeadlineExceeded)
	waitFor(t, 5*time.Second, "the queued id to be removed", func() bool {
		return rc.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 0
	})
	assert.EqualValues(t, 1, b.Stats().Cancelled)
	assert.Zero(t, b.Stats().Waiters)
	p.Release()
	q, ok := b.TryAcquire(2)
	require.True(t, ok)
	q.Release()
}

// Waiters of one instance wait in line behind the first; a cancelled
// waiter in the middle does not block the ones behind it.
func TestLocalLineIsFIFOAndSurvivesCancellation(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	s := newSem(t, srv.Addr, name, 1)
	ctx := testCtx(t)
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)

	order := make(chan int, 3)
	var wg sync.WaitGroup
	start := func(i int, ctx context.Context) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := s.Acquire(ctx, 1)
			if err != nil {
				return
			}
			order <- i
			q.Release()
		}()
		waitFor(t, 5*time.Second, "the waiter to line up", func() bool { return s.Stats().Waiters == i+1 })
	}
	middle, cancel := context.WithCancel(ctx)
	start(0, ctx)
	start(1, middle)
	start(2, ctx)
	cancel()
	waitFor(t, 5*time.Second, "the middle waiter to leave", func() bool { return s.Stats().Waiters == 2 })
	p.Release()
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	assert.Equal(t, []int{0, 2}, got)
}

// Across instances, waiting is FIFO in Redis: a heavy waiter is not
// overtaken by a lighter request for which units are free.
func TestHeavyWaiterIsNotOvertaken(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newSem(t, srv.Addr, name, 3)
	b := newSem(t, srv.Addr, name, 3)
	c := newSem(t, srv.Addr, name, 3)
	ctx := testCtx(t)
	p, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	heavy := make(chan *redislane.Permit)
	go func() {
		q, err := b.Acquire(ctx, 3)
		assert.NoError(t, err)
		heavy <- q
	}()
	rc := newClient(t, srv.Addr)
	waitFor(t, 5*time.Second, "the heavy waiter to queue", func() bool {
		return rc.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	l, ok := c.TryAcquire(1)
	refused(t, l, ok, "a light request overtook the heavy waiter")
	p.Release()
	q := testkit.Within(t, 30*time.Second, "the heavy waiter's grant", heavy)
	assert.EqualValues(t, 3, q.Weight())
	q.Release()
}

// Close sends waiters away with ErrClosed and refuses later acquires;
// it ends a permit out (cause ErrClosed), which can still be released.
func TestCloseWakesWaitersAndEndsPermits(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	ctx := context.Background() // the waiters' wait never ends by itself: Close must end it
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			q, err := s.Acquire(ctx, 1) // ctx never ends: Close must end the wait
			if err == nil {
				q.Release()
			}
			errs <- err
		}()
	}
	waitFor(t, 5*time.Second, "two waiters", func() bool { return s.Stats().Waiters == 2 })
	s.Close()
	assert.ErrorIs(t, testkit.Within(t, 30*time.Second, "a waiter to end", errs), redislane.ErrClosed)
	assert.ErrorIs(t, testkit.Within(t, 30*time.Second, "a waiter to end", errs), redislane.ErrClosed)
	q, err := s.Acquire(ctx, 1)
	failed(t, q, err, redislane.ErrClosed)
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrClosed, "Close did not end the permit")
	assert.True(t, p.Release())
	s.Close() // idempotent
}

// The refresher keeps a permit valid for as long as it is held, past its
// first lease. The lease is long enough for a loaded machine: a refresh is
// tried every 500 ms (each with a deadline of 500 ms) and one of them in
// 2 s must get through; with 200 ms, 93 ms of scheduling delay under -race
// ended the permit, and with 1.5 s (default period, two slow calls in a
// row) a load of 12 still did.
func TestRefreshKeepsPermitPastItsLease(t *testing.T) {
	srv := startRedis(t)
	const lease = 2500 * time.Millisecond
	name := laneName(t)
	s := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease), redislane.WithRefreshEvery(lease/5))
	other := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease))
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	first := p.Deadline()
	select { // real time must pass for leases to run out
	case <-p.Context().Done():
		t.Fatalf("lease ended: %v", context.Cause(p.Context()))
	case <-time.After(lease + lease/5): // past the first lease in Redis
	}
	assert.True(t, p.Deadline().After(first), "the deadline never moved")
	q, ok := other.TryAcquire(1)
	refused(t, q, ok, "the permit was reclaimed while refreshed")
	p.Release()
}

// A new lane grants nothing during its quarantine (by default, one lease),
// because Redis cannot tell a new lane from one whose state was lost.
func TestNewLaneIsQuarantinedForOneLease(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(testLease))
	require.NoError(t, err)
	defer s.Close()
	q, ok := s.TryAcquire(1)
	refused(t, q, ok, "granted during the quarantine")
	qu, err := rc.HGet(context.Background(), "{lanes:"+name+"}:meta", "qu").Int64()
	require.NoError(t, err)
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, p.Fence()/1000, qu, "granted before the quarantine ended")
	p.Release()
}

// Do runs the function under a permit, releases it afterwards (also on a
// panic), and passes the function a context that ends with the lease.
func TestDoReleasesAfterFunction(t *testing.T) {
	srv := startRedis(t)
	s := newSem(t, srv.Addr, laneName(t), 1)
	ctx := testCtx(t)
	ran := false
	require.NoError(t, s.Do(ctx, 1, func(ctx context.Context) error {
		ran = true
		assert.EqualValues(t, 1, s.Stats().Held)
		return ctx.Err()
	}))
	assert.True(t, ran)
	assert.Zero(t, s.Stats().Held)
	assert.Panics(t, func() {
		_ = s.Do(ctx, 1, func(context.Context) error { panic("boom") })
	})
	assert.Zero(t, s.Stats().Held)
	p, ok := s.TryAcquire(1)
	require.True(t, ok, "Do leaked the permit")
	p.Release()
}
