package waitq_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/waitq"
)

// The coarse clock stamps arrivals only where its resolution is at most a
// sixteenth of the step, which bounds how much it loosens the aging (see
// CoarseArrivals): never for BenchmarkComposed's 1 ms step.
func TestCoarseArrivalsOnlyForAStepOfSixteenTicks(t *testing.T) {
	for _, c := range []struct {
		step time.Duration
		want bool
	}{
		{0, false},
		{-time.Second, false},
		{time.Millisecond, false},
		{16*coarse.Resolution - 1, false},
		{16 * coarse.Resolution, true},
		{time.Second, true},
		{time.Duration(1<<63 - 1), true},
	} {
		if got := waitq.CoarseArrivals(int64(c.step)); got != c.want {
			t.Errorf("CoarseArrivals(%v) = %v; want %v", c.step, got, c.want)
		}
		if waitq.CoarseArrivals(int64(c.step)) && coarse.Resolution > c.step/16 {
			t.Errorf("CoarseArrivals(%v): the coarse clock's resolution %v is more than a sixteenth of the step", c.step, coarse.Resolution)
		}
	}
}
