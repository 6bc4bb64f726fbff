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

// The ablation benchmarks run each trick of the fast path against its
// plain alternative in one binary, on the published rows: one goroutine
// (capacity 1, as bench/'s uncontended row), and 32 goroutines on
// capacity 1 and 8. docs/internals.md has the figures and the commands.

type ablationRow struct {
	name       string
	capacity   int64
	goroutines int     // 0: one goroutine in a plain loop
	weights    []int64 // dealt out by goroutine; nil: weight 1
}

var ablationRows = []ablationRow{{"uncontended", 1, 0, nil}, {"cap1-g32", 1, 32, nil}, {"cap8-g32", 8, 32, nil}}

// weightedRow is bench/'s weighted row: up to ten permits out at once,
// so it is where more than eight inline tokens could matter.
var weightedRow = ablationRow{"w8111-cap10-g32", 10, 32, []int64{8, 1, 1, 1}}

// runRow runs acquire+release on the row's scenario.
// acquireFunc is the acquire call a row measures: Acquire itself, or a
// variant of it.
type acquireFunc = func(context.Context, int64, ...semaphore.AcquireOption) (semaphore.Permit, error)

func runRow(b *testing.B, r ablationRow, ctx context.Context, acquire acquireFunc) {
	b.ReportAllocs()
	if r.goroutines == 0 {
		for i := 0; i < b.N; i++ {
			p, err := acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
		return
	}
	benchkit.SetGoroutines(b, r.goroutines)
	var id atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		w := int64(1)
		if r.weights != nil {
			w = r.weights[id.Add(1)%int64(len(r.weights))]
		}
		for pb.Next() {
			p, err := acquire(ctx, w)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}

// BenchmarkAblationTokens: 14 inline tokens (what New sets up) against 8,
// 4, 1 and none (every grant through a spare token under the mutex).
func BenchmarkAblationTokens(b *testing.B) {
	for _, r := range append(ablationRows[:len(ablationRows):len(ablationRows)], weightedRow) {
		for _, k := range []int{semaphore.InlineTokens, 8, 4, 1, 0} {
			b.Run(fmt.Sprintf("row=%s/tokens=%d", r.name, k), func(b *testing.B) {
				s := semaphore.NewWithInlineTokens(r.capacity, k)
				runRow(b, r, context.Background(), s.Acquire)
			})
		}
	}
}

// BenchmarkAblationGens: the inline tokens' generations packed side by
// side (what New sets up) against each on a cache line of its own.
func BenchmarkAblationGens(b *testing.B) {
	for _, r := range ablationRows {
		for _, v := range []struct {
			name string
			make func(int64) *semaphore.Weighted
		}{{"padded", semaphore.NewPaddedGens}, {"packed", func(c int64) *semaphore.Weighted { return semaphore.New(c) }}} {
			b.Run(fmt.Sprintf("row=%s/gens=%s", r.name, v.name), func(b *testing.B) {
				runRow(b, r, context.Background(), v.make(r.capacity).Acquire)
			})
		}
	}
}

// BenchmarkAblationCtx: Acquire's look at the context, which skips Err
// for the contexts that never end, recognised by their interface word
// (neverEnds: Acquire), against no special case (ctx.Err() always) and
// against recognising them by comparison with Background and TODO; with
// context.Background() and with a cancellable context.
func BenchmarkAblationCtx(b *testing.B) {
	for _, r := range ablationRows {
		for _, c := range contexts() {
			for _, v := range []struct {
				name    string
				acquire func(*semaphore.Weighted) acquireFunc
			}{
				{"neverdone", func(s *semaphore.Weighted) acquireFunc {
					return s.Acquire
				}},
				{"compare", func(s *semaphore.Weighted) acquireFunc {
					return s.AcquireCompareCtx
				}},
				{"plain", func(s *semaphore.Weighted) acquireFunc {
					return s.AcquirePlainCtx
				}},
			} {
				b.Run(fmt.Sprintf("row=%s/ctx=%s/check=%s", r.name, c.name, v.name), func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					runRow(b, r, ctx, v.acquire(semaphore.New(r.capacity)))
				})
			}
		}
	}
}

// BenchmarkAblationTimedFlag: Acquire, whose fast path refuses timed
// semaphores by the flag it tests anyway, against a fast path that takes
// them and tests for the stamp after each grant; on an untimed semaphore,
// which is what the flag is for.
func BenchmarkAblationTimedFlag(b *testing.B) {
	for _, r := range ablationRows {
		for _, v := range []struct {
			name    string
			acquire func(*semaphore.Weighted) acquireFunc
		}{
			{"flag", func(s *semaphore.Weighted) acquireFunc { return s.Acquire }},
			{"check", func(s *semaphore.Weighted) acquireFunc {
				return s.AcquireStampCheck
			}},
		} {
			b.Run(fmt.Sprintf("row=%s/stamp=%s", r.name, v.name), func(b *testing.B) {
				runRow(b, r, context.Background(), v.acquire(semaphore.New(r.capacity)))
			})
		}
	}
}

// BenchmarkAblationBackoff: Acquire, which sends a compare-and-swap lost
// to another core to the slow path at once, against the backoff it had
// before issue 23 (retry after a spin that doubles each round, up to 3
// times) and against retrying at once with no spin; on capacity 1 and 8
// with 2 and 32 goroutines, where compare-and-swaps are lost.
func BenchmarkAblationBackoff(b *testing.B) {
	rows := []ablationRow{{"cap1-g2", 1, 2, nil}, {"cap1-g32", 1, 32, nil}, {"cap8-g2", 8, 2, nil}, {"cap8-g32", 8, 32, nil}}
	for _, r := range rows {
		for _, v := range []struct {
			name    string
			acquire func(*semaphore.Weighted) acquireFunc
		}{
			{"none", func(s *semaphore.Weighted) acquireFunc { return s.Acquire }},
			{"spin", func(s *semaphore.Weighted) acquireFunc {
				return s.AcquireBackoff
			}},
			{"retry", func(s *semaphore.Weighted) acquireFunc {
				return s.AcquireRetryNoSpin
			}},
		} {
			b.Run(fmt.Sprintf("row=%s/backoff=%s", r.name, v.name), func(b *testing.B) {
				runRow(b, r, context.Background(), v.acquire(semaphore.New(r.capacity)))
			})
		}
	}
}

// BenchmarkAblationOptions: a call with one option (Priority(1), on a
// semaphore WithPriorities) read in place by acquireWith (what Acquire
// does) against call.Read's Call returned by value and its Turn copied
// (docs/internals.md).
func BenchmarkAblationOptions(b *testing.B) {
	for _, r := range ablationRows[:2] {
		for _, impl := range []string{"fold", "read-by-value"} {
			b.Run(fmt.Sprintf("row=%s/impl=%s", r.name, impl), func(b *testing.B) {
				s := semaphore.New(r.capacity, semaphore.WithPriorities(time.Millisecond))
				prio := []semaphore.AcquireOption{semaphore.Priority(1)}
				acquire := s.Acquire
				if impl == "read-by-value" {
					acquire = s.AcquireReadByValue
				}
				runRow(b, r, context.Background(), func(ctx context.Context, n int64, _ ...semaphore.AcquireOption) (semaphore.Permit, error) {
					return acquire(ctx, n, prio...)
				})
			})
		}
	}
}

// BenchmarkAblationHandOff: a release into a queue that hands its token to
// the head under mu (what New sets up) against one that adds the permits
// and the token to the state word for the head's claim to take back (a
// compare-and-swap), on the rows where releases find waiters: capacity 1
// and 8 with 32 goroutines, both contexts, and the weighted row. "on"
// hands off at every capacity (NewHandOff), where New does at capacity 1
// only: the other rows show why.
func BenchmarkAblationHandOff(b *testing.B) {
	for _, r := range []ablationRow{ablationRows[1], ablationRows[2], weightedRow} {
		for _, c := range contexts() {
			for _, v := range []struct {
				name string
				make func(int64, ...semaphore.Option) *semaphore.Weighted
			}{{"on", semaphore.NewHandOff}, {"off", semaphore.NewNoHandOff}} {
				b.Run(fmt.Sprintf("row=%s/ctx=%s/handoff=%s", r.name, c.name, v.name), func(b *testing.B) {
					ctx, cancel := c.ctx()
					defer cancel()
					runRow(b, r, ctx, v.make(r.capacity).Acquire)
				})
			}
		}
	}
}

// BenchmarkAblationArrivalClock is BenchmarkComposed's capacity-1
// priorities+fair rows with arrivals from the CPU's counter
// (arrivals=counter, New's default where the kernel keeps its time on it:
// hist.Clock.Arrival) and from the precise clock as before
// (arrivals=precise), beside the FIFO row. The counter stays only while
// its rows are measurably below precise's (docs/internals.md).
func BenchmarkAblationArrivalClock(b *testing.B) {
	opts := []semaphore.Option{semaphore.WithPriorities(time.Millisecond), semaphore.WithFairShare(nil)}
	for _, c := range contexts() {
		b.Run(fmt.Sprintf("ctx=%s/arrivals=fifo", c.name), func(b *testing.B) {
			ctx, cancel := c.ctx()
			defer cancel()
			runComposed(b, ctx, semaphore.New(1), false, false)
		})
		for _, precise := range []bool{false, true} {
			name := "counter"
			if precise {
				name = "precise"
			}
			b.Run(fmt.Sprintf("ctx=%s/arrivals=%s", c.name, name), func(b *testing.B) {
				ctx, cancel := c.ctx()
				defer cancel()
				s := semaphore.New(1, opts...)
				if precise {
					semaphore.PreciseArrivals(s)
				}
				runComposed(b, ctx, s, true, true)
			})
		}
	}
}
