package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// line is a semaphore of capacity 1 on a fake clock whose permit the test
// holds, and waiters that record the order they are served in: each sends
// its name, then releases, so the next is served only after the send.
type line struct {
	t     *testing.T
	s     *semaphore.Weighted
	clk   *clock.Fake
	hold  semaphore.Permit
	order chan string
	wg    sync.WaitGroup
	n     int
}

func newLine(t *testing.T, opts ...semaphore.Option) *line {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(1, append([]semaphore.Option{semaphore.WithClock(clk)}, opts...)...)
	return &line{t: t, s: s, clk: clk, hold: take(t, s, 1), order: make(chan string, 64)}
}

// join starts a waiter named name that asks for its place with turn (a
// plain Acquire if plain) and returns once it waits.
func (l *line) join(name string, turn []semaphore.AcquireOption, plain bool) {
	l.t.Helper()
	l.n++
	want := l.s.Stats().Waiters + 1
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var p semaphore.Permit
		var err error
		if plain {
			p, err = l.s.Acquire(context.Background(), 1)
		} else {
			p, err = l.s.Acquire(context.Background(), 1, turn...)
		}
		if err != nil {
			l.order <- name + ": " + err.Error()
			return
		}
		l.order <- name
		p.Release()
	}()
	waitFor(l.t, name+" to queue", func() bool { return l.s.Stats().Waiters == want })
}

// served releases the test's permit and returns the order of service.
func (l *line) served() []string {
	l.t.Helper()
	l.hold.Release()
	testkit.WaitAll(l.t, &l.wg, "every waiter to be served")
	got := make([]string, 0, l.n)
	for range l.n {
		got = append(got, <-l.order)
	}
	st := requireBalanced(l.t, l.s)
	require.Equal(l.t, uint64(l.n), st.Waited)
	return got
}

func TestPrioritiesServeHigherFirstAndFIFOWithinAPriority(t *testing.T) {
	l := newLine(t, semaphore.WithPriorities(time.Second))
	l.join("plain", []semaphore.AcquireOption{}, true) // priority 0
	l.join("p1a", []semaphore.AcquireOption{semaphore.Priority(1)}, false)
	l.join("p-1", []semaphore.AcquireOption{semaphore.Priority(-1)}, false)
	l.join("p2", []semaphore.AcquireOption{semaphore.Priority(2)}, false)
	l.join("p1b", []semaphore.AcquireOption{semaphore.Priority(1)}, false)
	l.join("p0", []semaphore.AcquireOption{}, false)
	l.join("p1c", []semaphore.AcquireOption{semaphore.Priority(1)}, false)
	require.Equal(t, []string{"p2", "p1a", "p1b", "p1c", "plain", "p0", "p-1"}, l.served())
}

func TestPrioritiesKeepArrivalOrderAsTheClockMoves(t *testing.T) {
	l := newLine(t, semaphore.WithPriorities(time.Second))
	var want []string
	for i := range 12 {
		name := fmt.Sprint("w", i)
		l.join(name, []semaphore.AcquireOption{semaphore.Priority(3)}, false)
		want = append(want, name)
		l.clk.Advance(time.Duration(i) * 300 * time.Millisecond)
	}
	require.Equal(t, want, l.served())
}

// The aging bound: a waiter of priority p is overtaken by a waiter of
// priority q > p only if that one arrives less than (q-p)*step after it.
func TestAgingBoundsOvertaking(t *testing.T) {
	const step = time.Second
	for _, tc := range []struct {
		p, q   int
		waited time.Duration
		first  string
	}{
		{0, 2, 0, "new"},
		{0, 2, 2*step - 1, "new"},
		{0, 2, 2 * step, "old"}, // equal effective priorities: arrival order
		{0, 2, 2*step + 1, "old"},
		{0, 2, time.Hour, "old"},
		{-1, 1, 2*step - 1, "new"},
		{-1, 1, 2 * step, "old"},
		{-1, 1, 1 * step, "new"},
		{0, 1, step - 1, "new"},
		{0, 1, step, "old"},
		{-3, 3, 6*step - 1, "new"},
		{-3, 3, 6 * step, "old"},
		{2, 2, 0, "old"}, // the same class: FIFO
		{2, 1, 0, "old"}, // a lower one never overtakes
	} {
		t.Run(fmt.Sprintf("p=%d/q=%d/waited=%v", tc.p, tc.q, tc.waited), func(t *testing.T) {
			l := newLine(t, semaphore.WithPriorities(step))
			l.join("old", []semaphore.AcquireOption{semaphore.Priority(tc.p)}, false)
			l.clk.Advance(tc.waited)
			l.join("new", []semaphore.AcquireOption{semaphore.Priority(tc.q)}, false)
			got := l.served()
			require.Equal(t, tc.first, got[0], "served %v", got)
		})
	}
}

