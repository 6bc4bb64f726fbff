package keyedsem_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestDoubleAndStaleReleasesAreCountedAndHarmless(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	cp := p
	assert.True(t, p.Release())
	assert.False(t, p.Release(), "second release")
	assert.False(t, cp.Release(), "release through a copy")

	// The token of p is likely reused for q; p's copy must not free q.
	q, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	assert.False(t, cp.Release(), "stale copy after a re-grant")
	_, ok := s.TryAcquire("k")
	assert.False(t, ok, "a stale release freed the new holder's permit")
	assert.True(t, q.Release())
	st := s.Stats()
	assert.Equal(t, uint64(3), st.DoubleReleases)
	assert.Equal(t, uint64(2), st.Released)
	assert.Equal(t, int64(0), st.Held)
	assert.False(t, semaphore.Permit{}.Release(), "zero Permit")
}
