package bench_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	msem "github.com/marusama/semaphore/v2"
	xsem "golang.org/x/sync/semaphore"

	"github.com/sessionlane/lanes/semaphore"
)

// semPeer is one semaphore implementation: make returns a function that
// acquires n permits and releases them, or nil if the peer cannot serve
// that capacity or weight (a sync.Mutex is capacity 1, a channel weight 1).
type semPeer struct {
	name     string
	ctx      bool // honours a cancellable context
	weighted bool // takes weights above 1
	make     func(capacity int64) func(ctx context.Context, n int64)
}

var semPeers = []semPeer{
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
	{"marusama", true, true, func(c int64) func(context.Context, int64) {
		s := msem.New(int(c))
		return func(ctx context.Context, n int64) {
			if err := s.Acquire(ctx, int(n)); err != nil {
				panic(err)
			}
			s.Release(int(n))
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

// semScenario is one workload: goroutines == 0 means one goroutine in a
// plain loop (uncontended); weights are dealt out by goroutine.
type semScenario struct {
	name       string
	capacity   int64
	goroutines int
	weights    []int64
	cancel     bool // also run with a cancellable context
}

var semScenarios = func() []semScenario {
	sc := []semScenario{{name: "uncontended", capacity: 1, cancel: true}}
	for _, g := range []int{2, 4, 8, 16, 32, 64} {
		sc = append(sc, semScenario{name: fmt.Sprintf("cap8-g%d", g), capacity: 8, goroutines: g, cancel: g == 2 || g == 32})
	}
	for _, g := range []int{2, 8, 32} {
		sc = append(sc, semScenario{name: fmt.Sprintf("cap1-g%d", g), capacity: 1, goroutines: g, cancel: g == 32})
	}
	return append(sc, semScenario{name: "w8111-cap10-g32", capacity: 10, goroutines: 32, weights: []int64{8, 1, 1, 1}, cancel: true})
}()

// BenchmarkSemaphore acquires and releases one semaphore with an empty
// critical section. ns/op is wall time per acquire+release over all
// goroutines, so ops/s = 1e9 / ns/op. With 32 goroutines on 2 cores most
// goroutines are descheduled at any time, many of them holding a permit:
// the semaphore is really contended.
//
// ctx=bg uses context.Background(); ctx=cancel a context that can end,
// so the cost of watching ctx.Done() while waiting shows.
func BenchmarkSemaphore(b *testing.B) {
	for _, ctxName := range []string{"bg", "cancel"} {
		for _, sc := range semScenarios {
			if ctxName == "cancel" && !sc.cancel {
				continue
			}
			for _, p := range semPeers {
				if (ctxName == "cancel" && !p.ctx) || (sc.weights != nil && !p.weighted) {
					continue
				}
				do := p.make(sc.capacity)
				if do == nil {
					continue
				}
				b.Run(fmt.Sprintf("ctx=%s/scenario=%s/impl=%s", ctxName, sc.name, p.name), func(b *testing.B) {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if ctxName == "cancel" {
						ctx, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					runSem(b, sc, ctx, do)
				})
			}
		}
	}
}

func runSem(b *testing.B, sc semScenario, ctx context.Context, do func(context.Context, int64)) {
	b.ReportAllocs()
	if sc.goroutines == 0 {
		for i := 0; i < b.N; i++ {
			do(ctx, 1)
		}
		return
	}
	setGoroutines(b, sc.goroutines)
	var id atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		n := int64(1)
		if sc.weights != nil {
			n = sc.weights[(id.Add(1)-1)%int64(len(sc.weights))]
		}
		for pb.Next() {
			do(ctx, n)
		}
	})
}

// setGoroutines makes RunParallel start g goroutines (the nearest multiple
// of GOMAXPROCS, at least GOMAXPROCS), and returns how many it will start.
func setGoroutines(b *testing.B, g int) int {
	procs := runtime.GOMAXPROCS(0)
	p := max(1, g/procs)
	b.SetParallelism(p)
	return p * procs
}
