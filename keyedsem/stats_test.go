package keyedsem_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestStatsAddUp(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(3))
	defer s.Close()
	a, _ := s.Acquire(bg, "a", semaphore.Weight(2))
	b, _ := s.Acquire(bg, "b", semaphore.Weight(3))
	c, _ := s.TryAcquire("a")
	w := queue(t, s, bg, "b", 2, 1)
	st := s.Stats()
	assert.Equal(t, keyedsem.Stats{
		Keys: 2, Capacity: 3, Held: 6, Waiters: 1, Counters: semaphore.Counters{Acquired: 3}, Created: 2,
	}, st)
	b.Release()
	r := <-w
	require.NoError(t, r.err)
	a.Release()
	c.Release()
	r.p.Release()
	st = s.Stats()
	assert.Equal(t, keyedsem.Stats{Keys: 2, Capacity: 3, Counters: semaphore.Counters{Acquired: 4, Released: 4, Waited: 1}, Created: 2}, st)
	assert.Equal(t, int64(3), s.Stats().Capacity)
}
