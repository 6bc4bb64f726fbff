//go:build !race

// The race detector allows 8128 goroutines at once, and these tests need
// 65537 waiters: they run without it (make test386, go test without -race).

package semaphore_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestWaitingWeightPastMaxInt64 queues 2^16 waiters of MaxCapacity
// (2^63 - 2^16 in all), then one more, whose weight takes the total past
// math.MaxInt64 (issue 11, defect 2: a counter that input can overflow).
// Under WithMaxWaitingWeight(math.MaxInt64) it must be refused with
// ErrQueueFull, not let in by a sum that wrapped negative; without a bound
// it waits, and Stats.WaitingWeight stops at math.MaxInt64 instead of
// going negative. Leaving, everyone is accounted for.
func TestWaitingWeightPastMaxInt64(t *testing.T) {
	if testing.Short() {
		t.Skip("65537 goroutines")
	}
	const (
		maxCap  = semaphore.MaxCapacity
		waiters = 1 << 16
	)
	for _, tc := range []struct {
		name  string
		bound int64
	}{{"bounded", math.MaxInt64}, {"unbounded", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			s := semaphore.New(maxCap, semaphore.WithMaxWaitingWeight(tc.bound))
			h := take(t, s, maxCap)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs := make(chan error, waiters+1)
			acquire := func() {
				_, err := s.Acquire(ctx, maxCap)
				errs <- err
			}
			for range waiters {
				go acquire()
			}
			waitFor(t, "the waiters to queue", func() bool { return s.Stats().Waiters == waiters })
			st := s.Stats()
			require.Equal(t, int64(waiters*maxCap), st.WaitingWeight)

			if tc.bound > 0 {
				last := acquireAsync(ctx, s, maxCap)
				var r result
				waitFor(t, "the last Acquire to return", func() bool {
					select {
					case r = <-last:
						return true
					default:
						return s.Stats().Waiters > waiters
					}
				})
				if r.err == nil && r.p.Weight() == 0 {
					// It queued: the sum wrapped and passed the bound.
					st = s.Stats()
					cancel()
					r = testkit.Recv(t, last, "the queued Acquire to return")
					t.Fatalf("waiter %d of weight %d queued under a bound of %d (WaitingWeight %d)", waiters+1, int64(maxCap), tc.bound, st.WaitingWeight)
				}
				require.ErrorIs(t, r.err, semaphore.ErrQueueFull, "the waiting weight would pass the bound")
				st = s.Stats()
				require.Equal(t, waiters, st.Waiters)
				require.Equal(t, int64(waiters*maxCap), st.WaitingWeight)
				require.Equal(t, uint64(1), st.Rejected)
			} else {
				go acquire()
				waitFor(t, "the last waiter to queue", func() bool { return s.Stats().Waiters == waiters+1 })
				st = s.Stats()
				require.Equal(t, int64(math.MaxInt64), st.WaitingWeight, "the total weight is past math.MaxInt64: Stats saturate")
			}

			cancel()
			n := st.Waiters
			for range n {
				require.ErrorIs(t, testkit.Recv(t, errs, "a cancelled waiter"), context.Canceled)
			}
			st = s.Stats()
			require.Zero(t, st.Waiters)
			require.Zero(t, st.WaitingWeight, "every waiter's weight is taken off again: %+v", st)
			require.Equal(t, uint64(n), st.Cancelled)
			require.True(t, h.Release())
			requireBalanced(t, s)
		})
	}
}
