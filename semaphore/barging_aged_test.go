package semaphore_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingAgedWhileWokenSetsStrict: a woken waiter whose bound runs
// out while it is off the queue, and that loses the permit to a barger,
// makes the semaphore strict when it rejoins (modelcheck's driver; found
// by review: no other test fails without the rejoin's agedOff in
// waitq.BargeWait).
func TestBargingAgedWhileWokenSetsStrict(t *testing.T) {
	modelcheck.AgedWhileWokenSetsStrict(t, func(clk *clock.Fake) modelcheck.AgedLane {
		s := semaphore.New(1, semaphore.WithBarging(time.Second), semaphore.WithClock(clk))
		return modelcheck.AgedLane{
			SUT:    bargeSem{s},
			Strict: func() bool { return semaphore.BargingStrict(s) },
			Woken:  func() bool { return semaphore.BargingWoken(s) },
		}
	})
}
