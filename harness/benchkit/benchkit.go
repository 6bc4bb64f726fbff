// Package benchkit is the benchmark plumbing shared by the in-package
// benchmarks of the lanes packages and the bench module: the semaphore
// peers measured side by side, and the goroutine count of a parallel run.
// It is imported by _test files only.
package benchkit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	xsem "golang.org/x/sync/semaphore"

	"github.com/sessionlane/lanes/semaphore"
)

// SemPeer is one semaphore implementation: Make returns a function that
// acquires n permits and releases them, or nil if the peer cannot serve
// that capacity (a sync.Mutex is capacity 1). A peer that is not Weighted
// takes weight 1 only.
type SemPeer struct {
	Name     string
	Ctx      bool // honours a cancellable context
	Weighted bool // takes weights above 1
	Make     func(capacity int64) func(ctx context.Context, n int64)
}

// SemPeers returns lanes' semaphore, x/sync's, a buffered channel and a
// sync.Mutex, in that order.
func SemPeers() []SemPeer {
	return []SemPeer{
		{"lanes", true, true, func(c int64) func(context.Context, int64) {
			s := semaphore.New(c)
			return func(ctx context.Context, n int64) {
				p, err := s.Acquire(ctx, n)
				if err != nil {
					panic(err)
				}
				p.Release()
			}
		}},
		{"xsync", true, true, func(c int64) func(context.Context, int64) {
			s := xsem.NewWeighted(c)
			return func(ctx context.Context, n int64) {
				if err := s.Acquire(ctx, n); err != nil {
					panic(err)
				}
				s.Release(n)
			}
		}},
		// chan is the idiomatic semaphore: a buffered channel. With a
		// context that can end it selects on ctx.Done(), as a careful user
		// would write it.
		{"chan", true, false, func(c int64) func(context.Context, int64) {
			ch := make(chan struct{}, c)
			return func(ctx context.Context, _ int64) {
				if done := ctx.Done(); done == nil {
					ch <- struct{}{}
				} else {
					select {
					case ch <- struct{}{}:
					case <-done:
						panic(ctx.Err())
					}
				}
				<-ch
			}
		}},
		{"mutex", false, false, func(c int64) func(context.Context, int64) {
			if c != 1 {
				return nil
			}
			var mu sync.Mutex
			return func(context.Context, int64) {
				mu.Lock()
				//lint:ignore SA2001 an empty critical section is the point
				mu.Unlock()
			}
		}},
	}
}

// SetGoroutines makes RunParallel start g goroutines, or the nearest
// multiple of GOMAXPROCS at or above it, and returns that number.
func SetGoroutines(b *testing.B, g int) int {
	procs := runtime.GOMAXPROCS(0)
	p := max(1, g/procs)
	b.SetParallelism(p)
	return p * procs
}

// RunParallel runs do(ctx, w) in g goroutines (SetGoroutines) until b.N
// calls are done; w is weights[i % len(weights)] for the i-th goroutine,
// or 1 if weights is empty.
func RunParallel(b *testing.B, g int, weights []int64, ctx context.Context, do func(context.Context, int64)) {
	SetGoroutines(b, g)
	var id atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		n := int64(1)
		if len(weights) > 0 {
			n = weights[(id.Add(1)-1)%int64(len(weights))]
		}
		for pb.Next() {
			do(ctx, n)
		}
	})
}
