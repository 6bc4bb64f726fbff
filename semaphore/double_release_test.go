package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

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
		for range semaphore.InlineTokens { // every inline token out
			inline = append(inline, take(t, s, 1))
		}
		p1 := take(t, s, 1)
		stale := p1
		require.True(t, p1.Release())
		p2 := take(t, s, 1) // reuses the pooled spare token
		require.False(t, stale.Release())
		require.Equal(t, int64(semaphore.InlineTokens+1), s.Stats().Held)
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
	require.False(t, p.Weight() != 0)
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
	require.Equal(t, 1, testkit.Recv(t, got, "the waiter's grant"))

	p, err := s.Acquire(context.Background(), 1) // after the goroutine's release
	require.NoError(t, err)
	require.Equal(t, 2, shared)
	p.Release()
	testkit.Recv(t, done, "the waiter to return")
}