// Once a waiter has waited (P-p)*step, no newcomer of priority up to P gets
// ahead of it, however many come: it is served once those ahead of it then
// are.
func TestAgedWaiterIsNotPassedByLaterArrivals(t *testing.T) {
	const step = 10 * time.Millisecond
	l := newLine(t, semaphore.WithPriorities(step))
	l.join("ahead", []semaphore.AcquireOption{semaphore.Priority(5)}, false)
	l.join("cron", []semaphore.AcquireOption{semaphore.Priority(-2)}, false)
	l.clk.Advance(7*step - 1) // cron still yields to a priority 5 newcomer
	l.join("user0", []semaphore.AcquireOption{semaphore.Priority(5)}, false)
	l.clk.Advance(1) // now it has waited (5 - -2)*step
	for i := range 5 {
		l.join(fmt.Sprint("user", i+1), []semaphore.AcquireOption{semaphore.Priority(5)}, false)
	}
	require.Equal(t, []string{"ahead", "user0", "cron", "user1", "user2", "user3", "user4", "user5"}, l.served())
}

func TestPrioritiesHeavyHeadIsNotOvertaken(t *testing.T) {
	s := semaphore.New(10, semaphore.WithPriorities(time.Second), semaphore.WithClock(clock.NewFake(time.Unix(0, 0))))
	small := take(t, s, 5)
	heavy := enqueueTurn(t, s, 8, []semaphore.AcquireOption{semaphore.Priority(1)})
	light := enqueueTurn(t, s, 1, []semaphore.AcquireOption{semaphore.Priority(1)}) // the same class, later
	lower := enqueueTurn(t, s, 1, []semaphore.AcquireOption{})

	// Five permits are free, but the heavy request is at the head.
	_, ok := s.TryAcquire(1)
	require.False(t, ok, "TryAcquire overtook a waiter")
	stillWaiting(t, heavy)
	stillWaiting(t, light)
	stillWaiting(t, lower)
	st := s.Stats()
	require.Equal(t, int64(5), st.Available)
	require.Equal(t, 3, st.Waiters)

	require.True(t, small.Release())
	for _, ch := range []<-chan result{heavy, light, lower} { // 8 + 1 + 1 fit in 10
		r := recv(t, ch)
		require.NoError(t, r.err)
		require.True(t, r.p.Release())
	}
	st = requireBalanced(t, s)
	require.Equal(t, uint64(3), st.Waited)
}

// A newcomer whose place is ahead of the head (a higher effective
// priority) takes free permits at once, as from an empty line: no waiter
// is ahead of it, and nothing else would serve it until the next release.
func TestPriorityNewcomerAheadOfAHeavyHeadTakesFreePermits(t *testing.T) {
	s := semaphore.New(10, semaphore.WithPriorities(time.Second), semaphore.WithClock(clock.NewFake(time.Unix(0, 0))))
	small := take(t, s, 5)
	heavy := enqueueTurn(t, s, 8, []semaphore.AcquireOption{})

	r := recv(t, acquireTurnAsync(s, 3, []semaphore.AcquireOption{semaphore.Priority(1)})) // returns at once
	require.NoError(t, r.err)
	p := r.p
	st := s.Stats()
	require.Equal(t, int64(2), st.Available)
	require.Equal(t, 1, st.Waiters)
	require.Zero(t, st.Waited)

	// One that does not fit waits ahead of the heavy head.
	urgent := enqueueTurn(t, s, 4, []semaphore.AcquireOption{semaphore.Priority(1)})
	require.True(t, small.Release()) // 7 free: urgent (4) at the head, then heavy (8) must wait
	r = recv(t, urgent)
	require.NoError(t, r.err)
	stillWaiting(t, heavy)
	require.True(t, r.p.Release())
	require.True(t, p.Release())
	rh := recv(t, heavy)
	require.NoError(t, rh.err)
	require.True(t, rh.p.Release())
	requireBalanced(t, s)
}

// acquireTurnAsync is acquireAsync through AcquireTurn.
func acquireTurnAsync(s *semaphore.Weighted, n int64, turn []semaphore.AcquireOption) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(context.Background(), n, turn...)
		ch <- result{p, err}
	}()
	return ch
}

