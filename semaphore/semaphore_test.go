package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// spinBound bounds the yields of waitFor. What the tests wait for happens
// within a few yields; the bound only turns a bug that would hang the test
// into a failure. It is a count of yields, not a time.
const spinBound = 5_000_000

// waitFor yields until cond holds, and fails the test if it never does.
func waitFor(t rapid.TB, what string, cond func() bool) {
	t.Helper()
	for range spinBound {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("gave up waiting for %s", what)
}

type result struct {
	p   semaphore.Permit
	err error
}

// acquireAsync runs Acquire(ctx, n) in a goroutine; its result arrives on
// the returned channel.
func acquireAsync(ctx context.Context, s *semaphore.Weighted, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, n)
		ch <- result{p, err}
	}()
	return ch
}

// enqueue runs Acquire(ctx, n) in a goroutine and returns once the call
// waits in the queue (Stats().Waiters has grown by one). It fails the test
// if the call returns instead.
func enqueue(t rapid.TB, ctx context.Context, s *semaphore.Weighted, n int64) <-chan result {
	t.Helper()
	want := s.Stats().Waiters + 1
	ch := acquireAsync(ctx, s, n)
	waitFor(t, fmt.Sprintf("Acquire(%d) to queue as waiter %d", n, want), func() bool {
		if len(ch) > 0 {
			r := <-ch
			t.Fatalf("Acquire(%d) returned (%v, %v) instead of waiting", n, r.p.Weight(), r.err)
		}
		return s.Stats().Waiters == want
	})
	return ch
}

// recv waits for the result of an Acquire started with acquireAsync or
// enqueue.
func recv(t rapid.TB, ch <-chan result) result {
	t.Helper()
	var r result
	waitFor(t, "Acquire to return", func() bool {
		select {
		case r = <-ch:
			return true
		default:
			return false
		}
	})
	return r
}

// stillWaiting fails the test if the Acquire behind ch has returned.
func stillWaiting(t rapid.TB, ch <-chan result) {
	t.Helper()
	if len(ch) > 0 {
		r := <-ch
		t.Fatalf("Acquire returned (weight %d, %v) while it should wait", r.p.Weight(), r.err)
	}
}

func take(t *testing.T, s *semaphore.Weighted, n int64) semaphore.Permit {
	t.Helper()
	p, ok := s.TryAcquire(n)
	require.True(t, ok, "TryAcquire(%d) with %+v", n, s.Stats())
	return p
}

// requireBalanced checks the invariant and that nothing is out or waiting.
func requireBalanced(t *testing.T, s *semaphore.Weighted) semaphore.Stats {
	t.Helper()
	st := s.Stats()
	require.Equal(t, st.Capacity, st.Available+st.Held, "Available+Held != Capacity: %+v", st)
	require.Zero(t, st.Held, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	require.Zero(t, st.WaitingWeight, "%+v", st)
	require.Equal(t, st.Acquired, st.Released, "%+v", st)
	return st
}

// --- Permit ownership -------------------------------------------------------

func TestCancelWhileWaitingReleasesNothing(t *testing.T) {
	s := semaphore.New(2)
	h := take(t, s, 2)
	ctx, cancel := context.WithCancel(context.Background())
	w := enqueue(t, ctx, s, 1)
	before := s.Stats()

	cancel()
	r := recv(t, w)
	require.ErrorIs(t, r.err, context.Canceled)
	require.Equal(t, context.Canceled, r.err, "the context's error is returned as it is")
	require.Zero(t, r.p.Weight())
	require.False(t, r.p.Release(), "a failed Acquire returns the zero Permit")

	want := before
	want.Waiters--
	want.WaitingWeight--
	want.Cancelled++
	require.Equal(t, want, s.Stats(), "cancelling a waiter changes nothing but the queue and Cancelled")

	require.True(t, h.Release())
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Acquired, "the cancelled waiter was never granted")
}

func TestCancelledWaiterDoesNotBlockThoseBehind(t *testing.T) {
	// A waiter in the middle of the queue that would not fit leaves; the
	// waiter behind it is then served with the head, not after it.
	s := semaphore.New(3)
	h := take(t, s, 3)
	a := enqueue(t, context.Background(), s, 2)
	ctx, cancel := context.WithCancel(context.Background())
	b := enqueue(t, ctx, s, 3)
	c := enqueue(t, context.Background(), s, 1)

	cancel()
	require.ErrorIs(t, recv(t, b).err, context.Canceled)
	require.Equal(t, 2, s.Stats().Waiters)
	stillWaiting(t, a)
	stillWaiting(t, c)

	require.True(t, h.Release())
	ra, rc := recv(t, a), recv(t, c)
	require.NoError(t, ra.err)
	require.NoError(t, rc.err)
	st := s.Stats()
	require.Equal(t, int64(3), st.Held)
	require.Zero(t, st.Waiters)
	require.True(t, ra.p.Release())
	require.True(t, rc.p.Release())
	requireBalanced(t, s)
}

