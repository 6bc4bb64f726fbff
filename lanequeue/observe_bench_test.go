package lanequeue_test

import (
	"context"
	"testing"
	"time"
)

// nopObserver is an Observer that does nothing, to price the report.
type nopObserver struct{}

func (nopObserver) Observe(error, time.Duration) {}

// BenchmarkDo prices Do of session+global: without an observer (the cost
// every Do pays for outcomes being reportable) and with a no-op observer
// on the global lane (the report itself: a coarse clock read and a call).
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for _, observe := range []bool{false, true} {
		name := "observer=none"
		if observe {
			name = "observer=nop"
		}
		b.Run(name, func(b *testing.B) {
			q, lanes := benchQueue(64)
			defer q.Close()
			if observe {
				if err := q.ObserveLane("global", nopObserver{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := q.Do(ctx, benchKeys[i&63], lanes.sessionGlobal, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
