package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestNewRefusesBadSettings(t *testing.T) {
	s := semaphore.New(4)
	for name, tc := range map[string]struct {
		floor, ceiling int64
		opts           []adaptive.Option
	}{
		"floor 0":          {0, 10, nil},
		"ceiling < floor":  {5, 4, nil},
		"ceiling too high": {1, semaphore.MaxCapacity + 1, nil},
		"initial below":    {2, 10, []adaptive.Option{adaptive.WithInitial(1)}},
		"initial above":    {2, 10, []adaptive.Option{adaptive.WithInitial(11)}},
		"initial 0":        {2, 10, []adaptive.Option{adaptive.WithInitial(0)}}, // not "unset": out of range
		"two algorithms":   {1, 10, []adaptive.Option{adaptive.WithAIMD(1, 0.9), adaptive.WithVegas(0.1, 0.2)}},
		"increase 0":       {1, 10, []adaptive.Option{adaptive.WithAIMD(0, 0.9)}},
		"backoff 1":        {1, 10, []adaptive.Option{adaptive.WithAIMD(1, 1)}},
		"backoff 0.4":      {1, 10, []adaptive.Option{adaptive.WithAIMD(1, 0.4)}},
		"alpha >= beta":    {1, 10, []adaptive.Option{adaptive.WithVegas(0.3, 0.2)}},
		"beta 1":           {1, 10, []adaptive.Option{adaptive.WithVegas(0.1, 1)}},
		"window 0":         {1, 10, []adaptive.Option{adaptive.WithMinWindow(0)}},
		"window over 2^20": {1, 10, []adaptive.Option{adaptive.WithMinWindow(1<<20 + 1)}}, // was capped in silence
		"nil classifier":   {1, 10, []adaptive.Option{adaptive.WithClassifier(nil)}},
		"nil option":       {1, 10, []adaptive.Option{nil}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := adaptive.New(s, tc.floor, tc.ceiling, tc.opts...)
			require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
			require.Nil(t, c)
			require.Equal(t, int64(4), s.Capacity(), "a refused controller leaves the target alone")
		})
	}
	_, err := adaptive.New(nil, 1, 2)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	_, err = adaptive.New((*semaphore.Weighted)(nil), 1, 2) // panicked in Capacity
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
}

// TestNewNamesTheBoundItBreaks: a ceiling below the floor says so, and a
// ceiling too high names semaphore.MaxCapacity, instead of a range whose
// upper end is a bare number.
func TestNewNamesTheBoundItBreaks(t *testing.T) {
	s := semaphore.New(4)
	_, err := adaptive.New(s, 10, 5)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.ErrorContains(t, err, "adaptive: ceiling 5 below floor 10")
	_, err = adaptive.New(s, 1, semaphore.MaxCapacity+1)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.ErrorContains(t, err, fmt.Sprintf("adaptive: ceiling %d above semaphore.MaxCapacity (%d)", int64(semaphore.MaxCapacity+1), int64(semaphore.MaxCapacity)))
}

func TestNewBringsTheCapacityIntoRange(t *testing.T) {
	s := semaphore.New(100)
	c, err := adaptive.New(s, 2, 20)
	require.NoError(t, err)
	require.Equal(t, int64(20), s.Capacity())
	require.Equal(t, int64(20), c.Limit())
	_, err = adaptive.New(s, 2, 20, adaptive.WithInitial(5))
	require.NoError(t, err)
	require.Equal(t, int64(5), s.Capacity())
}

// round reports one round trip: the target's capacity worth of work,
// held rtt each, of which those beyond truth are refused, and moves the
// clock on by rtt. It returns the capacity after the round.
func round(clk *clock.Fake, s *semaphore.Weighted, c *adaptive.Controller, truth int64, rtt time.Duration) int64 {
	n := s.Capacity()
	clk.Advance(rtt)
	for i := range n {
		o := adaptive.Success
		if i >= truth {
			o = adaptive.Overload
		}
		c.Report(o, rtt)
	}
	return s.Capacity()
}

