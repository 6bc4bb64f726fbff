package semaphore_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkTimings is the cost of WithHistograms: the uncontended
// acquire and release of BenchmarkUncontended, and the contended hand-off
// of BenchmarkParallel's capacity-1 row, each with the histograms off
// (the FIFO semaphore as it is) and on; the contended row also with every
// wait timed (on-every, the sampling's ablation, docs/internals.md).
func BenchmarkTimings(b *testing.B) {
	opts := map[string][]semaphore.Option{"off": nil, "on": {semaphore.WithHistograms()}}
	for _, h := range []string{"off", "on"} {
		b.Run("case=uncontended/hist="+h, func(b *testing.B) {
			s := semaphore.New(10, opts[h]...)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
	}
	// hist=on-every is the ablation of the sampling (hist.Sampler): every
	// wait timed with two readings of the system clock and every hold
	// recorded, as before; hist=on-every-hold samples the waits only.
	for _, h := range []string{"off", "on", "on-every-hold", "on-every"} {
		b.Run("case=cap1-g32/hist="+h, func(b *testing.B) {
			s := semaphore.New(1, opts[h]...)
			switch h {
			case "on-every":
				s = semaphore.NewTimingEvery(1)
			case "on-every-hold":
				s = semaphore.NewTimingEveryHold(1)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			benchkit.SetGoroutines(b, 32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, err := s.Acquire(ctx, 1)
					if err != nil {
						panic(err)
					}
					p.Release()
				}
			})
			// The share of calls that queued: what a row costs depends on
			// it (a park and a wake-up against a claim), and timing moves it.
			st := s.Stats()
			b.ReportMetric(float64(st.Waited)/float64(max(st.Acquired, 1)), "waited/op")
		})
	}
}
