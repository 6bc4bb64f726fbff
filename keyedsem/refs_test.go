package keyedsem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// A key's reference count (holders, waiters, places, calls in flight) is
// 30 bits of its state word, the bits below the fresh flag: at
// 2^30-1 references the next caller is refused with ErrQueueFull, on every
// way in, instead of the count wrapping into the flags (issue 11). FIFO and
// barging alike.
func TestReferenceCountRefusedAtItsWidth(t *testing.T) {
	require.Equal(t, int64(1<<30-1), int64(keyedsem.MaxRefs), "the width the docs state")
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{{"fifo", nil}, {"barging", []keyedsem.Option{keyedsem.WithBarging(time.Hour)}}} {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](c.opts...)
			const k = "k"
			held, err := s.Acquire(context.Background(), k)
			require.NoError(t, err)
			keyedsem.AddRefs(s, k, keyedsem.MaxRefs-2) // the holder and MaxRefs-2 more
			// One more reference still fits: a waiter, the last one.
			ctx, cancel := context.WithCancel(context.Background())
			waiter := testkit.Go(func() error { _, err := s.Acquire(ctx, k); return err })
			testkit.Eventually(t, "the last waiter queues", func() bool { return s.Stats().Waiters == 1 })

			refused := testkit.Go(func() error { _, err := s.Acquire(context.Background(), k); return err })
			err = testkit.Within(t, 10*time.Second, "the acquire past the bound returns", refused)
			require.ErrorIs(t, err, semaphore.ErrQueueFull)
			require.True(t, strings.Contains(err.Error(), "references"), err.Error())
			_, ok := s.TryAcquire(k)
			require.False(t, ok)
			if c.opts == nil { // a barging keyed semaphore keeps no places
				_, err = s.Join(k)
				require.ErrorIs(t, err, semaphore.ErrQueueFull)
			} else {
				require.False(t, keyedsem.BargingStrict(s, k), "the count did not wrap into the flags")
			}
			st := s.Stats()
			require.Equal(t, 1, st.Waiters, "%+v", st)

			cancel()
			require.ErrorIs(t, testkit.Recv(t, waiter, "the waiter's cancel"), context.Canceled)
			keyedsem.AddRefs(s, k, -(keyedsem.MaxRefs - 2))
			held.Release()
			p, err := s.Acquire(context.Background(), k)
			require.NoError(t, err, "the key works again")
			p.Release()
			st = s.Stats()
			require.Zero(t, st.Waiters, "%+v", st)
			require.Zero(t, st.Held, "%+v", st)
		})
	}
}