func TestAIMDGrowsByOneAndBacksOff(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	require.Equal(t, int64(11), round(clk, s, c, 50, time.Second))
	require.Equal(t, int64(12), round(clk, s, c, 50, time.Second))
	require.Equal(t, int64(10), round(clk, s, c, 11, time.Second), "12 * 0.9 = 10.8")
	st := c.Stats()
	require.Equal(t, uint64(2), st.Increases)
	require.Equal(t, uint64(1), st.OverloadDecreases)
	require.Equal(t, adaptive.ReasonOverload, st.LastReason)
	require.Equal(t, epoch.Add(3*time.Second), st.LastChange)
	require.Equal(t, uint64(3), st.Windows)
	require.Equal(t, uint64(1), st.Overloads)
	require.Equal(t, "aimd", st.Algorithm)
}

// TestOverloadOfWorkAdmittedBeforeTheCutIsIgnored: after a decrease, the
// refusals of work admitted at the older, higher limit do not cut again.
func TestOverloadOfWorkAdmittedBeforeTheCutIsIgnored(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	require.Equal(t, int64(9), round(clk, s, c, 5, time.Second))
	// Work granted half a second before the cut comes back refused.
	clk.Advance(time.Second / 2)
	for range 20 {
		c.Report(adaptive.Overload, time.Second)
	}
	require.Equal(t, int64(9), s.Capacity())
	require.Equal(t, uint64(1), c.Stats().OverloadDecreases)
	// Work granted after the cut that is refused does.
	for range 9 {
		c.Report(adaptive.Overload, time.Second/4)
	}
	require.Equal(t, int64(8), s.Capacity())
}

// TestAIMDGrowsOnlyWhenUsed: a round trip during which less than half the
// limit was out does not raise it (the limit would drift up unused).
func TestAIMDGrowsOnlyWhenUsed(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	// Ten calls of 100ms over ten seconds: one permit out a tenth of the time.
	for range 10 {
		clk.Advance(time.Second)
		c.Report(adaptive.Success, 100*time.Millisecond)
	}
	require.Equal(t, int64(10), s.Capacity())
	require.Equal(t, uint64(1), c.Stats().Windows)
}

func TestIgnoreIsNotCounted(t *testing.T) {
	s := semaphore.New(2)
	c, err := adaptive.New(s, 1, 10)
	require.NoError(t, err)
	for range 100 {
		c.Report(adaptive.Ignore, time.Second)
	}
	st := c.Stats()
	require.Zero(t, st.Windows)
	require.Equal(t, uint64(100), st.Ignored)
	require.Equal(t, int64(2), s.Capacity())
}

// TestUnwrapped429sShowAsIgnored: a client whose 429s do not wrap
// ErrOverload (a user's report: 5708 refusals, 48 successes, the limit
// rose from 4 to 7 with Overloads 0). The controller cannot tell, but
// Stats shows it: the refusals are counted as Ignored, and Overloads
// stays at 0 while the limit rises.
func TestUnwrapped429sShowAsIgnored(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(4)
	c, err := adaptive.New(s, 1, 64, adaptive.WithClock(clk))
	require.NoError(t, err)
	err429 := errors.New("HTTP 429 Too Many Requests") // no ErrOverload
	for i := range 5708 + 48 {
		clk.Advance(time.Millisecond)
		if i%120 == 0 {
			c.Observe(nil, time.Second)
		} else {
			c.Observe(err429, time.Millisecond)
		}
	}
	st := c.Stats()
	require.Greater(t, st.Limit, int64(4), "the limit rose")
	require.Zero(t, st.Overloads)
	require.Equal(t, uint64(5708), st.Ignored, "the unclassified refusals")
}

