package keyedsem_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
)

// TestBargingKeyAgedWhileWokenSetsStrict is semaphore's
// TestBargingAgedWhileWokenSetsStrict on a key (modelcheck's driver): the
// woken waiter's rejoin must make the key strict (the mark of Reclaim's
// admission).
func TestBargingKeyAgedWhileWokenSetsStrict(t *testing.T) {
	modelcheck.AgedWhileWokenSetsStrict(t, func(clk *clock.Fake) modelcheck.AgedLane {
		s := keyedsem.New[string](keyedsem.WithBarging(time.Second), keyedsem.WithClock(clk))
		return modelcheck.AgedLane{
			SUT:    bargeKey{s},
			Strict: func() bool { return keyedsem.BargingStrict(s, bKey) },
			Woken:  func() bool { return keyedsem.BargingWoken(s, bKey) },
		}
	})
}
