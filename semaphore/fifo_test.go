package semaphore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

func TestHeavyHeadWaiterIsNotOvertaken(t *testing.T) {
	s := semaphore.New(10)
	small := take(t, s, 5)
	heavy := enqueue(t, context.Background(), s, 8)
	light := enqueue(t, context.Background(), s, 1)

	// Five permits are free, but the heavy request came first.
	_, ok := s.TryAcquire(1)
	require.False(t, ok, "TryAcquire overtook a waiter")
	stillWaiting(t, light)
	stillWaiting(t, heavy)
	st := s.Stats()
	require.Equal(t, int64(5), st.Available)
	require.Equal(t, 2, st.Waiters)
	require.Equal(t, int64(9), st.WaitingWeight)

	require.True(t, small.Release())
	rh := recv(t, heavy)
	require.NoError(t, rh.err)
	rl := recv(t, light) // 8 + 1 fit in 10: both are served
	require.NoError(t, rl.err)
	require.True(t, rh.p.Release())
	require.True(t, rl.p.Release())
	st = requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Waited)
}

func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	const n = 20
	s := semaphore.New(1)
	h := take(t, s, 1)
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		want := s.Stats().Waiters + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(context.Background(), 1)
			if err != nil {
				order <- -1
				return
			}
			order <- i
			p.Release()
		}()
		waitFor(t, fmt.Sprintf("waiter %d to queue", i), func() bool { return s.Stats().Waiters == want })
	}
	h.Release()
	testkit.WaitAll(t, &wg, "the waiters to be served")
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, got)
	st := requireBalanced(t, s)
	require.Equal(t, uint64(n), st.Waited)
}