func TestAcquireWithDoneContextFailsFastEvenWithPermitsFree(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()

	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "deadline exceeded": expired} {
		t.Run(name, func(t *testing.T) {
			s := semaphore.New(4)
			p, err := s.Acquire(ctx, 1)
			require.Error(t, err)
			require.Equal(t, ctx.Err(), err, "the context's error, as it is")
			require.False(t, p.Valid())

			called := false
			err = s.Do(ctx, 1, func(context.Context) error { called = true; return nil })
			require.Equal(t, ctx.Err(), err)
			require.False(t, called, "Do must not run fn when the context is already done")

			st := s.Stats()
			require.Equal(t, int64(4), st.Available, "nothing taken")
			require.Zero(t, st.Held)
			require.Zero(t, st.Acquired)
			require.Equal(t, uint64(2), st.Cancelled)
			require.Zero(t, st.Rejected)

			q := take(t, s, 4)
			require.True(t, q.Release())
			requireBalanced(t, s)
		})
	}
}

// grantRace runs one round of a grant racing a waiter's departure. A holder
// has the only permit; waiter A waits for it, waiter B waits behind A. The
// holder's release and leave (which ends A's wait: a cancel, a max wait
// running out) happen concurrently (mode 0); or the release comes first and
// A has returned with the permit before leave (mode 1: A keeps it, and its
// later leave changes nothing); or leave comes strictly first (mode 2: A
// must fail, even when the release granted it before it ran). Whichever
// wins, the permit has exactly one owner: A if its Acquire returned nil,
// else the semaphore, which must pass it on to B. Never both, never
// neither.
//
// It returns what happened to A: "kept" (A owns the permit) or "left" (A
// failed: it left before the grant, or was granted, saw its wait end, and
// the semaphore took the permit back; Stats are the same either way, as if
// A had left first).
func grantRace(t *testing.T, mode int, s *semaphore.Weighted, h semaphore.Permit, a, b <-chan result, leave func(), leaveErr error) string {
	t.Helper()
	switch mode {
	case 0:
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; h.Release() }()
		go func() { defer wg.Done(); <-start; leave() }()
		close(start)
		wg.Wait()
	case 1:
		h.Release()
		ra := recv(t, a)
		leave()
		a = replay(ra)
	case 2:
		leave()
		h.Release()
	}

	ra := recv(t, a)
	if mode == 2 && ra.err == nil {
		ra.p.Release()
		t.Fatalf("A's wait ended before the release, yet A kept the permit")
	}
	if ra.err == nil {
		st := s.Stats()
		require.Equal(t, int64(1), st.Held, "A owns the permit: %+v", st)
		require.Equal(t, 1, st.Waiters, "B must still wait: %+v", st)
		stillWaiting(t, b)
		require.True(t, ra.p.Release(), "A's permit is released once, by A")
	} else {
		require.ErrorIs(t, ra.err, leaveErr)
		require.False(t, ra.p.Valid())
	}
	rb := recv(t, b)
	require.NoError(t, rb.err, "the permit must reach B")
	require.Equal(t, int64(1), s.Stats().Held)
	require.True(t, rb.p.Release())
	require.False(t, rb.p.Release())

	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.DoubleReleases)
	switch {
	case ra.err == nil:
		require.Zero(t, st.Cancelled+st.TimedOut)
		require.Equal(t, uint64(3), st.Acquired)
		require.Equal(t, uint64(2), st.Waited)
		return "kept"
	default:
		// A grant taken back counts as if A had left first.
		require.Equal(t, uint64(2), st.Acquired)
		require.Equal(t, uint64(1), st.Cancelled+st.TimedOut)
		require.Equal(t, uint64(1), st.Waited)
		return "left"
	}
}

// requireRaceExercised checks that the rounds hit both outcomes. Mode 2
// always makes A leave (often after the release granted it before it ran:
// the semaphore then takes the grant back), mode 1 always makes it keep
// the permit, so missing either means the test no longer tests both paths
// (mode 0, the race itself, may go either way).
func requireRaceExercised(t *testing.T, seen map[string]int) {
	t.Helper()
	require.Positive(t, seen["left"], "no round had A leave: %v", seen)
	require.Positive(t, seen["kept"], "no round had A keep the permit: %v", seen)
}

// replay returns a channel that yields r, for a result already received.
func replay(r result) <-chan result {
	c := make(chan result, 1)
	c <- r
	return c
}

func TestGrantCancelRaceHasExactlyOneOwner(t *testing.T) {
	const rounds = 2000
	seen := map[string]int{}
	for i := range rounds {
		s := semaphore.New(1)
		h := take(t, s, 1)
		ctx, cancel := context.WithCancel(context.Background())
		a := enqueue(t, ctx, s, 1)
		b := enqueue(t, context.Background(), s, 1)
		seen[grantRace(t, i%3, s, h, a, b, cancel, context.Canceled)]++
	}
	t.Logf("outcomes for A: %v", seen)
	requireRaceExercised(t, seen)
}

