package redislane_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// BenchmarkUncontendedAcquireRelease: one caller, nobody else. Reports the
// Redis calls per acquire+release, its p50, and that p50 in round trips
// (the p50 of a PING on the same connection pool).
func BenchmarkUncontendedAcquireRelease(b *testing.B) {
	srv := startRedis(b)
	var cnt redistest.Calls
	rc := newClient(b, srv.Addr)
	rc.AddHook(&cnt)
	s, err := redislane.NewWeighted(rc, laneName(b), 10, redislane.WithLease(2*time.Second), redislane.WithQuarantine(0))
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	var pings []time.Duration
	for range 1000 {
		t0 := time.Now()
		require.NoError(b, rc.Ping(ctx).Err())
		pings = append(pings, time.Since(t0))
		p, err := s.Acquire(ctx, 1) // warms the scripts and the pool
		require.NoError(b, err)
		p.Release()
	}
	lat := make([]time.Duration, 0, b.N)
	calls := cnt.Commands()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	p50, ping := percentile(lat, 0.5), percentile(pings, 0.5)
	b.ReportMetric(float64(cnt.Commands()-calls)/float64(b.N), "calls/op")
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(ping.Microseconds()), "ping-p50-µs")
	b.ReportMetric(float64(p50)/float64(ping), "p50-round-trips")
}

// BenchmarkContendedFleet: 4 instances (each with its own client, as four
// processes would have) x 25 goroutines, limit 10, weight 1, each permit
// held 1 ms. b.N is the number of grants. The multi-process figures come
// from cmd/fleetsim.
func BenchmarkContendedFleet(b *testing.B) { contendedFleet(b, nil, nil) }

// BenchmarkContendedFleetOrdered is BenchmarkContendedFleet on a lane made
// WithPriorities and WithFairShare, each call with one of 3 priorities and
// one of 4 groups: the cost of the fleet's order beside FIFO's.
func BenchmarkContendedFleetOrdered(b *testing.B) {
	prios := []semaphore.AcquireOption{semaphore.Priority(0), semaphore.Priority(1), semaphore.Priority(2)}
	groups := []semaphore.AcquireOption{semaphore.Group("a"), semaphore.Group("b"), semaphore.Group("c"), semaphore.Group("d")}
	contendedFleet(b, []redislane.Option{redislane.WithPriorities(time.Second), redislane.WithFairShare(nil)},
		func(i int) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{prios[i%3], groups[i%4]}
		})
}

// contendedFleet runs BenchmarkContendedFleet's load on a lane made with
// opts, the i-th call of a goroutine with the options of opt(i) (nil:
// none).
func contendedFleet(b *testing.B, opts []redislane.Option, opt func(i int) []semaphore.AcquireOption) {
	const (
		instances  = 4
		contenders = 25
		limit      = 10
		hold       = time.Millisecond
	)
	srv := startRedis(b)
	name := laneName(b)
	var cnt redistest.Calls
	var sems []*redislane.Weighted
	for range instances {
		rc := newClient(b, srv.Addr)
		rc.AddHook(&cnt)
		s, err := redislane.NewWeighted(rc, name, limit, append([]redislane.Option{redislane.WithLease(2 * time.Second), redislane.WithQuarantine(0)}, opts...)...)
		require.NoError(b, err)
		defer s.Close()
		sems = append(sems, s)
	}
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	var o oracle
	calls := cnt.Commands()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range sems {
		for range contenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for i := 0; left.Add(-1) >= 0; i++ {
					var co []semaphore.AcquireOption
					if opt != nil {
						co = opt(i)
					}
					t0 := time.Now()
					p, err := s.Acquire(ctx, 1, co...)
					if err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
					sp := span{Start: redistest.Now(), W: 1, Fence: p.Fence()}
					time.Sleep(hold) // the work
					sp.End = endOf(p.Deadline())
					o.add(sp)
					p.Release()
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if top := maxInUse(o.spans); top > limit {
		b.Fatalf("oracle: %d units in use at once, limit %d", top, limit)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "grants/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(cnt.Commands()-calls)/float64(b.N), "calls/grant")
}
