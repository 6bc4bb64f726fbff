package keyedsem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
)

func TestIdleEntriesExpireAfterTheTimeout(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	p.Release()
	assert.Equal(t, 1, s.Len(), "idle entry kept")

	clk.Advance(time.Minute - time.Nanosecond)
	assert.Equal(t, 0, s.Sweep(), "evicted before the timeout")
	clk.Advance(time.Nanosecond)
	assert.Equal(t, 1, s.Sweep())
	assert.Equal(t, 0, s.Len())
	assert.Equal(t, uint64(1), s.Stats().Evicted)
}

// An entry with a holder survives any Sweep, however long it is held; its
// idle time starts at the release.
func TestHeldEntrySurvivesSweep(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	w := queue(t, s, bg, "k", 1, 1)
	clk.Advance(time.Hour)
	assert.Equal(t, 0, s.Sweep())
	assert.Equal(t, 1, s.Len())
	p.Release()
	r := recv(t, w, "the waiter")
	require.NoError(t, r.err)
	clk.Advance(time.Hour)
	assert.Equal(t, 0, s.Sweep())
	_, ok := s.TryAcquire("k")
	assert.False(t, ok, "the entry of a held key was replaced")
	r.p.Release()
	clk.Advance(time.Minute - 1)
	assert.Equal(t, 0, s.Sweep(), "idle time counted from before the release")
	clk.Advance(1)
	assert.Equal(t, 1, s.Sweep())
}