func TestGrantMaxWaitRaceHasExactlyOneOwner(t *testing.T) {
	const rounds = 1000
	seen := map[string]int{}
	for i := range rounds {
		clk := clock.NewFake(time.Unix(0, 0))
		s := semaphore.New(1, semaphore.WithMaxWait(time.Second), semaphore.WithClock(clk))
		h := take(t, s, 1)
		a := enqueue(t, context.Background(), s, 1)
		clk.BlockUntilPending(1)
		clk.Advance(time.Second / 2)
		b := enqueue(t, context.Background(), s, 1) // times out half a second after A
		clk.BlockUntilPending(2)
		seen[grantRace(t, i%3, s, h, a, b, func() { clk.Advance(time.Second / 2) }, semaphore.ErrWaitTooLong)]++
		require.Zero(t, clk.Pending(), "every timer is stopped")
	}
	t.Logf("outcomes for A: %v", seen)
	requireRaceExercised(t, seen)
}

func TestCancelRightAfterGrantLeavesPermitWithCaller(t *testing.T) {
	s := semaphore.New(2)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	cancel()

	st := s.Stats()
	require.Equal(t, int64(2), st.Held, "cancelling after the grant takes nothing back")
	require.Zero(t, st.Cancelled)
	require.True(t, p.Release())
	require.False(t, p.Release())
	st = requireBalanced(t, s)
	require.Equal(t, uint64(1), st.DoubleReleases)
}

// deadlineCtx is a context whose deadline the test makes pass, so that no
// test waits on the wall clock.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) expire()                     { close(c.done) }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestDoKeepsPermitUntilFnReturnsWhateverTheContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, func())
	}{
		{"deadline passes", func() (context.Context, func()) { c := newDeadlineCtx(); return c, c.expire }},
		{"cancelled", func() (context.Context, func()) { return context.WithCancel(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := semaphore.New(3)
			ctx, end := tc.ctx()
			var next <-chan result
			err := s.Do(ctx, 2, func(ctx context.Context) error {
				end()
				<-ctx.Done()
				// The work ignores its context and goes on: the permits
				// stay with it.
				next = enqueue(t, context.Background(), s, 2)
				st := s.Stats()
				require.Equal(t, int64(2), st.Held, "Do released before fn returned: %+v", st)
				_, ok := s.TryAcquire(1)
				require.False(t, ok, "a waiter is queued")
				stillWaiting(t, next)
				return ctx.Err()
			})
			require.ErrorIs(t, err, ctx.Err(), "Do returns fn's error")
			r := recv(t, next)
			require.NoError(t, r.err, "the waiter is served when fn returns")
			require.True(t, r.p.Release())
			st := requireBalanced(t, s)
			require.Equal(t, uint64(2), st.Released)
		})
	}
}

func TestDoReleasesOnceOnPanicAndRepanics(t *testing.T) {
	s := semaphore.New(3)
	type boom struct{ msg string }
	var got any
	func() {
		defer func() { got = recover() }()
		_ = s.Do(context.Background(), 3, func(context.Context) error {
			require.Equal(t, int64(3), s.Stats().Held)
			panic(boom{"fn failed"})
		})
	}()
	require.Equal(t, boom{"fn failed"}, got, "the panic goes on, unchanged")
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Acquired)
	require.Equal(t, uint64(1), st.Released)
	require.Zero(t, st.DoubleReleases)
	p := take(t, s, 3) // all three permits are back, and no more
	_, ok := s.TryAcquire(1)
	require.False(t, ok)
	p.Release()
}

func TestDoReturnsFnErrorAndReleases(t *testing.T) {
	s := semaphore.New(1)
	errWork := errors.New("work failed")
	require.Equal(t, errWork, s.Do(context.Background(), 1, func(context.Context) error { return errWork }))
	require.NoError(t, s.Do(context.Background(), 1, func(context.Context) error { return nil }))
	st := requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Released)
}

func TestDoubleReleaseAndCopyReleaseAreCountedNoOps(t *testing.T) {
	s := semaphore.New(3)
	p, err := s.Acquire(context.Background(), 2)
	require.NoError(t, err)
	cp := p

	noExtraPermit := func() {
		t.Helper()
		st := s.Stats()
		require.LessOrEqual(t, st.Available, st.Capacity, "a release freed more than was held: %+v", st)
	}
	require.True(t, p.Release())
	noExtraPermit()
	require.False(t, cp.Release(), "release through a copy")
	noExtraPermit()
	require.False(t, p.Release(), "second release")
	noExtraPermit()
	require.False(t, cp.Release())
	noExtraPermit()

	st := requireBalanced(t, s)
	require.Equal(t, int64(3), st.Available, "no permit is freed twice")
	require.Equal(t, uint64(3), st.DoubleReleases)
	require.Equal(t, uint64(1), st.Released)

	// The capacity is exactly three again: three fit, a fourth does not.
	all := take(t, s, 3)
	_, ok := s.TryAcquire(1)
	require.False(t, ok)
	require.True(t, all.Release())
}