func TestVegasCutsOnLatency(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(20)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk), adaptive.WithVegas(0.1, 0.25))
	require.NoError(t, err)
	require.Equal(t, int64(22), round(clk, s, c, 100, time.Second), "no queueing: +10%")
	// The latency doubles: half the limit queues, above beta.
	// (The baseline rises by 1/2048 of the gap: 1.0005s.)
	require.Equal(t, int64(16), round(clk, s, c, 100, 2*time.Second), "22 - 22*(1-1.0005/2-0.25) = 16.5")
	st := c.Stats()
	require.Equal(t, adaptive.ReasonLatency, st.LastReason)
	require.InDelta(t, float64(time.Second), float64(st.Baseline), float64(time.Millisecond))
	require.Equal(t, 2*time.Second, st.Latency)
	require.Equal(t, "vegas", st.Algorithm)
}

type errTarget struct{ n int64 }

func (e *errTarget) Capacity() int64     { return e.n }
func (e *errTarget) SetCapacity(n int64) { e.n = n }

func TestDoReportsTheClassifiedOutcome(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(1)
	c, err := adaptive.New(s, 1, 4, adaptive.WithClock(clk))
	require.NoError(t, err)
	err429 := fmt.Errorf("%w: HTTP 429", adaptive.ErrOverload)
	// Capacity 1: each Do is a round trip.
	require.NoError(t, c.Do(context.Background(), 1, func(context.Context) error {
		clk.Advance(time.Second)
		return nil
	}))
	require.Equal(t, int64(2), s.Capacity())
	require.Equal(t, time.Second, c.Stats().Latency)
	for range 2 {
		require.ErrorIs(t, c.Do(context.Background(), 1, func(context.Context) error { return err429 }), adaptive.ErrOverload)
	}
	require.Equal(t, int64(1), s.Capacity(), "2 * 0.9")
	other := errors.New("bad request")
	for range 5 {
		require.ErrorIs(t, c.Do(context.Background(), 1, func(context.Context) error { return other }), other)
	}
	// One round trip for the success, one decision at each 429 (the second
	// was admitted after the first cut); the other errors decide nothing.
	require.Equal(t, uint64(3), c.Stats().Windows, "other errors are ignored")
	require.Equal(t, uint64(5), c.Stats().Ignored)
	require.Zero(t, s.Stats().Held)

	c2, err := adaptive.New(&errTarget{n: 3}, 1, 4)
	require.NoError(t, err)
	require.Panics(t, func() { _ = c2.Do(context.Background(), 1, func(context.Context) error { return nil }) })
}

func TestClassify(t *testing.T) {
	require.Equal(t, adaptive.Success, adaptive.Classify(nil))
	require.Equal(t, adaptive.Overload, adaptive.Classify(fmt.Errorf("x: %w", adaptive.ErrOverload)))
	require.Equal(t, adaptive.Ignore, adaptive.Classify(context.Canceled))
}

// TestShrinkDrainsHolders: a decrease never takes permits from their
// holders; the semaphore admits nobody until they drain below the new
// capacity, and each holder's permit releases once, as it would have.
func TestShrinkDrainsHolders(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	var held []semaphore.Permit
	for range 10 {
		p, ok := s.TryAcquire(1)
		require.True(t, ok)
		held = append(held, p)
	}
	clk.Advance(time.Second)
	for range 10 {
		c.Report(adaptive.Overload, time.Second)
	}
	require.Equal(t, int64(9), s.Capacity())
	st := s.Stats()
	require.Equal(t, int64(10), st.Held, "nothing taken from holders")
	require.Equal(t, int64(-1), st.Available)
	for i, p := range held {
		// 10-i held: none admitted until fewer than 9 are.
		q, ok := s.TryAcquire(1)
		require.Equal(t, 10-i < 9, ok, "%d of 10 released", i)
		if ok {
			require.True(t, q.Release())
		}
		require.True(t, p.Release())
		st := s.Stats()
		require.Equal(t, st.Capacity, st.Available+st.Held)
	}
	require.Equal(t, int64(9), s.Stats().Available)
}

