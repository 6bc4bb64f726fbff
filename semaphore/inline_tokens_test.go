package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

func TestManyHoldersBeyondInlineTokens(t *testing.T) {
	const holders = 50
	s := semaphore.New(100)
	var ps []semaphore.Permit
	for i := range holders {
		if i%2 == 0 {
			p, err := s.Acquire(context.Background(), 1)
			require.NoError(t, err, "holder %d", i)
			ps = append(ps, p)
		} else {
			ps = append(ps, take(t, s, 1))
		}
	}
	st := s.Stats()
	require.Equal(t, int64(holders), st.Held)
	require.Equal(t, uint64(holders), st.Acquired)
	require.Zero(t, st.Released)

	// A spare-token permit (the last ones taken) released twice.
	last := ps[holders-1]
	require.True(t, last.Release())
	require.False(t, last.Release())
	require.Equal(t, int64(holders-1), s.Stats().Held)
	for _, p := range ps[:holders-1] {
		require.True(t, p.Release())
	}
	st = requireBalanced(t, s)
	require.Equal(t, uint64(holders), st.Acquired)
	require.Equal(t, uint64(holders), st.Released)
	require.Equal(t, uint64(1), st.DoubleReleases)
	require.Equal(t, int64(100), st.Available)

	// Waiters beyond the inline tokens are granted spare tokens too.
	ps = ps[:0]
	for range holders {
		ps = append(ps, take(t, s, 1))
	}
	big := take(t, s, 50)
	ws := make([]<-chan result, 10)
	for i := range ws {
		ws[i] = enqueue(t, context.Background(), s, 5)
	}
	require.True(t, big.Release())
	for i, w := range ws {
		r := recv(t, w)
		require.NoError(t, r.err, "waiter %d", i)
		ps = append(ps, r.p)
	}
	require.Equal(t, int64(100), s.Stats().Held)
	for _, p := range ps {
		require.True(t, p.Release())
	}
	st = requireBalanced(t, s)
	require.Equal(t, uint64(2*holders+1+len(ws)), st.Released)
}
