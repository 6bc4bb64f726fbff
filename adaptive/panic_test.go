package adaptive_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

var errBoom = errors.New("boom")

// panicTarget is a target whose SetCapacity panics while armed.
type panicTarget struct {
	mu    sync.Mutex
	n     int64
	armed bool
}

func (p *panicTarget) Capacity() int64 { p.mu.Lock(); defer p.mu.Unlock(); return p.n }
func (p *panicTarget) SetCapacity(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed {
		panic(errBoom)
	}
	p.n = n
}

func (p *panicTarget) arm(on bool) { p.mu.Lock(); defer p.mu.Unlock(); p.armed = on }

// reportPanics reports o and returns what the report panicked with.
func reportPanics(c *adaptive.Controller, o adaptive.Outcome) (v any) {
	defer func() { v = recover() }()
	c.Report(o, 0)
	return nil
}

// TestTargetPanicLeavesTheControllerUsable (issue 22): a target whose
// SetCapacity panics (user code, called under the controller's lock) makes
// the deciding report panic, and the controller goes on: Limit and Stats
// return, and the next decision moves the target from its capacity as
// after a change made behind the controller's back.
func TestTargetPanicLeavesTheControllerUsable(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(epoch)
	p := &panicTarget{n: 10}
	c, err := adaptive.New(p, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	p.arm(true)
	clk.Advance(time.Second)
	require.Equal(t, errBoom, reportPanics(c, adaptive.Overload), "the report whose decision called SetCapacity")

	limit := testkit.Recv(t, testkit.Go(c.Limit), "Limit after the target panicked (the controller's lock left held?)")
	require.Equal(t, int64(10), p.Capacity(), "the panicking SetCapacity set nothing")
	require.Equal(t, int64(9), limit, "the value the failed SetCapacity was passed stays the limit (Target's doc)")
	testkit.Recv(t, testkit.Go(c.Stats), "Stats after the target panicked")

	p.arm(false)
	clk.Advance(time.Second)
	c.Report(adaptive.Overload, 0) // admitted after the failed cut: fresh
	require.Equal(t, int64(9), p.Capacity(), "the next overload cuts from the target's 10")
	require.Equal(t, int64(9), c.Limit())
}

// TestDoClassifierPanicReleases: a classifier that panics in Do (user
// code, after fn returned) gives the permit back, and the panic goes on.
func TestDoClassifierPanicReleases(t *testing.T) {
	t.Parallel()
	s := semaphore.New(1)
	c, err := adaptive.New(s, 1, 1, adaptive.WithClassifier(func(error) adaptive.Outcome { panic(errBoom) }))
	require.NoError(t, err)
	func() {
		defer func() { require.Equal(t, errBoom, recover()) }()
		_ = c.Do(context.Background(), 1, func(context.Context) error { return nil })
	}()
	require.Equal(t, int64(0), s.Stats().Held, "the permit stayed held")
}
