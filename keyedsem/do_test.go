package keyedsem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
)

func TestDoReleasesOnReturnAndPanic(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	boom := errors.New("boom")
	assert.ErrorIs(t, s.Do(bg, "k", func(context.Context) error { return boom }), boom)
	func() {
		defer func() { assert.Equal(t, "fn panicked", recover()) }()
		_ = s.Do(bg, "k", func(context.Context) error { panic("fn panicked") })
	}()
	assert.Equal(t, int64(0), s.Stats().Held, "Do kept the permit after fn")

	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		done <- s.Do(ctx, "k", func(context.Context) error {
			t.Error("fn ran although the acquire was cancelled")
			return nil
		})
	}()
	waitForWaiters(s, 1)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	p.Release()
}

// A nil fn is a programming error: Do says so, as the package's panics
// do, before it takes a permit, instead of a nil dereference with the
// permits held.
func TestDoNilFnPanics(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	require.PanicsWithValue(t, "keyedsem: Do with a nil fn", func() { _ = s.Do(bg, "k", nil) })
	st := s.Stats()
	require.Equal(t, int64(0), st.Held)
	require.Equal(t, uint64(0), st.Acquired, "Do took a permit for a nil fn")
}