func TestStaleCopyCannotFreeReGrantedPermit(t *testing.T) {
	t.Run("inline token, fast path", func(t *testing.T) {
		s := semaphore.New(1)
		p1 := take(t, s, 1)
		stale := p1
		require.True(t, p1.Release())
		p2, err := s.Acquire(context.Background(), 1) // takes the same token
		require.NoError(t, err)

		require.False(t, stale.Release())
		st := s.Stats()
		require.Equal(t, int64(1), st.Held, "the new holder's permit must stay out")
		require.Equal(t, uint64(1), st.DoubleReleases)
		_, ok := s.TryAcquire(1)
		require.False(t, ok)
		require.True(t, p2.Release())
		requireBalanced(t, s)
	})
	t.Run("token handed to a waiter", func(t *testing.T) {
		s := semaphore.New(1)
		p1 := take(t, s, 1)
		stale := p1
		w := enqueue(t, context.Background(), s, 1)
		require.True(t, p1.Release())
		r := recv(t, w)
		require.NoError(t, r.err)

		require.False(t, stale.Release())
		require.Equal(t, int64(1), s.Stats().Held)
		require.True(t, r.p.Release())
		requireBalanced(t, s)
	})
	t.Run("spare token beyond the inline ones", func(t *testing.T) {
		s := semaphore.New(20)
		var inline []semaphore.Permit
		for range 15 { // every inline token out
			inline = append(inline, take(t, s, 1))
		}
		p1 := take(t, s, 1)
		stale := p1
		require.True(t, p1.Release())
		p2 := take(t, s, 1) // reuses the pooled spare token
		require.False(t, stale.Release())
		require.Equal(t, int64(16), s.Stats().Held)
		require.True(t, p2.Release())
		for _, p := range inline {
			require.True(t, p.Release())
		}
		st := requireBalanced(t, s)
		require.Equal(t, uint64(1), st.DoubleReleases)
	})
}

func TestPermitWeightIsTheAcquiredWeight(t *testing.T) {
	s := semaphore.New(5)
	p, err := s.Acquire(context.Background(), 3)
	require.NoError(t, err)
	q := take(t, s, 2)
	require.Equal(t, int64(3), p.Weight())
	require.Equal(t, int64(2), q.Weight())
	require.True(t, p.Release())
	require.Equal(t, int64(3), p.Weight(), "Weight does not change on release")
	require.True(t, q.Release())
}

func TestZeroPermitReleaseIsFalse(t *testing.T) {
	var p semaphore.Permit
	require.False(t, p.Release())
	require.False(t, p.Release())
	require.Zero(t, p.Weight())
	require.False(t, p.Valid())
}

// TestReleaseHappensBeforeUnblockedAcquire relies on the race detector: a
// holder writes plain memory before Release, and the goroutine whose Acquire
// that Release unblocks reads it, with no other synchronisation between them.
func TestReleaseHappensBeforeUnblockedAcquire(t *testing.T) {
	s := semaphore.New(1)
	var shared int
	h := take(t, s, 1)
	got := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, err := s.Acquire(context.Background(), 1) // waits for h
		if err != nil {
			got <- -1
			return
		}
		got <- shared
		shared = 2
		p.Release()
	}()
	waitFor(t, "the waiter to queue", func() bool { return s.Stats().Waiters == 1 })
	shared = 1
	h.Release()
	require.Equal(t, 1, <-got)

	p, err := s.Acquire(context.Background(), 1) // after the goroutine's release
	require.NoError(t, err)
	require.Equal(t, 2, shared)
	p.Release()
	<-done
}

// --- FIFO ------------------------------------------------------------------

func TestHeavyHeadWaiterIsNotOvertaken(t *testing.T) {
	s := semaphore.New(10)
	small := take(t, s, 5)
	heavy := enqueue(t, context.Background(), s, 8)
	light := enqueue(t, context.Background(), s, 1)

	// Five permits are free, but the heavy request came first.
	_, ok := s.TryAcquire(1)
	require.False(t, ok, "TryAcquire overtook a waiter")
	stillWaiting(t, light)
	stillWaiting(t, heavy)
	st := s.Stats()
	require.Equal(t, int64(5), st.Available)
	require.Equal(t, 2, st.Waiters)
	require.Equal(t, int64(9), st.WaitingWeight)

	require.True(t, small.Release())
	rh := recv(t, heavy)
	require.NoError(t, rh.err)
	rl := recv(t, light) // 8 + 1 fit in 10: both are served
	require.NoError(t, rl.err)
	require.True(t, rh.p.Release())
	require.True(t, rl.p.Release())
	st = requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Waited)
}

