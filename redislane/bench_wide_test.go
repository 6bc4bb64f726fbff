package redislane_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// BenchmarkWideLane: one instance, 250 goroutines on a lane of capacity
// 1000 (never full), each acquiring 1, reading the permit's Deadline and
// releasing at once: the client's cost of a grant on the batched path (one
// acquire call carries the waiters behind its head, one release call the
// releases made meanwhile), Redis's time included in sec/op, not in
// cpu-ns/grant (this process's CPU time per grant).
func BenchmarkWideLane(b *testing.B) { wideLane(b) }

// BenchmarkWideLaneQuota is BenchmarkWideLane WithQuota(50): grants from
// the blocks held, in process.
func BenchmarkWideLaneQuota(b *testing.B) { wideLane(b, redislane.WithQuota(50)) }

func wideLane(b *testing.B, opts ...redislane.Option) {
	const contenders, capacity = 250, 1000
	srv := startRedis(b)
	s, err := redislane.NewWeighted(newClient(b, srv.Addr), laneName(b), capacity,
		append([]redislane.Option{redislane.WithLease(2 * time.Second), redislane.WithQuarantine(0)}, opts...)...)
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	warmUp, err := s.Acquire(ctx, 1)
	require.NoError(b, err)
	warmUp.Release()
	var left atomic.Int64
	left.Store(int64(b.N))
	var late atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Error(err)
					return
				}
				if time.Until(p.Deadline()) < 0 {
					late.Add(1)
				}
				p.Release()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu0 > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/grant")
	}
	require.Zero(b, late.Load(), "permits past their deadline at once")
}
