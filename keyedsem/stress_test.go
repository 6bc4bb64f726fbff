package keyedsem_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Exclusion under constant eviction: many goroutines on few keys, with a
// cap of 2 entries, so that entries are evicted (or dropped, with idle
// timeout 0) and made again all the time, while acquires are cancelled at
// random and Sweep runs at random. An oracle counter per key checks that a
// key's capacity is never exceeded.
func TestExclusionUnderEvictionStress(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int64
		idle     time.Duration
	}{
		{"idle0/capacity1", 1, 0},
		{"idle0/capacity2", 2, 0},
		{"kept/capacity1", 1, time.Millisecond}, // fake time: evicted by Sweep, by the cap and by expiry passes
		{"kept/capacity2", 2, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			const workers, keys = 32, 4
			iters := 400
			if testing.Short() {
				iters = 100
			}
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			clk := newFake()
			s := keyedsem.New[int](
				keyedsem.WithPerKeyCapacity(c.capacity),
				keyedsem.WithIdleTimeout(c.idle),
				keyedsem.WithMaxKeys(2),
				keyedsem.WithClock(clk),
			)
			defer s.Close()
			var held [keys]atomic.Int64
			var over atomic.Int64
			var granted atomic.Int64
			var wg, cancellers sync.WaitGroup
			use := func(key int, p semaphore.Permit) {
				if h := held[key].Add(p.Weight()); h > c.capacity {
					over.Add(1)
				}
				runtime.Gosched()
				held[key].Add(-p.Weight())
				granted.Add(1)
				if !p.Release() {
					over.Add(1)
				}
			}
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(w)))
					for range iters {
						key := rng.IntN(keys)
						n := 1 + rng.Int64N(c.capacity)
						switch op := rng.IntN(20); {
						case op < 10:
							p, err := s.Acquire(bg, key, semaphore.Weight(n))
							if err != nil {
								t.Error(err)
								return
							}
							use(key, p)
						case op < 14: // cancelled at a random moment
							ctx, cancel := context.WithCancel(bg)
							cancellers.Add(1)
							go func() {
								defer cancellers.Done()
								runtime.Gosched()
								cancel()
							}()
							p, err := s.Acquire(ctx, key, semaphore.Weight(n))
							if err == nil {
								use(key, p)
							} else if !errors.Is(err, context.Canceled) {
								t.Error(err)
							}
						case op < 16:
							if p, ok := s.TryAcquire(key, semaphore.Weight(n)); ok {
								use(key, p)
							}
						case op < 17:
							ctx, cancel := context.WithCancel(bg)
							cancel()
							if _, err := s.Acquire(ctx, key, semaphore.Weight(n)); !errors.Is(err, context.Canceled) {
								t.Error("done context:", err)
							}
						case op < 18:
							if err := s.Do(bg, key, func(context.Context) error {
								if h := held[key].Add(1); h > c.capacity {
									over.Add(1)
								}
								runtime.Gosched()
								held[key].Add(-1)
								return nil
							}); err != nil {
								t.Error(err)
							}
						case op < 19:
							s.Sweep()
						default:
							clk.Advance(time.Millisecond)
						}
					}
				}()
			}
			testkit.WaitAll(t, &wg, "the workers")
			testkit.WaitAll(t, &cancellers, "the cancelling goroutines")
			require.Zero(t, over.Load(), "a key's capacity was exceeded, or a release was refused")
			st := s.Stats()
			assert.Equal(t, int64(0), st.Held)
			assert.Equal(t, 0, st.Waiters)
			assert.Equal(t, st.Acquired, st.Released)
			assert.Equal(t, uint64(0), st.DoubleReleases)
			if c.idle > 0 {
				clk.Advance(c.idle)
				s.Sweep()
			}
			assert.Equal(t, 0, s.Len(), "entries left after the workload settled")
			st = s.Stats()
			assert.Equal(t, st.Created, st.Evicted)
			t.Logf("%d grants, %d entries made, %d cancelled", granted.Load(), st.Created, st.Cancelled)
		})
	}
}
