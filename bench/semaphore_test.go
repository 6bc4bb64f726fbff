package bench_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	msem "github.com/marusama/semaphore/v2"

	"github.com/sessionlane/lanes/harness/benchkit"
)

// semPeers are lanes, x/sync, marusama, a buffered channel and a mutex,
// measured side by side in one run.
var semPeers = slices.Insert(benchkit.SemPeers(), 2, benchkit.SemPeer{
	Name: "marusama", Ctx: true, Weighted: true,
	Make: func(c int64) func(context.Context, int64) {
		s := msem.New(int(c))
		return func(ctx context.Context, n int64) {
			if err := s.Acquire(ctx, int(n)); err != nil {
				panic(err)
			}
			s.Release(int(n))
		}
	},
})

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
				if (ctxName == "cancel" && !p.Ctx) || (sc.weights != nil && !p.Weighted) {
					continue
				}
				do := p.Make(sc.capacity)
				if do == nil {
					continue
				}
				b.Run(fmt.Sprintf("ctx=%s/scenario=%s/impl=%s", ctxName, sc.name, p.Name), func(b *testing.B) {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if ctxName == "cancel" {
						ctx, cancel = context.WithCancel(ctx)
					}
					defer cancel()
					runSem(b, sc, ctx, do)
				})
			}
			if bargingRow(sc) {
				b.Run(fmt.Sprintf("ctx=%s/scenario=%s/impl=%s", ctxName, sc.name, bargingImpl), func(b *testing.B) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					if ctxName == "bg" {
						ctx = context.Background()
					}
					runBarging(b, sc, ctx)
				})
				if ctxName == "bg" {
					b.Run(fmt.Sprintf("ctx=bg/scenario=%s/impl=mutex-probed", sc.name), func(b *testing.B) { runMutexProbed(b, sc) })
				}
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
	benchkit.RunParallel(b, sc.goroutines, sc.weights, ctx, do)
}
