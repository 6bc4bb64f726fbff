package hist

import (
	"math"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
)

// The scale is based at the second reading, so that the first arrival
// from the counter is that reading's Precise time: arrivals carry on from
// Precise's without a step; and a tick later is one scale later.
func TestCalibrateCarriesOnFromPrecise(t *testing.T) {
	s := calibrate(1_000_000, 5_000, 11_000_000, 26_005_000) // 10 ms over 26 million ticks
	if s == nil {
		t.Fatal("readings of a 2.6 GHz counter refused")
	}
	if got := s.at(26_005_000); got != 11_000_000 {
		t.Fatalf("at the calibration's end: %d, want Precise's 11000000", got)
	}
	if got, want := s.at(26_005_000+2_600_000), int64(12_000_000); got < want-1 || got > want+1 {
		t.Fatalf("2.6 million ticks on: %d, want about %d", got, want)
	}
	if got, want := s.floor, int64(26_005_000-2_600_000); got < want-1 || got > want+1 {
		t.Fatalf("floor %d, want a millisecond before the base, about %d", got, want)
	}
}

// A counter reading more than a millisecond behind the base (a counter
// reset) turns the counter off for good: arrivals are Precise's after it.
func TestArrivalTurnsTheCounterOffWhenItGoesBack(t *testing.T) {
	if !haveTicks {
		t.Skip("no counter on this architecture")
	}
	saved := counter.scale.Load()
	defer counter.scale.Store(saved)
	counter.scale.Store(&scaled{base: 1, tick0: math.MaxInt64, scale: 1, floor: math.MaxInt64})
	var c Clock
	c.Arrival()
	if counter.scale.Load() != &off {
		t.Fatal("a counter reading behind the floor left the counter on")
	}
}

// Readings that no steady counter gives are refused, and arrivals then
// stay Precise's (arrivalCalibrating turns the counter off).
func TestCalibrateRefusesNonsense(t *testing.T) {
	for _, c := range []struct {
		name             string
		ns0, t0, ns1, t1 int64
	}{
		{"counter went back", 0, 100, 10_000_000, 50},
		{"counter stood still", 0, 100, 10_000_000, 100},
		{"clock stood still", 5, 0, 5, 1_000},
		{"1 GHz clock over a 1 kHz counter", 0, 0, 10_000_000, 10},
		{"a counter at 1 THz", 0, 0, 1_000, 1_000_000},
	} {
		if s := calibrate(c.ns0, c.t0, c.ns1, c.t1); s != nil {
			t.Errorf("%s: accepted, scale %v", c.name, s.scale)
		}
	}
}

// With a fake clock, arrivals are the fake clock's readings, as every
// other reading of the Clock is: the tests of aging advance it.
func TestArrivalFollowsTheFakeClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := NewClock(fake)
	a := c.Arrival()
	fake.Advance(3 * time.Millisecond)
	if got := c.Arrival() - a; got != int64(3*time.Millisecond) {
		t.Fatalf("the fake clock moved 3ms, arrivals %dns", got)
	}
	if c.Arrival() != c.Precise() {
		t.Fatal("with a fake clock an arrival differs from Precise's reading")
	}
}

// Where the kernel keeps its time on the counter, arrivals move to it
// once calibration has passed, with a scale a steady counter gives; and
// an arrival taken after a Precise reading is not behind it by more than
// the counter's out-of-order reads allow.
func TestCounterCalibratesWhereTrusted(t *testing.T) {
	if !trustTicks() {
		t.Skip("the kernel does not keep its time on this machine's counter")
	}
	var c Clock
	deadline := time.Now().Add(testkit.Deadline)
	for counter.scale.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no scale after %v of arrivals", testkit.Deadline)
		}
		c.Arrival()
	}
	s := counter.scale.Load()
	if s == &off {
		t.Fatal("the counter was turned off on a machine whose kernel keeps its time on it")
	}
	if s.scale < 0.01 || s.scale > 100 {
		t.Fatalf("scale %v ns a tick", s.scale)
	}
	for range 1000 {
		p := c.Precise()
		if a := c.Arrival(); a < p-int64(10*time.Millisecond) {
			t.Fatalf("an arrival %dns behind the Precise reading taken before it", p-a)
		}
	}
}
