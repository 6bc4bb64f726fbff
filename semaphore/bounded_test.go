package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

func TestMaxWaitersRejectsTheExtraWaiterAtOnce(t *testing.T) {
	s := semaphore.New(1, semaphore.WithMaxWaiters(2))
	h := take(t, s, 1)
	a := enqueue(t, context.Background(), s, 1)
	b := enqueue(t, context.Background(), s, 1)

	// It returns at once, so no goroutine is needed; the deadline turns a
	// refusal that never comes (the third waiter queued) into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.Acquire(ctx, 1)
	require.ErrorIs(t, err, semaphore.ErrQueueFull, "the third waiter was queued, not refused")
	require.False(t, p.Weight() != 0)
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
	require.False(t, r.p.Weight() != 0)
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
