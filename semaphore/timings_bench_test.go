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
// (the FIFO semaphore as it is) and on.
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
	for _, h := range []string{"off", "on"} {
		b.Run("case=cap1-g32/hist="+h, func(b *testing.B) {
			s := semaphore.New(1, opts[h]...)
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
		})
	}
}
