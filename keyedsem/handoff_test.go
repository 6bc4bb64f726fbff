package keyedsem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// A release into a key's queue hands its token to the head (per-key
// capacity 1; see handOff). These pin what the hand-off keeps, with it and
// without it (NoHandOff) alike: FIFO order, one release and one waited
// grant per hand-off, a stale handle of the released permit refused, and a
// head whose context ended giving the grant back.
// With idle timeout 0 (the entry with a token of its own) the entry must
// be gone at the end: every reference was dropped, none kept by a hand-off.
func TestHandOffKeepsOrderAndCounts(t *testing.T) {
	for _, c := range []struct {
		name string
		on   bool
		opts []keyedsem.Option
	}{
		{"handoff", true, nil}, {"plain", false, nil},
		{"handoff/idle0", true, []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
		{"plain/idle0", false, []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
	} {
		on := c.on
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](c.opts...)
			defer s.Close()
			if !on {
				keyedsem.NoHandOff(s)
			}
			require.Equal(t, on, keyedsem.HandsOff(s))
			// A hand-off that lost the grant fails the Waits below at the
			// deadline instead of hanging.
			ctx, cancelAll := context.WithTimeout(context.Background(), testkit.Deadline)
			defer cancelAll()
			held, err := s.Acquire(ctx, "k")
			require.NoError(t, err)
			var places []semaphore.Place
			for range 3 {
				pl, err := s.Join("k")
				require.NoError(t, err)
				places = append(places, pl)
			}
			stale := held
			for i, pl := range places {
				require.True(t, held.Release(), "release %d", i)
				require.False(t, stale.Release(), "a handle released already frees nothing, even once its token is granted again")
				held, err = pl.Wait(ctx)
				require.NoError(t, err, "place %d, served in order", i)
				stale = held
			}
			st := s.Stats()
			require.Equal(t, uint64(4), st.Acquired, "%+v", st)
			require.Equal(t, uint64(3), st.Released, "%+v", st)
			require.Equal(t, uint64(3), st.Waited, "%+v", st)
			require.Equal(t, uint64(3), st.DoubleReleases, "%+v", st)
			require.Equal(t, int64(1), st.Held, "%+v", st)
			require.Zero(t, st.Waiters, "%+v", st)

			// A head whose context ends before its Wait gives the grant back:
			// the key is free again, counted in neither Acquired nor Released.
			pl, err := s.Join("k")
			require.NoError(t, err)
			require.True(t, held.Release())
			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err = pl.Wait(done)
			require.ErrorIs(t, err, context.Canceled)
			p, ok := s.TryAcquire("k")
			require.True(t, ok, "the grant given back frees the key")
			require.True(t, p.Release())
			st = s.Stats()
			require.Equal(t, st.Acquired, st.Released, "%+v", st)
			require.Equal(t, uint64(5), st.Acquired, "%+v", st)
			require.Zero(t, st.Held, "%+v", st)
			if c.opts != nil {
				require.Zero(t, s.Len(), "idle timeout 0: the entry went with its last reference")
			}
		})
	}
}

// Where the hand-off does not apply, New does not set it: a per-key
// capacity above 1 (the line would become a convoy, as package semaphore
// measured), WithBarging (a release wakes the head to compete) and
// WithReorderHold (a held head is not served).
func TestHandOffOnlyWhereItApplies(t *testing.T) {
	require.True(t, keyedsem.HandsOff(keyedsem.New[string]()))
	require.True(t, keyedsem.HandsOff(keyedsem.New[string](keyedsem.WithIdleTimeout(0))))
	require.False(t, keyedsem.HandsOff(keyedsem.New[string](keyedsem.WithPerKeyCapacity(2))))
	require.False(t, keyedsem.HandsOff(keyedsem.New[string](keyedsem.WithBarging(0))))
	require.False(t, keyedsem.HandsOff(keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(1))))
}