// TestConcurrentReportsRace: goroutines doing work through Do and
// reporting by hand at once keep the capacity in range, equal to the
// limit, and every permit comes back.
func TestConcurrentReportsRace(t *testing.T) {
	s := semaphore.New(4)
	c, err := adaptive.New(s, 2, 16)
	require.NoError(t, err)
	overload := fmt.Errorf("%w: 503", adaptive.ErrOverload)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if g%2 == 0 {
					_ = c.Do(context.Background(), 1, func(context.Context) error {
						if i%7 == 0 {
							return overload
						}
						return nil
					})
					continue
				}
				o := adaptive.Success
				if i%5 == 0 {
					o = adaptive.Overload
				}
				c.Report(o, time.Duration(i)*time.Microsecond)
				if l := s.Capacity(); l < 2 || l > 16 {
					t.Errorf("capacity %d out of [2, 16]", l)
					return
				}
			}
		}()
	}
	testkit.WaitAll(t, &wg, "the reporters")
	st := s.Stats()
	require.Equal(t, c.Limit(), st.Capacity)
	require.Zero(t, st.Held)
	require.Equal(t, st.Capacity, st.Available)
	require.NotZero(t, c.Stats().Windows)
}

// TestShrinkHoldsWaitersUntilDrained: a caller that waits while the lane
// drains to a decreased limit is served only once the holders are below
// it, and the holders' permits stay theirs meanwhile.
func TestShrinkHoldsWaitersUntilDrained(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(4)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk), adaptive.WithAIMD(1, 0.5))
	require.NoError(t, err)
	var held []semaphore.Permit
	for range 4 {
		p, ok := s.TryAcquire(1)
		require.True(t, ok)
		held = append(held, p)
	}
	got := make(chan semaphore.Permit, 1)
	go func() {
		p, err := s.Acquire(context.Background(), 1)
		if err != nil {
			panic(err)
		}
		got <- p
	}()
	testkit.Eventually(t, "the caller waits", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(time.Second)
	for range 4 {
		c.Report(adaptive.Overload, time.Second)
	}
	require.Equal(t, int64(2), s.Capacity())
	for i := range 2 { // 3, then 2 held: not below the limit of 2
		require.True(t, held[i].Release())
		select {
		case <-got:
			t.Fatalf("served with %d of 4 holders left, over the limit of 2", 3-i)
		default:
		}
		require.Equal(t, 1, s.Stats().Waiters)
	}
	require.True(t, held[2].Release()) // 1 held: the caller fits
	p := testkit.Recv(t, got, "the waiter's grant once drained")
	st := s.Stats()
	require.Equal(t, int64(2), st.Held)
	require.Equal(t, st.Capacity, st.Available+st.Held)
	require.True(t, p.Release())
	require.True(t, held[3].Release())
}

// gateTarget is a target whose first SetCapacity blocks until released,
// so that a test can report while a decision holds the controller's lock.
type gateTarget struct {
	mu      sync.Mutex
	n       int64
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateTarget) Capacity() int64 { g.mu.Lock(); defer g.mu.Unlock(); return g.n }
func (g *gateTarget) SetCapacity(n int64) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	g.n = n
	g.mu.Unlock()
}

// TestOverloadWhileDecidingIsNotLost: a fresh overload reported while
// another report's decision holds the lock (its TryLock fails) is decided
// by that holder once it is done, at once, not left for the next round
// trip's end.
func TestOverloadWhileDecidingIsNotLost(t *testing.T) {
	clk := clock.NewFake(epoch)
	g := &gateTarget{n: 10}
	c, err := adaptive.New(g, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	g.mu.Lock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
	clk.Advance(time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 { // a round trip: grows to 11, and blocks in SetCapacity
			c.Report(adaptive.Success, time.Second)
		}
	}()
	testkit.Recv(t, g.entered, "the growth's SetCapacity")
	clk.Advance(time.Millisecond)
	c.Report(adaptive.Overload, 0) // admitted after the growth: fresh
	close(g.release)
	testkit.Recv(t, done, "the deciding report's return")
	require.Equal(t, int64(9), g.Capacity(), "11 * 0.9: the overload reported during the growth was lost")
	st := c.Stats()
	require.Equal(t, uint64(1), st.Increases)
	require.Equal(t, uint64(1), st.OverloadDecreases)
}
