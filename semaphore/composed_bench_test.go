package semaphore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkComposed is BenchmarkParallel's contended rows (32 goroutines
// acquiring and releasing weight 1, capacity 1 and 8) on a semaphore with
// WithPriorities and WithFairShare together, beside the FIFO row and each
// order alone, in one run, so that each ratio to the FIFO row is the cost
// of the order (issue 23: the composed row at most 1.15x FIFO, 0 allocs).
// Goroutine i asks for priority i%4 and belongs to group (i/4)%4, so that
// every band holds every group and a newcomer is placed by both its band
// and its group's start tag. Every call of an ordered row carries its
// options (Priority(0) too); the FIFO row calls Acquire as every FIFO user
// does. The step, 1ms, lets low bands age past high ones within a few
// hand-offs, as in BenchmarkPriorities.
func BenchmarkComposed(b *testing.B) {
	orders := []struct {
		name string
		opts []semaphore.Option
		prio bool // calls carry Priority
		fair bool // calls carry Group
	}{
		{"fifo", nil, false, false},
		{"priorities", []semaphore.Option{semaphore.WithPriorities(time.Millisecond)}, true, false},
		{"fair", []semaphore.Option{semaphore.WithFairShare(nil)}, false, true},
		{"priorities+fair", []semaphore.Option{semaphore.WithPriorities(time.Millisecond), semaphore.WithFairShare(nil)}, true, true},
	}
	for _, c := range contexts() {
		for _, capacity := range []int64{1, 8} {
			for _, o := range orders {
				b.Run(fmt.Sprintf("ctx=%s/cap=%d/g=32/order=%s", c.name, capacity, o.name), func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					runComposed(b, ctx, semaphore.New(capacity, o.opts...), o.prio, o.fair)
				})
			}
		}
	}
}

// runComposed is a row of BenchmarkComposed on s: 32 goroutines, goroutine
// i asking for priority i%4 (prio) in group (i/4)%4 (fair).
func runComposed(b *testing.B, ctx context.Context, s *semaphore.Weighted, prio, fair bool) {
	groups := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	benchkit.SetGoroutines(b, 32)
	b.ReportAllocs()
	var id atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := id.Add(1) - 1
		var turn []semaphore.AcquireOption
		if prio {
			turn = append(turn, semaphore.Priority(int(i%4)))
		}
		if fair {
			turn = append(turn, semaphore.Group(groups[(i/4)%4]))
		}
		for pb.Next() {
			p, err := s.Acquire(ctx, 1, turn...)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}
