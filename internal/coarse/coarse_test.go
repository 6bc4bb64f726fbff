package coarse_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// The clock moves on while it is read, and never goes back.
func TestReadingsMoveOnWhileRead(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	defer c.Stop()
	first := c.Read()
	if first < 0 {
		t.Fatalf("first reading %d is before the epoch", first)
	}
	prev := first
	// Real time must pass for the timer to tick; give it up to 10 s (a
	// failsafe on a loaded machine, not a measurement).
	deadline := time.Now().Add(10 * time.Second)
	for prev == first {
		if time.Now().After(deadline) {
			t.Fatal("the coarse clock never moved on while being read")
		}
		r := c.Read()
		if r < prev {
			t.Fatalf("reading went back from %d to %d", prev, r)
		}
		prev = r
		runtime.Gosched()
	}
	if got := c.Time(prev); got.Before(c.Time(first)) {
		t.Fatalf("Time(%d) = %v is before Time(%d)", prev, got, first)
	}
}

// After Stop, reads return the last reading and start no timer again
// (goleak in TestMain would see a timer goroutine left running).
func TestStopFreezesTheClock(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	c.Read()
	c.Stop()
	last := c.Read()
	for range 1000 {
		if r := c.Read(); r != last {
			t.Fatalf("reading moved from %d to %d after Stop", last, r)
		}
	}
}
