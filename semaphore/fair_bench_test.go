package semaphore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkFairShare is BenchmarkParallel's contended rows (32 goroutines,
// weight 1) on a WithFairShare semaphore whose goroutines belong to 4
// groups, beside the same rows on a FIFO semaphore in the same run: what
// fair sharing costs a contended semaphore (the place in line found under
// the lock, the virtual time moved in the grant loop). The allocs/op
// column checks that a wait of a group with a record allocates nothing.
func BenchmarkFairShare(b *testing.B) {
	groups := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	for _, c := range contexts() {
		for _, capacity := range []int64{1, 8} {
			for _, policy := range []string{"fifo", "fair"} {
				b.Run(fmt.Sprintf("ctx=%s/cap=%d/g=32/groups=4/policy=%s", c.name, capacity, policy), func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					s := semaphore.New(capacity)
					if policy == "fair" {
						s = semaphore.New(capacity, semaphore.WithFairShare(nil))
					}
					benchkit.SetGoroutines(b, 32)
					b.ReportAllocs()
					var id atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						fair := policy == "fair"
						turn := []semaphore.AcquireOption{semaphore.Group(groups[(id.Add(1)-1)%int64(len(groups))])}
						for pb.Next() {
							var p semaphore.Permit
							var err error
							if fair {
								p, err = s.Acquire(ctx, 1, turn...)
							} else {
								p, err = s.Acquire(ctx, 1) // the FIFO row as BenchmarkParallel has it
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
