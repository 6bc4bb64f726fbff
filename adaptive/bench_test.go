package adaptive_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkReport prices one report: outcome=success is the common case
// (two atomic adds and a load, and every limit-th report the round trip's
// decision, which may resize the semaphore); outcome=overload adds a clock
// read and the stale check; outcome=ignore counts and returns. For
// success, the ceiling is far above the limit the reports reach, so the
// limit grows for the whole run; for overload, the floor is the starting
// limit (64): above the floor the first refusal cuts at once and the rest
// of the run would measure the refusals of work admitted before the cut,
// at the floor each refusal is counted in its round trip (the cost of a
// stream of 429s once the limit is down).
func BenchmarkReport(b *testing.B) {
	for _, o := range []adaptive.Outcome{adaptive.Success, adaptive.Overload, adaptive.Ignore} {
		b.Run("outcome="+o.String(), func(b *testing.B) {
			s := semaphore.New(64)
			floor := int64(1)
			if o == adaptive.Overload {
				floor = 64
			}
			c, err := adaptive.New(s, floor, semaphore.MaxCapacity)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.Report(o, time.Millisecond)
			}
		})
	}
	b.Run("outcome=success/parallel", func(b *testing.B) {
		s := semaphore.New(64)
		c, err := adaptive.New(s, 1, semaphore.MaxCapacity)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Report(adaptive.Success, time.Millisecond)
			}
		})
	})
}
