package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

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
	require.False(t, r.p.Weight() != 0)
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
