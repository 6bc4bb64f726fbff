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
	s := calibrated(t)
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

// A 2.6 GHz counter's scale, calibrated as TestCalibrateCarriesOnFromPrecise's.
func testScale(t *testing.T) *scaled {
	t.Helper()
	s := calibrate(1_000_000, 5_000, 11_000_000, 26_005_000)
	if s == nil {
		t.Fatal("readings of a 2.6 GHz counter refused")
	}
	return s
}

// A counter that kept within maxDrift of Precise over a span (here 500
// ppm, the most NTP slews the kernel's clock) gets a scale measured over
// that span and based at the pair: arrivals carry on from Precise's
// reading there, and the next check is due recheckEvery later.
func TestCheckedRebasesACounterWithinDrift(t *testing.T) {
	s := testScale(t)
	if want := s.tick0 + 2_600_000_000; s.next < want-1_000 || s.next > want+1_000 {
		t.Fatalf("first check due at tick %d, want about a second on, %d", s.next, want)
	}
	ticks := s.tick0 + 2_600_000_000 // a second on s's scale
	ns := s.base + 1_000_500_000     // Precise moved 500 ppm more
	r := s.checked(ns, ticks, 100)
	if r == s || r == &off {
		t.Fatalf("a counter 500 ppm from Precise: %v (s: %v, off: %v)", r, r == s, r == &off)
	}
	if got := r.at(ticks); got != ns {
		t.Fatalf("at the pair: %d, want Precise's %d", got, ns)
	}
	if want := 1_000_500_000.0 / 2_600_000_000; math.Abs(r.scale-want) > want*1e-9 {
		t.Fatalf("scale %v, want the span's %v", r.scale, want)
	}
	if want := ticks + int64(float64(recheckEvery)/r.scale); r.next < want-1 || r.next > want+1 {
		t.Fatalf("next check at %d, want %d", r.next, want)
	}
}

// A counter that strayed from Precise by more than maxDrift of the span
// (another rate, a jump forward), went back, or moved while Precise stood
// still is turned off for good.
func TestCheckedTurnsOffAStrayCounter(t *testing.T) {
	s := testScale(t)
	sec := int64(2_600_000_000) // a second of ticks on s's scale
	for _, c := range []struct {
		name      string
		ns, ticks int64
	}{
		{"1% fast", s.base + 1_000_000_000, s.tick0 + sec + sec/100},
		{"1% slow", s.base + 1_000_000_000, s.tick0 + sec - sec/100},
		{"jumped a second ahead", s.base + 1_000_000_000, s.tick0 + 2*sec},
		{"2 ms on a second's span", s.base + 1_000_000_000, s.tick0 + sec + sec/500},
		{"went back past the floor", s.base + 1_000_000_000, s.floor - 1},
		{"Precise stood still", s.base, s.tick0 + sec},
	} {
		if r := s.checked(c.ns, c.ticks, 100); r != &off {
			t.Errorf("%s: left on (unchanged: %v)", c.name, r == s)
		}
	}
}

// A pair too wide to judge the span by (a goroutine descheduled between
// its readings) leaves the scale as it is, for a later arrival to check.
func TestCheckedWaitsForANarrowPair(t *testing.T) {
	s := testScale(t)
	ns, ticks := s.base+1_000_000_000, s.tick0+2_600_000_000
	if r := s.checked(ns, ticks, 1_000_000); r != s { // 0.38 ms wide on a second
		t.Fatalf("a wide pair changed the scale (off: %v)", r == &off)
	}
	if r := s.checked(ns, ticks, 100); r == s || r == &off {
		t.Fatal("a narrow pair of the same readings did not rebase")
	}
}

// Where the counter is in use, an arrival read once a scale's check is due
// publishes what follows it: a rebased scale for the machine's own counter,
// off for one whose scale is half again too fast.
func TestArrivalRechecksTheCounter(t *testing.T) {
	if !trustTicks() {
		t.Skip("the kernel does not keep its time on this machine's counter")
	}
	saved := calibrated(t)
	defer counter.scale.Store(saved)
	var c Clock
	due := func(scale float64) *scaled {
		s := *saved
		s.scale *= scale
		s.next = s.tick0 // due at once
		counter.scale.Store(&s)
		deadline := time.Now().Add(testkit.Deadline)
		for counter.scale.Load() == &s { // a wide pair leaves it for the next arrival
			if time.Now().After(deadline) {
				t.Fatalf("the scale was not checked in %v of arrivals", testkit.Deadline)
			}
			c.Arrival()
		}
		return counter.scale.Load()
	}
	if r := due(1); r == &off || r.base <= saved.base || r.next <= r.tick0 {
		t.Fatalf("the machine's own counter: off %v, base %d after %d", r == &off, r.base, saved.base)
	}
	if r := due(1.5); r != &off {
		t.Fatal("a scale half again too fast was left on")
	}
}

