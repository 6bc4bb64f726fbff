package bench_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/benchkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// lanes-barging is lanes' semaphore made WithBarging(bargingBound),
// measured in the capacity-1, 32-goroutine rows only, beside the mutex
// (the target: at most 1.5 times the fastest sync.Mutex-based
// peer).
const (
	bargingImpl  = "lanes-barging"
	bargingBound = time.Millisecond
	// probeEvery: one goroutine in probeEvery times each of its Acquire
	// calls and keeps the longest. The others do not read the clock,
	// which would cost about as much as the operation; the probes wait
	// in the same queue as everybody, so their longest wait is the
	// row's (to within the sampling).
	probeEvery = 8
)

// bargingRow says whether the lanes-barging row runs in scenario sc.
func bargingRow(sc semScenario) bool {
	return sc.capacity == 1 && sc.goroutines == 32 && sc.weights == nil
}

// runBarging runs sc on a semaphore made WithBarging: every goroutine
// acquires and releases in a loop, as runSem's; it reports max-wait-ms,
// the longest Acquire the probes saw, to be read against the bound (1ms)
// plus scheduling slack.
func runBarging(b *testing.B, sc semScenario, ctx context.Context) {
	s := semaphore.New(sc.capacity, semaphore.WithBarging(bargingBound))
	var worst, id atomic.Int64
	b.ReportAllocs()
	benchkit.SetGoroutines(b, sc.goroutines)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		probe := (id.Add(1)-1)%probeEvery == 0
		var mine time.Duration
		for pb.Next() {
			var t0 time.Time
			if probe {
				t0 = time.Now()
			}
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				panic(err)
			}
			if probe {
				if d := time.Since(t0); d > mine {
					mine = d
				}
			}
			p.Release()
		}
		for {
			cur := worst.Load()
			if int64(mine) <= cur || worst.CompareAndSwap(cur, int64(mine)) {
				break
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(worst.Load())/1e6, "max-wait-ms")
}

// runKeyedBarging is the hot-g32 row for a keyed semaphore made
// WithBarging(bargingBound) (and the defaults otherwise, as lanes-idle1h's
// entry stays): 32 goroutines on one key, probes as in runBarging.
func runKeyedBarging(b *testing.B) {
	benchkit.SetGoroutines(b, 32)
	k := key(0)
	s := keyedsem.New[string](keyedsem.WithBarging(bargingBound))
	var worst, id atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		probe := (id.Add(1)-1)%probeEvery == 0
		var mine time.Duration
		for pb.Next() {
			var t0 time.Time
			if probe {
				t0 = time.Now()
			}
			p, err := s.Acquire(bg, k)
			if err != nil {
				panic(err)
			}
			if probe {
				if d := time.Since(t0); d > mine {
					mine = d
				}
			}
			p.Release()
		}
		for {
			cur := worst.Load()
			if int64(mine) <= cur || worst.CompareAndSwap(cur, int64(mine)) {
				break
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(worst.Load())/1e6, "max-wait-ms")
}

// runKeyedFloor is the hot-g1 row: one goroutine on one key, so nobody
// ever waits. It is the per-operation floor of the hot-g32 rows: what a
// peer costs when the barging policy (or the mutex's) never comes into
// play, so that the hot-g32 ratio can be read against it.
func runKeyedFloor(b *testing.B, l keyedLock) {
	k := key(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Unlock(k, l.Lock(k))
	}
}
