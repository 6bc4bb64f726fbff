package semaphore

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/waitq"
)

// A semaphore stamps arrivals from the coarse clock only for a step long
// enough for it (waitq.CoarseArrivals); and a wait's timing never starts
// at such a stamp, whose lag would be added to the wait (stampWait takes
// a precise reading instead, for a sampled wait).
func TestCoarseArrivalsAndTheWaitsTiming(t *testing.T) {
	if s := New(1, WithPriorities(time.Millisecond)); s.prio.coarse {
		t.Fatal("a 1ms step stamps arrivals from the coarse clock, whose resolution is 1ms")
	}
	s := New(1, WithPriorities(time.Second), WithHistograms())
	if !s.prio.coarse {
		t.Fatal("a 1s step reads the system clock on every arrival")
	}
	w := &waitq.Waiter{Place: waitq.Place{Arrival: 1}}
	timed := 0
	for range 100 { // the sampler times a lane's first waits, then one in N
		w.Since, w.Timed = 0, false
		s.stampWait(w)
		if w.Timed {
			timed++
			if w.Since == w.Arrival {
				t.Fatal("a wait timed from its coarse arrival stamp")
			}
		}
	}
	if timed == 0 {
		t.Fatal("no wait timed: the test saw nothing")
	}
}