// calibrated returns the counter's scale once arrivals have measured it,
// failing the test if they turn it off.
func calibrated(t testing.TB) *scaled {
	t.Helper()
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
	return s
}

// BenchmarkArrival is an arrival's reading alone, from the counter once
// calibrated (where the kernel keeps its time on it; Precise's elsewhere),
// beside Precise's reading.
func BenchmarkArrival(b *testing.B) {
	if trustTicks() {
		calibrated(b)
	}
	var c Clock
	var sink int64
	b.Run("clock=arrival", func(b *testing.B) {
		for range b.N {
			sink += c.Arrival()
		}
	})
	b.Run("clock=precise", func(b *testing.B) {
		for range b.N {
			sink += c.Precise()
		}
	})
	benchSink = sink
}

var benchSink int64

// A hold's stamps come from the counter (Precise's reading where it is not
// in use), not from a coarse clock that a timer moves on every
// millisecond: read as often as a contended lane reads them, for longer
// than a few of that clock's ticks, a stamp is never far behind a Precise
// reading taken just before it. (On a coarse clock, half its readings are
// over half a millisecond behind.)
func TestStampKeepsUpWithPrecise(t *testing.T) {
	var c Clock
	if trustTicks() {
		calibrated(t)
	}
	// A counter the kernel keeps its time on strays from Precise by
	// microseconds; checked allows up to 1e-3 of a second, but a counter
	// near that is not one the kernel would keep its time on.
	const slack = 500 * time.Microsecond
	end := time.Now().Add(5 * time.Millisecond)
	n := 0
	for time.Now().Before(end) {
		p := c.Precise()
		if s := c.Stamp(); s < p-int64(slack) {
			t.Fatalf("read %d: a stamp %v behind the Precise reading before it", n, time.Duration(p-s))
		}
		n++
	}
	if n < 1000 {
		t.Skipf("only %d reads in 5ms: too slow a machine to tell a coarse clock from the counter", n)
	}
}

// The drift allowed is maxDrift of the span, with driftSlack besides: just
// under it the counter is rebased, just over it turned off.
func TestCheckedDriftLimit(t *testing.T) {
	s := testScale(t)
	ticks := s.tick0 + 2_600_000_000 // a second on s's scale
	for _, c := range []struct {
		ppm int64
		on  bool
	}{{900, true}, {-900, true}, {1_100, false}, {-1_100, false}} {
		ns := s.base + 1_000_000_000 + c.ppm*1_000 // Precise moved a second and c.ppm ppm
		if r := s.checked(ns, ticks, 100); (r != &off) != c.on {
			t.Errorf("%d ppm: left on %v, want %v", c.ppm, r != &off, c.on)
		}
	}
}

// A counter out of step with Precise is found by the early checks, long
// before its due check: here a scale half again too fast, due only at the
// end of the counter's range, is turned off within 64 checkOdds readings
// (a reading is a pick in one window of 2^pickShift ticks in every
// checkOdds such windows: at a reading every few tens of ticks, these
// readings cross a few dozen windows).
func TestArrivalChecksEarly(t *testing.T) {
	if !trustTicks() {
		t.Skip("the kernel does not keep its time on this machine's counter")
	}
	saved := calibrated(t)
	defer counter.scale.Store(saved)
	s := *saved
	s.scale *= 1.5
	s.next = math.MaxInt64
	counter.scale.Store(&s)
	var c Clock
	for i := 0; i < 64*checkOdds && counter.scale.Load() != &off; i++ {
		c.Arrival()
	}
	if counter.scale.Load() != &off {
		t.Fatalf("a scale half again too fast still on after %d readings", 64*checkOdds)
	}
}

// A scale based at a wide pair (its Precise reading anywhere within the
// pair's width) is off by up to that width from its first reading on: an
// early check soon after, over a span too short for maxDrift of it to
// cover the width, does not take that for a stray counter. A counter
// further out than the width and the limit together is still turned off.
func TestCheckedAllowsTheBasePairsWidth(t *testing.T) {
	s := testScale(t)
	s.width = 1_300_000                                                   // the base pair was 0.5 ms wide (1.3 million ticks at 2.6 GHz)
	ticks := s.tick0 + 26_000_000                                         // 10 ms on
	if r := s.checked(s.base+10_000_000+400_000, ticks, 100); r == &off { // 0.4 ms out
		t.Fatal("a reading within the base pair's width turned the counter off")
	}
	if r := s.checked(s.base+10_000_000+2_000_000, ticks, 100); r != &off { // 2 ms out
		t.Fatal("a reading 2 ms out, past the base pair's width and the limit, left the counter on")
	}
}
