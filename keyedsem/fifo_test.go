package keyedsem_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestSameKeyServedInArrivalOrder(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	p, err := s.Acquire(bg, "thread-1")
	require.NoError(t, err)

	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		c := queue(t, s, bg, "thread-1", 1, i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := <-c // within the WaitAll below
			if r.err != nil {
				t.Error(r.err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			r.p.Release() // hands the key to the next in line
		}()
	}
	require.True(t, p.Release())
	testkit.WaitAll(t, &wg, "the waiters to be served")
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	assert.Equal(t, 0, s.Stats().Waiters)
}

// A heavy request at the head of a key's queue is not overtaken by later
// lighter ones, nor by TryAcquire.
func TestHeavyRequestIsNotOvertaken(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(3))
	defer s.Close()
	p, err := s.Acquire(bg, "k", semaphore.Weight(2))
	require.NoError(t, err)
	heavy := queue(t, s, bg, "k", 3, 1)
	light := queue(t, s, bg, "k", 1, 2)
	_, ok := s.TryAcquire("k")
	assert.False(t, ok, "TryAcquire overtook a waiter")
	assert.Equal(t, int64(2), s.Stats().Held)

	p.Release()
	rh := recv(t, heavy, "the heavy head")
	require.NoError(t, rh.err)
	assert.Equal(t, int64(3), rh.p.Weight())
	waitForWaiters(s, 1)
	rh.p.Release()
	rl := recv(t, light, "the light waiter")
	require.NoError(t, rl.err)
	rl.p.Release()
}
