package adaptive

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// TestSnapshotAfterTheDecisionLeft: an overload reported while another
// held the controller's lock leaves its decision to the holder; Limit and
// Stats, called next, take it before they read, and report the limit
// after the cut, not the one before it (they read first, then decided: a
// scrape showed the old limit until the next).
func TestSnapshotAfterTheDecisionLeft(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit func(*Controller) int64
	}{
		{"Limit", (*Controller).Limit},
		{"Stats", func(c *Controller) int64 { return c.Stats().Limit }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sem := semaphore.New(20)
			ctl, err := New(sem, 1, 20)
			if err != nil {
				t.Fatal(err)
			}
			ctl.mu.Lock() // a holder: the report's TryLock fails, and the cut waits for us
			ctl.Report(Overload, time.Millisecond)
			ctl.mu.Unlock()
			if got := c.limit(ctl); got != 18 || sem.Stats().Capacity != 18 {
				t.Fatalf("after an overload left to the lock's holder: %s says %d, capacity %d; want 18, 18", c.name, got, sem.Stats().Capacity)
			}
		})
	}
}