// enqueueTurn is enqueue through AcquireTurn.
func enqueueTurn(t *testing.T, s *semaphore.Weighted, n int64, turn []semaphore.AcquireOption) <-chan result {
	t.Helper()
	want := s.Stats().Waiters + 1
	ch := acquireTurnAsync(s, n, turn)
	waitFor(t, fmt.Sprintf("AcquireTurn(%d, %+v) to queue", n, turn), func() bool {
		if len(ch) > 0 {
			r := <-ch
			t.Fatalf("AcquireTurn(%d, %+v) returned (%v, %v) instead of waiting", n, turn, r.p.Weight(), r.err)
		}
		return s.Stats().Waiters == want
	})
	return ch
}

func TestZeroTurnOnAFIFOSemaphoreIsAcquire(t *testing.T) {
	l := newLine(t)
	var want []string
	for i := range 8 {
		name := fmt.Sprint("w", i)
		l.join(name, []semaphore.AcquireOption{}, i%2 == 0)
		want = append(want, name)
	}
	require.Equal(t, want, l.served())

	s := semaphore.New(2)
	p, err := s.Acquire(context.Background(), 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), p.Weight())
	require.True(t, p.Release())
	requireBalanced(t, s)
}

// A Turn field the semaphore has no option for, or a priority out of
// range, is refused before anything else: nothing is taken, even with
// permits free, and the refusal counts in Rejected.
func TestTurnsWithoutTheirOptionAreRefused(t *testing.T) {
	fifo := semaphore.New(4)
	prio := semaphore.New(4, semaphore.WithPriorities(time.Second))
	for _, tc := range []struct {
		s    *semaphore.Weighted
		turn []semaphore.AcquireOption
		name string // named in the error
	}{
		{fifo, []semaphore.AcquireOption{semaphore.Priority(1)}, "WithPriorities"},
		{fifo, []semaphore.AcquireOption{semaphore.Priority(-1)}, "WithPriorities"},
		{fifo, []semaphore.AcquireOption{semaphore.Sequence(7)}, "WithSequenceOrder"},
		{fifo, []semaphore.AcquireOption{semaphore.Group("tenant")}, "WithFairShare"},
		{fifo, []semaphore.AcquireOption{semaphore.Weight(2)}, "as an argument"},
		{prio, []semaphore.AcquireOption{semaphore.Sequence(7)}, "WithSequenceOrder"},
		{prio, []semaphore.AcquireOption{semaphore.Group("tenant"), semaphore.Priority(1)}, "WithFairShare"},
		{prio, []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority + 1)}, "out of range"},
		{prio, []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority - 1)}, "out of range"},
		{prio, []semaphore.AcquireOption{semaphore.Priority(math.MaxInt)}, "out of range"},
	} {
		before := tc.s.Stats()
		p, err := tc.s.Acquire(context.Background(), 1, tc.turn...)
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig, "%+v", tc.turn)
		require.ErrorContains(t, err, tc.name)
		require.False(t, p.Weight() != 0)
		err = tc.s.Do(context.Background(), 1, func(context.Context) error {
			return errors.New("fn ran")
		}, tc.turn...)
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig, "%+v", tc.turn)
		st := tc.s.Stats()
		require.Equal(t, before.Rejected+2, st.Rejected)
		require.Equal(t, before.Available, st.Available)
		require.Equal(t, before.Acquired, st.Acquired)
	}
	// The bounds themselves are priorities.
	for _, pr := range []int{call.MaxPriority, -call.MaxPriority} {
		p, err := prio.Acquire(context.Background(), 1, semaphore.Priority(pr))
		require.NoError(t, err)
		require.True(t, p.Release())
	}
	requireBalanced(t, fifo)
	requireBalanced(t, prio)
}

func TestWithPrioritiesRefusesANonPositiveStep(t *testing.T) {
	for _, step := range []time.Duration{0, -1, -time.Second} {
		err := semaphore.Validate(1, semaphore.WithPriorities(step))
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig, "step %v", step)
		require.ErrorContains(t, err, "WithPriorities")
		require.PanicsWithError(t, err.Error(), func() { semaphore.New(1, semaphore.WithPriorities(step)) })
	}
	require.NoError(t, semaphore.Validate(1, semaphore.WithPriorities(1)))
	require.NoError(t, semaphore.Validate(1, semaphore.WithPriorities(time.Duration(math.MaxInt64))))
	// Given twice, the last step counts, as for any option.
	require.NoError(t, semaphore.Validate(1, semaphore.WithPriorities(0), semaphore.WithPriorities(time.Second)))
}

