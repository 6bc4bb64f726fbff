package semaphore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkPriorities is BenchmarkParallel's contended rows (32 goroutines
// acquiring and releasing weight 1, capacity 1 and 8) with
// WithPriorities, each beside the same row in FIFO order, in one run so
// that their ratio is the policy's cost. Goroutine i asks for priority
// i%4 (priority 0 by plain Acquire, as most callers of a gateway would),
// so that waiters are inserted ahead of others as well as behind; the
// step, 1ms, lets the lower ones age past the higher within a few
// hand-offs. The FIFO rows call Acquire, the path every FIFO user takes.
func BenchmarkPriorities(b *testing.B) {
	for _, c := range contexts() {
		for _, capacity := range []int64{1, 8} {
			for _, order := range []string{"fifo", "priorities"} {
				b.Run(fmt.Sprintf("ctx=%s/cap=%d/g=32/order=%s", c.name, capacity, order), func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					s := semaphore.New(capacity)
					if order == "priorities" {
						s = semaphore.New(capacity, semaphore.WithPriorities(time.Millisecond))
					}
					benchkit.SetGoroutines(b, 32)
					b.ReportAllocs()
					var id atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						prio := int(id.Add(1) % 4)
						turn := []semaphore.AcquireOption{semaphore.Priority(prio)}
						plain := order == "fifo" || prio == 0
						for pb.Next() {
							var p semaphore.Permit
							var err error
							if plain {
								p, err = s.Acquire(ctx, 1)
							} else {
								p, err = s.Acquire(ctx, 1, turn...)
							}
							if err != nil {
								b.Error(err)
								return
							}
							p.Release()
						}
					})
				})
			}
		}
	}
}
