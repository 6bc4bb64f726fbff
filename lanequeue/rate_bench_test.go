package lanequeue_test

import (
	"context"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkAblationReservationCopy is AcquireAll and Release of a global
// lane and two rate lanes whose tokens are there (the lanes of
// lanehttp.BenchmarkTransport), with each rate lane's reservation held by
// value in the call's request (reservation=value, as built) or also copied
// to the heap, the allocation that keeping ReserveN's pointer made
// (reservation=heap).
func BenchmarkAblationReservationCopy(b *testing.B) {
	for _, heap := range []bool{false, true} {
		name := "reservation=value"
		if heap {
			name = "reservation=heap"
		}
		b.Run(name, func(b *testing.B) {
			lanequeue.SetHeapReservations(heap)
			defer lanequeue.SetHeapReservations(false)
			q := lanequeue.New[string]()
			defer q.Close()
			must(b, q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(64))))
			must(b, q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e9, 1e9))))
			must(b, q.Add("tpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e12, 1<<30))))
			lanes, err := q.Lanes("provider", "rpm", "tpm")
			must(b, err)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				tk, err := q.AcquireAll(ctx, "", lanes, lanequeue.LaneWeight("tpm", 100))
				if err != nil {
					b.Fatal(err)
				}
				tk.Release()
			}
		})
	}
}
