package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

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
			require.False(t, p.Weight() != 0)

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
