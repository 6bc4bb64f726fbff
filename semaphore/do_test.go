package semaphore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

func TestDoKeepsPermitUntilFnReturnsWhateverTheContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, func())
	}{
		{"deadline passes", func() (context.Context, func()) { c := newDeadlineCtx(); return c, c.expire }},
		{"cancelled", func() (context.Context, func()) { return context.WithCancel(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := semaphore.New(3)
			ctx, end := tc.ctx()
			var next <-chan result
			err := s.Do(ctx, 2, func(ctx context.Context) error {
				end()
				<-ctx.Done()
				// The work ignores its context and goes on: the permits
				// stay with it.
				next = enqueue(t, context.Background(), s, 2)
				st := s.Stats()
				require.Equal(t, int64(2), st.Held, "Do released before fn returned: %+v", st)
				_, ok := s.TryAcquire(1)
				require.False(t, ok, "a waiter is queued")
				stillWaiting(t, next)
				return ctx.Err()
			})
			require.ErrorIs(t, err, ctx.Err(), "Do returns fn's error")
			r := recv(t, next)
			require.NoError(t, r.err, "the waiter is served when fn returns")
			require.True(t, r.p.Release())
			st := requireBalanced(t, s)
			require.Equal(t, uint64(2), st.Released)
		})
	}
}

func TestDoReleasesOnceOnPanicAndRepanics(t *testing.T) {
	s := semaphore.New(3)
	type boom struct{ msg string }
	var got any
	func() {
		defer func() { got = recover() }()
		_ = s.Do(context.Background(), 3, func(context.Context) error {
			require.Equal(t, int64(3), s.Stats().Held)
			panic(boom{"fn failed"})
		})
	}()
	require.Equal(t, boom{"fn failed"}, got, "the panic goes on, unchanged")
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Acquired)
	require.Equal(t, uint64(1), st.Released)
	require.Zero(t, st.DoubleReleases)
	p := take(t, s, 3) // all three permits are back, and no more
	_, ok := s.TryAcquire(1)
	require.False(t, ok)
	p.Release()
}

func TestDoReturnsFnErrorAndReleases(t *testing.T) {
	s := semaphore.New(1)
	errWork := errors.New("work failed")
	require.Equal(t, errWork, s.Do(context.Background(), 1, func(context.Context) error { return errWork }))
	require.NoError(t, s.Do(context.Background(), 1, func(context.Context) error { return nil }))
	st := requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Released)
}

// A nil fn is a programming error: Do says so, as the package's panics
// do, before it takes a permit, instead of a nil dereference with the
// permits held.
func TestDoNilFnPanics(t *testing.T) {
	s := semaphore.New(1)
	defer s.Close()
	require.PanicsWithValue(t, "semaphore: Do with a nil fn", func() { _ = s.Do(context.Background(), 1, nil) })
	st := s.Stats()
	require.Equal(t, int64(0), st.Held)
	require.Equal(t, uint64(0), st.Acquired, "Do took a permit for a nil fn")
}
