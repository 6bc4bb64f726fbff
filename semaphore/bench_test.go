package semaphore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	xsem "golang.org/x/sync/semaphore"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/semaphore"
)

// peers are measured side by side in one run: lanes, x/sync, a buffered
// channel (weight 1 only) and a mutex (capacity 1 only).
var peers = benchkit.SemPeers()

func contexts() []struct {
	name string
	ctx  func() (context.Context, context.CancelFunc)
} {
	return []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	}
}

// BenchmarkUncontended is one goroutine acquiring and releasing 1 of 10.
// The loops call each semaphore directly (no closure), so that the fixed
// cost of an indirect call does not flatten the ratios.
func BenchmarkUncontended(b *testing.B) {
	for _, c := range contexts() {
		b.Run("ctx="+c.name+"/impl=lanes", func(b *testing.B) {
			ctx, cancel := c.ctx()
			defer cancel()
			s := semaphore.New(10)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
		b.Run("ctx="+c.name+"/impl=xsync", func(b *testing.B) {
			ctx, cancel := c.ctx()
			defer cancel()
			s := xsem.NewWeighted(10)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				s.Release(1)
			}
		})
		b.Run("ctx="+c.name+"/impl=chan", func(b *testing.B) {
			ch := make(chan struct{}, 10)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ch <- struct{}{}
				<-ch
			}
		})
	}
}

// BenchmarkParallel is g goroutines acquiring and releasing weight 1 in a
// tight loop on one semaphore of capacity c. With 32 goroutines on 2 cores,
// most goroutines are descheduled at any time and many of them hold a
// permit, so the semaphore is really contended.
func BenchmarkParallel(b *testing.B) {
	for _, c := range contexts() {
		for _, tc := range []struct{ capacity, goroutines int64 }{{8, 2}, {8, 32}, {1, 32}} {
			for _, p := range peers {
				do := p.Make(tc.capacity)
				if do == nil {
					continue
				}
				name := fmt.Sprintf("ctx=%s/cap=%d/g=%d/impl=%s", c.name, tc.capacity, tc.goroutines, p.Name)
				b.Run(name, func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					benchkit.SetGoroutines(b, int(tc.goroutines))
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							do(ctx, 1)
						}
					})
				})
			}
		}
	}
}

// BenchmarkWeighted is 32 goroutines with weights 8, 1, 1, 1 (by goroutine)
// on capacity 10: a heavy request must wait for the light ones to drain,
// and with FIFO it is not starved.
func BenchmarkWeighted(b *testing.B) {
	weights := []int64{8, 1, 1, 1}
	for _, c := range contexts() {
		for _, p := range peers[:2] {
			do := p.Make(10)
			b.Run(fmt.Sprintf("ctx=%s/cap=10/g=32/impl=%s", c.name, p.Name), func(b *testing.B) {
				ctx, cancel := c.ctx()
				defer cancel()
				benchkit.SetGoroutines(b, 32)
				b.ReportAllocs()
				var id atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					w := weights[id.Add(1)%int64(len(weights))]
					for pb.Next() {
						do(ctx, w)
					}
				})
			})
		}
	}
}
