package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

func TestCloseWakesWaitersAndRefusesLaterAcquires(t *testing.T) {
	s := semaphore.New(3)
	h := take(t, s, 2)
	a := enqueue(t, context.Background(), s, 2)
	b := enqueue(t, context.Background(), s, 3)

	s.Close()
	for _, w := range []<-chan result{a, b} {
		r := recv(t, w)
		require.ErrorIs(t, r.err, semaphore.ErrClosed)
		require.False(t, r.p.Weight() != 0)
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
