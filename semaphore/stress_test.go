package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestStressRandomOpsNeverExceedCapacity runs goroutines that acquire,
// try, cancel, release and double-release at random against an oracle: the
// weight they hold, counted after each grant and before each release, never
// exceeds the capacity.
func TestStressRandomOpsNeverExceedCapacity(t *testing.T) {
	const (
		workers  = 16
		ops      = 600
		capacity = 5
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s := semaphore.New(capacity)
	var (
		held, maxHeld            atomic.Int64
		grants, doubles, failing atomic.Uint64
		wg, cancellers           sync.WaitGroup
	)
	hold := func(p semaphore.Permit, double bool) {
		grants.Add(1)
		v := held.Add(p.Weight())
		for m := maxHeld.Load(); v > m && !maxHeld.CompareAndSwap(m, v); m = maxHeld.Load() {
		}
		if v > capacity {
			t.Errorf("oracle holds %d > capacity %d", v, capacity)
		}
		runtime.Gosched()
		held.Add(-p.Weight())
		if !p.Release() {
			t.Errorf("first release of a granted permit returned false")
		}
		if double {
			doubles.Add(1)
			if p.Release() {
				t.Errorf("second release returned true")
			}
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range ops {
				n := 1 + r.Int64N(3)
				double := r.IntN(8) == 0
				switch r.IntN(5) {
				case 0:
					p, err := s.Acquire(context.Background(), n)
					if err != nil {
						t.Errorf("Acquire(%d): %v", n, err)
						continue
					}
					hold(p, double)
				case 1:
					if p, ok := s.TryAcquire(n); ok {
						hold(p, double)
					}
				case 2: // cancellation racing the wait or the grant
					ctx, cancel := context.WithCancel(context.Background())
					cancellers.Add(1)
					go func() { defer cancellers.Done(); cancel() }()
					p, err := s.Acquire(ctx, n)
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							t.Errorf("cancelled Acquire: %v", err)
						}
						failing.Add(1)
						continue
					}
					hold(p, double)
				case 3:
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if _, err := s.Acquire(ctx, n); err != context.Canceled {
						t.Errorf("Acquire with a done context: %v", err)
					}
					failing.Add(1)
				case 4:
					err := s.Do(context.Background(), n, func(context.Context) error {
						grants.Add(1)
						if v := held.Add(n); v > capacity {
							t.Errorf("oracle holds %d > capacity %d", v, capacity)
						}
						held.Add(-n)
						return nil
					})
					if err != nil {
						t.Errorf("Do: %v", err)
					}
				}
			}
		}()
	}
	testkit.WaitAll(t, &wg, "the workers (an Acquire that never returns: a lost waiter)")
	testkit.WaitAll(t, &cancellers, "the cancellers")

	st := requireBalanced(t, s)
	require.Equal(t, int64(capacity), st.Available)
	require.Equal(t, doubles.Load(), st.DoubleReleases)
	require.Equal(t, failing.Load(), st.Cancelled)
	// Grants that raced a cancellation were taken back by the semaphore,
	// never seen by a worker, and counted as cancelled, not acquired.
	require.Equal(t, grants.Load(), st.Acquired)
	assert.LessOrEqual(t, maxHeld.Load(), int64(capacity))
	t.Logf("%+v, max held by the oracle %d", st, maxHeld.Load())
}

// TestStressSetCapacityRacingAcquireRelease shrinks and grows the capacity
// (5, 3, 5, ...) while workers acquire and release on the lock-free fast
// path and in the queue. The weight held never exceeds the largest capacity,
// and once the capacity is back at 5 every permit is accounted for.
func TestStressSetCapacityRacingAcquireRelease(t *testing.T) {
	const (
		workers = 8
		ops     = 1000
		maxCap  = 5
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s := semaphore.New(maxCap)
	var (
		held   atomic.Int64
		grants atomic.Uint64
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				s.SetCapacity(maxCap)
				resized <- n
				return
			default:
			}
			s.SetCapacity(maxCap - 2*int64(n%2))
			n++
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range ops {
				n := 1 + r.Int64N(3) // never above the smaller capacity
				var p semaphore.Permit
				if r.IntN(2) == 0 {
					var err error
					if p, err = s.Acquire(context.Background(), n); err != nil {
						t.Errorf("Acquire(%d): %v", n, err)
						return
					}
				} else {
					var ok bool
					if p, ok = s.TryAcquire(n); !ok {
						continue
					}
				}
				grants.Add(1)
				if v := held.Add(n); v > maxCap {
					t.Errorf("oracle holds %d > largest capacity %d", v, maxCap)
				}
				runtime.Gosched()
				held.Add(-n)
				if !p.Release() {
					t.Errorf("first release returned false")
				}
			}
		}()
	}
	testkit.WaitAll(t, &wg, "the workers (an Acquire that never returns: a lost waiter)")
	close(stop)
	t.Logf("%d capacity changes", testkit.Recv(t, resized, "the resizer to stop"))

	st := requireBalanced(t, s)
	require.Equal(t, int64(maxCap), st.Capacity)
	require.Equal(t, int64(maxCap), st.Available)
	require.Equal(t, grants.Load(), st.Acquired)
	require.Zero(t, st.Rejected)
}
