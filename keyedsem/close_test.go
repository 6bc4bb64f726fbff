package keyedsem_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestCloseWakesWaitersAndRefusesLater(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	pa, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	pb, err := s.Acquire(bg, "b")
	require.NoError(t, err)
	wa := queue(t, s, bg, "a", 1, 1)
	wb := queue(t, s, bg, "b", 1, 2)
	wb2 := queue(t, s, bg, "b", 1, 3)

	s.Close()
	s.Close() // idempotent
	for _, w := range []<-chan result{wa, wb, wb2} {
		assert.ErrorIs(t, (<-w).err, semaphore.ErrClosed)
	}
	_, err = s.Acquire(bg, "c")
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	st := s.Stats()
	assert.True(t, st.Closed)
	assert.Equal(t, 0, st.Waiters)
	assert.Equal(t, int64(2), st.Held, "holders keep their permits")
	assert.True(t, pa.Release())
	assert.True(t, pb.Release())
	assert.Equal(t, 0, s.Len(), "releases after Close still drop entries")
}