func TestCancelledHeadWaiterWakesNext(t *testing.T) {
	s := semaphore.New(2)
	h := take(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	head := enqueue(t, ctx, s, 2)
	next := enqueue(t, context.Background(), s, 1)
	stillWaiting(t, next)

	cancel()
	require.ErrorIs(t, recv(t, head).err, context.Canceled)
	r := recv(t, next)
	require.NoError(t, r.err, "the waiter behind a cancelled head must be served when it fits")
	require.Equal(t, int64(2), s.Stats().Held)
	require.True(t, r.p.Release())
	require.True(t, h.Release())
	requireBalanced(t, s)
}

func TestSetCapacityGrowWakesWaitersInOrder(t *testing.T) {
	s := semaphore.New(3)
	h := take(t, s, 3)
	a := enqueue(t, context.Background(), s, 2)
	b := enqueue(t, context.Background(), s, 1)
	c := enqueue(t, context.Background(), s, 3)

	s.SetCapacity(4) // one free: A (2) does not fit, and B may not pass it
	require.Equal(t, 3, s.Stats().Waiters)
	stillWaiting(t, b)

	s.SetCapacity(5) // two free: A
	ra := recv(t, a)
	require.NoError(t, ra.err)
	require.Equal(t, 2, s.Stats().Waiters)
	stillWaiting(t, b)

	s.SetCapacity(6) // one more: B
	rb := recv(t, b)
	require.NoError(t, rb.err)
	stillWaiting(t, c)

	require.True(t, h.Release()) // three back: C
	rc := recv(t, c)
	require.NoError(t, rc.err)
	st := s.Stats()
	require.Equal(t, int64(6), st.Held)
	require.Zero(t, st.Available)
	for _, r := range []result{ra, rb, rc} {
		require.True(t, r.p.Release())
	}
	requireBalanced(t, s)
}

func TestSetCapacityShrinkDrainsHolders(t *testing.T) {
	s := semaphore.New(5)
	p1, p2 := take(t, s, 2), take(t, s, 2)

	s.SetCapacity(2)
	st := s.Stats()
	require.Equal(t, int64(2), st.Capacity)
	require.Equal(t, int64(-2), st.Available, "nothing is taken from holders")
	require.Equal(t, int64(4), st.Held)
	_, ok := s.TryAcquire(1)
	require.False(t, ok)

	w := enqueue(t, context.Background(), s, 1)
	require.True(t, p1.Release())
	require.Zero(t, s.Stats().Available)
	stillWaiting(t, w)
	require.Equal(t, 1, s.Stats().Waiters, "no grant until Available is back above zero")

	require.True(t, p2.Release())
	r := recv(t, w)
	require.NoError(t, r.err)
	st = s.Stats()
	require.Equal(t, int64(1), st.Available)
	require.Equal(t, int64(1), st.Held)
	require.True(t, r.p.Release())
	requireBalanced(t, s)
}

func TestShrinkFailsWaitersAboveNewCapacity(t *testing.T) {
	s := semaphore.New(5)
	h := take(t, s, 5)
	heavy := enqueue(t, context.Background(), s, 4)
	light := enqueue(t, context.Background(), s, 2)

	s.SetCapacity(3)
	r := recv(t, heavy)
	require.ErrorIs(t, r.err, semaphore.ErrTooHeavy)
	require.False(t, r.p.Valid())
	st := s.Stats()
	require.Equal(t, 1, st.Waiters)
	require.Equal(t, int64(2), st.WaitingWeight)
	stillWaiting(t, light)

	_, err := s.Acquire(context.Background(), 4)
	require.ErrorIs(t, err, semaphore.ErrTooHeavy, "new requests above the capacity fail too")

	require.True(t, h.Release())
	rl := recv(t, light)
	require.NoError(t, rl.err)
	require.True(t, rl.p.Release())
	requireBalanced(t, s)
}

func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	const n = 20
	s := semaphore.New(1)
	h := take(t, s, 1)
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		want := s.Stats().Waiters + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(context.Background(), 1)
			if err != nil {
				order <- -1
				return
			}
			order <- i
			p.Release()
		}()
		waitFor(t, fmt.Sprintf("waiter %d to queue", i), func() bool { return s.Stats().Waiters == want })
	}
	h.Release()
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, got)
	st := requireBalanced(t, s)
	require.Equal(t, uint64(n), st.Waited)
}

// --- Bounded waiting --------------------------------------------------------

func TestMaxWaitersRejectsTheExtraWaiterAtOnce(t *testing.T) {
	s := semaphore.New(1, semaphore.WithMaxWaiters(2))
	h := take(t, s, 1)
	a := enqueue(t, context.Background(), s, 1)
	b := enqueue(t, context.Background(), s, 1)

	p, err := s.Acquire(context.Background(), 1) // returns at once: no goroutine needed
	require.ErrorIs(t, err, semaphore.ErrQueueFull)
	require.False(t, p.Valid())
	st := s.Stats()
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, 2, st.Waiters)

	h.Release()
	ra := recv(t, a)
	require.NoError(t, ra.err)
	c := enqueue(t, context.Background(), s, 1) // a place is free again
	ra.p.Release()
	rb := recv(t, b)
	require.NoError(t, rb.err)
	rb.p.Release()
	rc := recv(t, c)
	require.NoError(t, rc.err)
	rc.p.Release()
	requireBalanced(t, s)
}