// A waiter's place is its priority and arrival; with the largest step, the
// extreme priorities and arrivals centuries after New nothing wraps or
// saturates: the order is exactly by priority.
func TestPriorityKeysDoNotOverflow(t *testing.T) {
	l := newLine(t, semaphore.WithPriorities(time.Duration(math.MaxInt64)))
	l.clk.Advance(time.Duration(math.MaxInt64))
	l.clk.Advance(time.Duration(math.MaxInt64))
	l.join("zero", []semaphore.AcquireOption{}, true)
	l.join("min", []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority)}, false)
	l.join("max", []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority)}, false)
	l.join("one", []semaphore.AcquireOption{semaphore.Priority(1)}, false)
	l.join("minusOne", []semaphore.AcquireOption{semaphore.Priority(-1)}, false)
	require.Equal(t, []string{"max", "one", "zero", "minusOne", "min"}, l.served())

	// A small step does not saturate: call.MaxPriority is ahead of call.MaxPriority-1.
	l = newLine(t, semaphore.WithPriorities(time.Nanosecond))
	l.join("below", []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority - 1)}, false)
	l.join("max", []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority)}, false)
	l.join("min", []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority)}, false)
	require.Equal(t, []string{"max", "below", "min"}, l.served())
}

// A waiter that leaves gives up its place; the line behind it is served
// in priority order, and a head that leaves lets the next one in.
func TestPriorityWaiterLeavingMovesTheLineOn(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(2, semaphore.WithPriorities(time.Second), semaphore.WithClock(clk))
	h := take(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heavy := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, 2, semaphore.Priority(2))
		heavy <- result{p, err}
	}()
	waitFor(t, "the heavy waiter to queue", func() bool { return s.Stats().Waiters == 1 })
	low := enqueueTurn(t, s, 1, []semaphore.AcquireOption{semaphore.Priority(-1)})
	stillWaiting(t, low)
	cancel() // the heavy head leaves: low fits in the one free permit
	require.ErrorIs(t, recv(t, heavy).err, context.Canceled)
	r := recv(t, low)
	require.NoError(t, r.err)
	require.True(t, r.p.Release())
	require.True(t, h.Release())
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Cancelled)
}

// TestPrioritiesRaceNoWaiterLostOrServedTwice runs rounds of waiters of
// mixed priorities and weights on the real clock, some cancelled while
// they wait, against a capacity that grows: every call returns once,
// with a permit or an error, and everything is back at the end.
func TestPrioritiesRaceNoWaiterLostOrServedTwice(t *testing.T) {
	const rounds, callers = 1000, 6
	s := semaphore.New(2, semaphore.WithPriorities(time.Microsecond))
	var granted, failed int
	for round := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		results := make(chan result, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := context.Background()
				if i%3 == 0 {
					c = ctx
				}
				p, err := s.Acquire(c, int64(1+i%2), semaphore.Priority(i%4-1))
				if err == nil {
					p.Release()
				}
				results <- result{p, err}
			}()
		}
		if round%2 == 0 {
			cancel()
		}
		if round%5 == 0 {
			s.SetCapacity(int64(2 + round%3))
		}
		testkit.WaitAll(t, &wg, "every caller to return")
		cancel()
		for range callers {
			r := <-results
			switch {
			case r.err == nil:
				granted++
			case errors.Is(r.err, context.Canceled):
				failed++
			default:
				t.Fatalf("round %d: %v", round, r.err)
			}
		}
		s.SetCapacity(2)
	}
	st := requireBalanced(t, s)
	require.Equal(t, uint64(granted), st.Acquired)
	require.Equal(t, uint64(failed), st.Cancelled)
}

// TestEndedContextBeforeRefusedOption: a context that has ended comes
// before an option's refusal, counted as cancelled, as in keyedsem; a
// lane's weight (lanequeue's) is refused, never taken as the argument.
func TestEndedContextBeforeRefusedOption(t *testing.T) {
	s := semaphore.New(4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := s.Stats()
	_, err := s.Acquire(ctx, 1, semaphore.Priority(1))
	require.ErrorIs(t, err, context.Canceled)
	st := s.Stats()
	require.Equal(t, before.Cancelled+1, st.Cancelled)
	require.Equal(t, before.Rejected, st.Rejected)
	p, err := s.Acquire(context.Background(), 1, lanequeue.LaneWeight("global", 3))
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.False(t, p.Weight() != 0)
	require.Equal(t, int64(0), s.Stats().Held)
}
