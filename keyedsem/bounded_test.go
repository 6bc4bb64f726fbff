package keyedsem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestHardMaxKeysEvictsIdleBeforeRefusing(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(2), keyedsem.WithHardMaxKeys(), keyedsem.WithClock(clk))
	defer s.Close()
	a, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	b, err := s.Acquire(bg, "b")
	require.NoError(t, err)
	_, err = s.Acquire(bg, "c")
	require.ErrorIs(t, err, keyedsem.ErrTooManyKeys)
	assert.Equal(t, 2, s.Len())

	b.Release() // b idle: may be evicted to make room
	c, err := s.Acquire(bg, "c")
	require.NoError(t, err)
	assert.False(t, keyedsem.Has(s, "b"))
	assert.LessOrEqual(t, s.Len(), 2)
	a.Release()
	c.Release()
	assert.Equal(t, uint64(1), s.Stats().Rejected)
}

func TestMaxWaitersPerKey(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	w := queue(t, s, bg, "k", 1, 1)
	_, err = s.Acquire(bg, "k")
	assert.ErrorIs(t, err, semaphore.ErrQueueFull)
	q, err := s.Acquire(bg, "other") // the bound is per key
	require.NoError(t, err)
	q.Release()
	p.Release()
	r := recv(t, w, "the waiter")
	require.NoError(t, r.err)
	r.p.Release()
}

// TestEndedContextBeforeQueueFull: an acquire whose context ended on its
// way to a key whose line is full returns the context's error, counted
// Cancelled, not ErrQueueFull counted Rejected: an ended context comes
// before any refusal (doc.go), as in package semaphore. Before the
// admission was the engine's (waitq.Admit), a key's admission looked at
// the context only once the permits were free, and this acquire was
// refused as a waiter.
func TestEndedContextBeforeQueueFull(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	w := queue(t, s, testCtx(t), "k", 1, 1)       // the line is full
	ctx, cancel := context.WithCancel(testCtx(t)) // a deadline, should the hook not run
	defer cancel()
	keyedsem.SetBeforeWait(s, cancel) // after the lookup found the key held
	_, err = s.Acquire(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	st := s.Stats()
	assert.Equal(t, uint64(1), st.Cancelled, "Cancelled")
	assert.Equal(t, uint64(0), st.Rejected, "Rejected")
	keyedsem.SetBeforeWait(s, nil)
	require.True(t, p.Release())
	r := recv(t, w, "the waiter")
	require.NoError(t, r.err)
	r.p.Release()
}
