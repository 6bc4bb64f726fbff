package semaphore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkBarging is the contended capacity-1 and weighted rows of a
// semaphore made WithBarging(1ms) beside FIFO and a sync.Mutex, with
// allocs/op (a wait must allocate nothing: the bound's timers are pooled).
// The peer comparison that is published is in the bench module.
func BenchmarkBarging(b *testing.B) {
	for _, g := range []int{2, 32} {
		for _, c := range []struct {
			name string
			opts []semaphore.Option
		}{{"fifo", nil}, {"barging", []semaphore.Option{semaphore.WithBarging(time.Millisecond)}},
			// A bound that never runs out: what strict hand-off costs.
			{"barging-1h", []semaphore.Option{semaphore.WithBarging(time.Hour)}}} {
			for _, ctxName := range []string{"bg", "cancel"} {
				b.Run("cap=1/g="+strconv.Itoa(g)+"/ctx="+ctxName+"/impl="+c.name, func(b *testing.B) {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if ctxName == "cancel" {
						ctx, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					s := semaphore.New(1, c.opts...)
					b.ReportAllocs()
					benchkit.RunParallel(b, g, nil, ctx, func(ctx context.Context, n int64) {
						p, err := s.Acquire(ctx, n)
						if err != nil {
							panic(err)
						}
						p.Release()
					})
				})
			}
		}
		b.Run("cap=1/g="+strconv.Itoa(g)+"/impl=mutex", func(b *testing.B) {
			var mu sync.Mutex
			b.ReportAllocs()
			benchkit.RunParallel(b, g, nil, context.Background(), func(context.Context, int64) {
				mu.Lock()
				//lint:ignore SA2001 an empty critical section is the point
				mu.Unlock()
			})
		})
	}
	b.Run("w8111-cap10-g32/impl=barging", func(b *testing.B) {
		s := semaphore.New(10, semaphore.WithBarging(time.Millisecond))
		b.ReportAllocs()
		benchkit.RunParallel(b, 32, []int64{8, 1, 1, 1}, context.Background(), func(ctx context.Context, n int64) {
			p, err := s.Acquire(ctx, n)
			if err != nil {
				panic(err)
			}
			p.Release()
		})
	})
}