func TestMaxWaitingWeightRejectsExtraWeightAtOnce(t *testing.T) {
	s := semaphore.New(4, semaphore.WithMaxWaitingWeight(5))
	h := take(t, s, 4)
	ctx, cancel := context.WithCancel(context.Background())
	a := enqueue(t, ctx, s, 3)
	b := enqueue(t, context.Background(), s, 2)

	_, err := s.Acquire(context.Background(), 1)
	require.ErrorIs(t, err, semaphore.ErrQueueFull, "3+2+1 > 5")
	require.Equal(t, uint64(1), s.Stats().Rejected)

	cancel()
	require.ErrorIs(t, recv(t, a).err, context.Canceled)
	c := enqueue(t, context.Background(), s, 3) // 2+3 <= 5

	h.Release()
	rb := recv(t, b)
	require.NoError(t, rb.err)
	stillWaiting(t, c) // 2 of 4 are out: 3 does not fit
	rb.p.Release()
	rc := recv(t, c)
	require.NoError(t, rc.err)
	rc.p.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Cancelled)
}

func TestMaxWaitTimesOutWaiterWithErrWaitTooLong(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(2, semaphore.WithMaxWait(time.Minute), semaphore.WithClock(clk))
	h := take(t, s, 1)
	head := enqueue(t, context.Background(), s, 2)
	clk.BlockUntilPending(1)
	clk.Advance(time.Second)
	next := enqueue(t, context.Background(), s, 1)
	clk.BlockUntilPending(2)

	clk.Advance(time.Minute - 2*time.Second)
	require.Equal(t, 2, s.Stats().Waiters, "nobody has waited a minute yet")
	stillWaiting(t, head)

	clk.Advance(time.Second) // the head has waited a minute
	r := recv(t, head)
	require.ErrorIs(t, r.err, semaphore.ErrWaitTooLong)
	require.False(t, r.p.Valid())
	rn := recv(t, next) // the head leaving lets the next one in
	require.NoError(t, rn.err)
	st := s.Stats()
	require.Equal(t, uint64(1), st.TimedOut)
	require.Zero(t, st.Cancelled)
	require.Equal(t, int64(2), st.Held)
	require.Zero(t, clk.Pending(), "the served waiter stopped its timer")

	rn.p.Release()
	h.Release()
	requireBalanced(t, s)
}

func TestCloseWakesWaitersAndRefusesLaterAcquires(t *testing.T) {
	s := semaphore.New(3)
	h := take(t, s, 2)
	a := enqueue(t, context.Background(), s, 2)
	b := enqueue(t, context.Background(), s, 3)

	s.Close()
	for _, w := range []<-chan result{a, b} {
		r := recv(t, w)
		require.ErrorIs(t, r.err, semaphore.ErrClosed)
		require.False(t, r.p.Valid())
	}
	st := s.Stats()
	require.True(t, st.Closed)
	require.Zero(t, st.Waiters)
	require.Zero(t, st.WaitingWeight)

	_, err := s.Acquire(context.Background(), 1)
	require.ErrorIs(t, err, semaphore.ErrClosed)
	require.ErrorIs(t, s.Do(context.Background(), 1, func(context.Context) error {
		t.Error("fn ran on a closed semaphore")
		return nil
	}), semaphore.ErrClosed)
	_, ok := s.TryAcquire(1)
	require.False(t, ok)

	require.True(t, h.Release(), "permits held at Close stay valid")
	require.False(t, h.Release())
	s.Close() // idempotent
	st = requireBalanced(t, s)
	require.Equal(t, int64(3), st.Available)
	require.Equal(t, uint64(1), st.Released)
	require.Equal(t, uint64(1), st.DoubleReleases)
	require.Equal(t, uint64(2), st.Rejected)
}

// --- Bad input --------------------------------------------------------------

func TestInvalidWeightIsAnError(t *testing.T) {
	s := semaphore.New(3)
	for _, n := range []int64{0, -1, -1 << 40} {
		p, err := s.Acquire(context.Background(), n)
		require.ErrorIs(t, err, semaphore.ErrInvalidWeight, "n=%d", n)
		require.False(t, p.Valid())
		_, ok := s.TryAcquire(n)
		require.False(t, ok, "n=%d", n)
		require.ErrorIs(t, s.Do(context.Background(), n, func(context.Context) error { return nil }), semaphore.ErrInvalidWeight)
	}
	st := requireBalanced(t, s)
	require.Equal(t, uint64(6), st.Rejected)
}

func TestTooHeavyIsAnErrorNotAHang(t *testing.T) {
	s := semaphore.New(3)
	h := take(t, s, 1)
	w := enqueue(t, context.Background(), s, 3) // a queue does not change the answer
	for _, n := range []int64{4, semaphore.MaxCapacity} {
		p, err := s.Acquire(context.Background(), n)
		require.ErrorIs(t, err, semaphore.ErrTooHeavy, "n=%d", n)
		require.False(t, p.Valid())
		_, ok := s.TryAcquire(n)
		require.False(t, ok)
	}
	_, err := semaphore.New(0).Acquire(context.Background(), 1)
	require.ErrorIs(t, err, semaphore.ErrTooHeavy, "capacity 0")

	h.Release()
	r := recv(t, w)
	require.NoError(t, r.err)
	r.p.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Rejected)
}

