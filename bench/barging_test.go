package bench_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/benchkit"
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
	runProbed(b, sc.goroutines, func() (func(), func()) {
		var p semaphore.Permit
		return func() {
				var err error
				if p, err = s.Acquire(ctx, 1); err != nil {
					panic(err)
				}
			}, func() {
				p.Release()
			}
	})
}

// runMutexProbed is the mutex row with runBarging's probes: the longest
// Lock a probe saw is the scheduling slack on this machine, which a
// sync.Mutex in starvation mode pays as barging's strict hand-off does.
func runMutexProbed(b *testing.B, sc semScenario) {
	var mu sync.Mutex
	runProbed(b, sc.goroutines, func() (func(), func()) { return mu.Lock, mu.Unlock })
}

// runProbed runs lock and unlock in a loop on g goroutines, each with its
// own pair from worker (made once per goroutine, so that the loop
// allocates nothing), one in probeEvery timing each lock, and reports the
// longest as max-wait-ms.
func runProbed(b *testing.B, g int, worker func() (lock, unlock func())) {
	var worst, id atomic.Int64
	b.ReportAllocs()
	benchkit.SetGoroutines(b, g)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		probe := (id.Add(1)-1)%probeEvery == 0
		lock, unlock := worker()
		var mine time.Duration
		for pb.Next() {
			var t0 time.Time
			if probe {
				t0 = time.Now()
			}
			lock()
			if probe {
				if d := time.Since(t0); d > mine {
					mine = d
				}
			}
			unlock()
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
	runKeyedProbed(b, lanesKeyed{keyedsem.New[string](keyedsem.WithBarging(bargingBound))})
}

// runKeyedProbed runs the hot-g32 row on l with runBarging's probes (for
// locker too: its longest wait is the scheduling slack of the machine).
func runKeyedProbed(b *testing.B, l keyedLock) {
	k := key(0)
	runProbed(b, 32, func() (func(), func()) {
		var h held
		return func() { h = l.Lock(k) }, func() { l.Unlock(k, h) }
	})
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
