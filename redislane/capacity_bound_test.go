package redislane_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// A capacity beyond what Redis's Lua numbers (doubles) hold exactly is
// refused: two capacities that differ only past 2^53 used to compare
// equal there, so a second instance with another capacity joined the
// lane silently instead of failing with ErrCapacityMismatch. Up to
// semaphore.MaxCapacity, a capacity one off is still told apart.
func TestHugeCapacityIsRefusedAndMaxCapacityIsExact(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	for _, c := range []int64{semaphore.MaxCapacity + 1, 1<<60 + 1} {
		_, err := redislane.NewWeighted(rc, laneName(t), c, redislane.WithLease(testLease))
		require.ErrorIs(t, err, redislane.ErrInvalidConfig, "NewWeighted(capacity %d)", c)
		_, err = redislane.NewKeyed(rc, laneName(t), c, redislane.WithLease(testLease))
		require.ErrorIs(t, err, redislane.ErrInvalidConfig, "NewKeyed(capacity %d)", c)
	}

	name := laneName(t)
	a, err := redislane.NewWeighted(rc, name, semaphore.MaxCapacity, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer a.Close()
	p, err := a.Acquire(testCtx(t), semaphore.MaxCapacity)
	require.NoError(t, err)
	require.True(t, p.Release())

	b, err := redislane.NewWeighted(rc, name, semaphore.MaxCapacity-1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer b.Close()
	p, err = b.Acquire(testCtx(t), 1)
	if err == nil {
		p.Release()
	}
	require.ErrorIs(t, err, redislane.ErrCapacityMismatch)
}

// A nil Option is an error wrapping ErrInvalidConfig, not a nil
// dereference.
func TestNilOptionIsInvalidConfig(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	_, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(testLease), nil)
	require.ErrorIs(t, err, redislane.ErrInvalidConfig)
	_, err = redislane.NewKeyed(rc, laneName(t), 1, nil)
	require.ErrorIs(t, err, redislane.ErrInvalidConfig)
}

// An ended context comes before any refusal, as in package semaphore and
// keyedsem: a call with an ended context and a bad weight returns the
// context's error and counts as Cancelled, whichever lane it is made on.
func TestEndedContextComesBeforeARefusal(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	s, err := redislane.NewWeighted(rc, laneName(t), 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, n := range []int64{0, 3} {
		_, err := s.Acquire(ctx, n)
		require.ErrorIs(t, err, context.Canceled, "Acquire(ended ctx, %d)", n)
		local := semaphore.New(2)
		_, lerr := local.Acquire(ctx, n)
		require.ErrorIs(t, lerr, context.Canceled, "semaphore.Acquire(ended ctx, %d)", n)
	}
	st := s.Stats()
	require.EqualValues(t, 2, st.Cancelled, "%+v", st.Counters)
	require.EqualValues(t, 0, st.Rejected, "%+v", st.Counters)
}