// requirePanicsWithPrefix checks that f panics with a string that starts
// with the package prefix.
func requirePanicsWithPrefix(t *testing.T, f func()) {
	t.Helper()
	var v any
	func() {
		defer func() { v = recover() }()
		f()
	}()
	msg, ok := v.(string)
	if err, isErr := v.(error); isErr { // a bad setting panics with Validate's error
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
		msg, ok = err.Error(), true
	}
	require.True(t, ok, "want a panic with a string or an error, got %#v", v)
	require.True(t, strings.HasPrefix(msg, "semaphore: "), "panic %q lacks the package prefix", msg)
}

func TestProgrammingErrorsPanicWithPackagePrefix(t *testing.T) {
	s := semaphore.New(1)
	cases := map[string]func(){
		"New(-1)":              func() { semaphore.New(-1) },
		"New(MaxCapacity+1)":   func() { semaphore.New(semaphore.MaxCapacity + 1) },
		"SetCapacity(-1)":      func() { s.SetCapacity(-1) },
		"SetCapacity(too big)": func() { s.SetCapacity(semaphore.MaxCapacity + 1) },
		//lint:ignore SA1012 a nil context is the point of the test
		"Acquire(nil ctx)": func() { _, _ = s.Acquire(nil, 1) },
		//lint:ignore SA1012 a nil context is the point of the test
		"Do(nil ctx)": func() { _ = s.Do(nil, 1, func(context.Context) error { return nil }) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) { requirePanicsWithPrefix(t, f) })
	}
	//lint:ignore SA1012 a nil context is the point of the test
	require.PanicsWithValue(t, "semaphore: nil Context", func() { _, _ = s.Acquire(nil, 1) })
	st := requireBalanced(t, s)
	require.Equal(t, int64(1), st.Capacity, "a refused SetCapacity changes nothing")
}

func TestNewWithMaxCapacityWorks(t *testing.T) {
	s := semaphore.New(semaphore.MaxCapacity)
	p, err := s.Acquire(context.Background(), semaphore.MaxCapacity)
	require.NoError(t, err)
	require.Zero(t, s.Stats().Available)
	require.True(t, p.Release())
	require.Equal(t, int64(semaphore.MaxCapacity), s.Stats().Available)
}

// --- Beyond the inline tokens ----------------------------------------------

func TestManyHoldersBeyondInlineTokens(t *testing.T) {
	const holders = 50
	s := semaphore.New(100)
	var ps []semaphore.Permit
	for i := range holders {
		if i%2 == 0 {
			p, err := s.Acquire(context.Background(), 1)
			require.NoError(t, err, "holder %d", i)
			ps = append(ps, p)
		} else {
			ps = append(ps, take(t, s, 1))
		}
	}
	st := s.Stats()
	require.Equal(t, int64(holders), st.Held)
	require.Equal(t, uint64(holders), st.Acquired)
	require.Zero(t, st.Released)

	// A spare-token permit (the last ones taken) released twice.
	last := ps[holders-1]
	require.True(t, last.Release())
	require.False(t, last.Release())
	require.Equal(t, int64(holders-1), s.Stats().Held)
	for _, p := range ps[:holders-1] {
		require.True(t, p.Release())
	}
	st = requireBalanced(t, s)
	require.Equal(t, uint64(holders), st.Acquired)
	require.Equal(t, uint64(holders), st.Released)
	require.Equal(t, uint64(1), st.DoubleReleases)
	require.Equal(t, int64(100), st.Available)

	// Waiters beyond the inline tokens are granted spare tokens too.
	ps = ps[:0]
	for range holders {
		ps = append(ps, take(t, s, 1))
	}
	big := take(t, s, 50)
	ws := make([]<-chan result, 10)
	for i := range ws {
		ws[i] = enqueue(t, context.Background(), s, 5)
	}
	require.True(t, big.Release())
	for i, w := range ws {
		r := recv(t, w)
		require.NoError(t, r.err, "waiter %d", i)
		ps = append(ps, r.p)
	}
	require.Equal(t, int64(100), s.Stats().Held)
	for _, p := range ps {
		require.True(t, p.Release())
	}
	st = requireBalanced(t, s)
	require.Equal(t, uint64(2*holders+1+len(ws)), st.Released)
}

// --- Stress -----------------------------------------------------------------

