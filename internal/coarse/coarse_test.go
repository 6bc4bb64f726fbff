package coarse_test

import (
	"fmt"
	"runtime"
	"sync"
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

// failsafe bounds the waits of these tests for real time to pass: a
// deadline on a loaded machine, not a measurement.
const failsafe = 10 * time.Second

// A clock read seldom reads the system clock and starts no timer: the
// timer would cost more than the reads (AlwaysTick, the old way, fails
// this).
func TestSeldomReadsStartNoTimer(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	defer c.Stop()
	prev := c.Read()
	for range coarse.TickReads / 2 {
		before := int64(time.Since(c.Time(0)))
		r := c.Read()
		if r < prev || r < before {
			t.Fatalf("reading %d: not a fresh system clock reading (previous %d, system clock before it %d)", r, prev, before)
		}
		prev = r
	}
	if c.Ticking() {
		t.Fatalf("%d reads started the timer; it takes %d within a resolution", coarse.TickReads/2+1, coarse.TickReads)
	}
}

// readUntilTicking reads c in a tight loop until its timer runs.
func readUntilTicking(t *testing.T, c *coarse.Clock) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for !c.Ticking() {
		if time.Now().After(deadline) {
			t.Fatal("reads in a tight loop never started the timer")
		}
		for range coarse.TickReads {
			c.Read()
		}
	}
}

// A clock read often starts its timer; after RecheckTicks ticks it stops
// to count again, and a clock then read about ten times a resolution
// stays on system clock reads.
func TestTimerStopsWhenReadsSlowDown(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	defer c.Stop()
	readUntilTicking(t, &c)
	deadline := time.Now().Add(failsafe)
	pace := time.NewTicker(coarse.Resolution / 10)
	defer pace.Stop()
	for c.Ticking() {
		if time.Now().After(deadline) {
			t.Fatalf("read once every %v, the timer never stopped", coarse.Resolution/10)
		}
		<-pace.C
		c.Read()
	}
	for i := range 50 {
		<-pace.C
		c.Read()
		if c.Ticking() {
			t.Fatalf("read %d, paced at %v, started the timer again", i, coarse.Resolution/10)
		}
	}
}

// Readings never go back for any reader, across the timer's starts and
// stops, and none is ahead of the system clock.
func TestReadingsNeverGoBackAcrossModes(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	defer c.Stop()
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := c.Read()
			for round := range 40 {
				// A burst (enough to start the timer), then a few reads
				// with the scheduler between them.
				n := coarse.TickReads * 2
				if (round+g)%3 == 0 {
					n = 3
				}
				for range n {
					r := c.Read()
					if now := int64(time.Since(c.Time(0))); r > now {
						errs <- fmt.Sprintf("reading %d is ahead of the system clock %d", r, now)
						return
					}
					if r < prev {
						errs <- fmt.Sprintf("reading went back from %d to %d", prev, r)
						return
					}
					prev = r
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