// TestStressRandomOpsNeverExceedCapacity runs goroutines that acquire,
// try, cancel, release and double-release at random against an oracle: the
// weight they hold, counted after each grant and before each release, never
// exceeds the capacity.
func TestStressRandomOpsNeverExceedCapacity(t *testing.T) {
	const (
		workers  = 16
		ops      = 600
		capacity = 5
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s := semaphore.New(capacity)
	var (
		held, maxHeld            atomic.Int64
		grants, doubles, failing atomic.Uint64
		wg, cancellers           sync.WaitGroup
	)
	hold := func(p semaphore.Permit, double bool) {
		grants.Add(1)
		v := held.Add(p.Weight())
		for m := maxHeld.Load(); v > m && !maxHeld.CompareAndSwap(m, v); m = maxHeld.Load() {
		}
		if v > capacity {
			t.Errorf("oracle holds %d > capacity %d", v, capacity)
		}
		runtime.Gosched()
		held.Add(-p.Weight())
		if !p.Release() {
			t.Errorf("first release of a granted permit returned false")
		}
		if double {
			doubles.Add(1)
			if p.Release() {
				t.Errorf("second release returned true")
			}
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range ops {
				n := 1 + r.Int64N(3)
				double := r.IntN(8) == 0
				switch r.IntN(5) {
				case 0:
					p, err := s.Acquire(context.Background(), n)
					if err != nil {
						t.Errorf("Acquire(%d): %v", n, err)
						continue
					}
					hold(p, double)
				case 1:
					if p, ok := s.TryAcquire(n); ok {
						hold(p, double)
					}
				case 2: // cancellation racing the wait or the grant
					ctx, cancel := context.WithCancel(context.Background())
					cancellers.Add(1)
					go func() { defer cancellers.Done(); cancel() }()
					p, err := s.Acquire(ctx, n)
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							t.Errorf("cancelled Acquire: %v", err)
						}
						failing.Add(1)
						continue
					}
					hold(p, double)
				case 3:
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if _, err := s.Acquire(ctx, n); err != context.Canceled {
						t.Errorf("Acquire with a done context: %v", err)
					}
					failing.Add(1)
				case 4:
					err := s.Do(context.Background(), n, func(context.Context) error {
						grants.Add(1)
						if v := held.Add(n); v > capacity {
							t.Errorf("oracle holds %d > capacity %d", v, capacity)
						}
						held.Add(-n)
						return nil
					})
					if err != nil {
						t.Errorf("Do: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	cancellers.Wait()

	st := requireBalanced(t, s)
	require.Equal(t, int64(capacity), st.Available)
	require.Equal(t, doubles.Load(), st.DoubleReleases)
	require.Equal(t, failing.Load(), st.Cancelled)
	// Grants that raced a cancellation were taken back by the semaphore,
	// never seen by a worker, and counted as cancelled, not acquired.
	require.Equal(t, grants.Load(), st.Acquired)
	assert.LessOrEqual(t, maxHeld.Load(), int64(capacity))
	t.Logf("%+v, max held by the oracle %d", st, maxHeld.Load())
}

// TestStressSetCapacityRacingAcquireRelease shrinks and grows the capacity
// (5, 3, 5, ...) while workers acquire and release on the lock-free fast
// path and in the queue. The weight held never exceeds the largest capacity,
// and once the capacity is back at 5 every permit is accounted for.
func TestStressSetCapacityRacingAcquireRelease(t *testing.T) {
	const (
		workers = 8
		ops     = 1000
		maxCap  = 5
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s := semaphore.New(maxCap)
	var (
		held   atomic.Int64
		grants atomic.Uint64
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				s.SetCapacity(maxCap)
				resized <- n
				return
			default:
			}
			s.SetCapacity(maxCap - 2*int64(n%2))
			n++
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range ops {
				n := 1 + r.Int64N(3) // never above the smaller capacity
				var p semaphore.Permit
				if r.IntN(2) == 0 {
					var err error
					if p, err = s.Acquire(context.Background(), n); err != nil {
						t.Errorf("Acquire(%d): %v", n, err)
						return
					}
				} else {
					var ok bool
					if p, ok = s.TryAcquire(n); !ok {
						continue
					}
				}
				grants.Add(1)
				if v := held.Add(n); v > maxCap {
					t.Errorf("oracle holds %d > largest capacity %d", v, maxCap)
				}
				runtime.Gosched()
				held.Add(-n)
				if !p.Release() {
					t.Errorf("first release returned false")
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d capacity changes", <-resized)

	st := requireBalanced(t, s)
	require.Equal(t, int64(maxCap), st.Capacity)
	require.Equal(t, int64(maxCap), st.Available)
	require.Equal(t, grants.Load(), st.Acquired)
	require.Zero(t, st.Rejected)
}

// Capacity reads the capacity without the lock: it follows SetCapacity,
// and answers while another goroutine's Stats or SetCapacity run.
func TestCapacityFollowsSetCapacity(t *testing.T) {
	s := semaphore.New(3)
	require.Equal(t, int64(3), s.Capacity())
	s.SetCapacity(7)
	require.Equal(t, int64(7), s.Capacity())
	require.Equal(t, s.Stats().Capacity, s.Capacity())
	s.SetCapacity(0)
	require.Zero(t, s.Capacity())
}
