package hist

import (
	"bytes"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Arrivals. WithPriorities stamps every waiting call with its arrival,
// read before the owner's lock, and Precise's reading (a vDSO nanotime,
// about 24 ns here) was the largest single cost of the ordered rows over
// FIFO. Where the kernel keeps its own time on the CPU's time-stamp
// counter (Linux on amd64, clocksource "tsc": it has found the counter
// invariant and in step across CPUs), an arrival is that counter, read
// unfenced (about 9 ns), scaled to Precise's nanoseconds and origin.
// Elsewhere, and until the scale is known, it is Precise's reading.
//
// An unfenced read may run a little ahead of the code before it: two
// readings taken in turn under one mutex were seen up to 130 ns out of
// order on this machine. Arrivals may be out of order already, since
// they are read before the lock, and the order of service allows for it
// (waitq: within a band only the rank decides; across bands a negative
// arrival difference counts as 0), so such a reading loosens an aging
// bound by as much and misorders nothing that the race to the lock does
// not. An arrival is never a wait's start (see Clock.Precise), and is
// compared only with other arrivals: the scale's error changes an aging
// step by as much, relatively, and no more.
//
// A hold's start and end (Clock.Stamp) are read the same way: a hold is
// the difference of two such readings, so it is off by the scale's error
// relatively and by an unfenced read's hundred nanoseconds or so, where
// the coarse clock they were read from before was off by up to its
// millisecond; and, unlike the coarse clock, reading it starts no timer
// (see Clock.Stamp).
//
// The scale is first measured over at least calibration from the first
// reading, from two pairs of readings (the counter,
// Precise, the counter: see pair) narrow enough that their error is at
// most maxError of the span; and it is published with its base at the
// second pair's own Precise reading, so that arrivals carry on from
// Precise's readings without a step. A counter reading more than a
// millisecond behind that base (a counter reset, as on a machine whose
// counter stops in suspend) turns the counter off for good.
//
// The kernel's clocksource is read once, and the kernel may later drop the
// counter (its watchdog finds it unstable) or slew its own clock against
// it (NTP, up to 500 ppm). So the first reading at least recheckEvery
// after the base (by the counter's own ticks) reads a pair and checks the
// counter's span since the base against Precise's (see checked): within
// maxDrift of the span (and driftSlack), the scale is measured again over
// that span and based at the pair, so that readings step by at most as much
// at the rebase; beyond it (a counter that jumped, stalled or runs at
// another rate), the counter is off for good. One reading in checkOdds
// (picked by its own bits) checks early without rebasing, so that a
// counter whose ticks slow, and so would reach the due check late, or that
// jumps, is found within a few thousand readings while they are being
// taken. (A counter stuck at one value whose bits are not a pick would be
// found by neither check: no counter the kernel keeps its time on does
// that while it does.) Between two checks, readings carry whatever the
// counter did. After a long idle the tolerance is as long: a jump within
// 1e-3 of the idle time is taken as drift and rebased away. The checks need no shared
// write: the scale carries the counter reading its due check is at.

// calibration is the least span over which the counter's rate is
// measured, and maxError the most error the pairs may bring to it.
const (
	calibration = 10 * time.Millisecond
	maxError    = 1e-4
)

// recheckEvery is how long the counter runs on one scale before a reading
// checks it against Precise and rebases it, and maxDrift the most that the
// two may differ over the span checked, relatively: twice the most NTP
// slews the kernel's clock. Besides, one reading in checkOdds checks the
// scale at once, so that a counter that slows, whose own ticks would reach
// the due check late, or that jumps, is found within a few thousand
// readings. The pick is the reading's own bits from pickShift up: readings
// come at times the counter's period knows nothing of, so those bits are
// as good as random, for a shift and a mask (a random number from
// math/rand/v2 cost 2.8 ns a reading, +27%); pickShift skips the low bits,
// which a counter that counts in steps may hold still.
const (
	recheckEvery = time.Second
	maxDrift     = 1e-3
	checkOdds    = 1 << 12
	pickShift    = 6
	// driftSlack is allowed besides maxDrift of the span and the two
	// pairs' widths (see checked): the unfenced reads' reordering, tens to
	// a hundred nanoseconds, would otherwise turn the counter off at an
	// early check over a span of a millisecond.
	driftSlack = 10 * time.Microsecond
)

// scaled turns counter readings into Precise's nanoseconds.
type scaled struct {
	base  int64   // Precise's reading at tick0
	tick0 int64   // the counter's reading at base
	scale float64 // nanoseconds per tick
	floor int64   // the counter's reading a millisecond before tick0
	next  int64   // the counter's reading recheckEvery after tick0: a reading from it checks and rebases the scale
	width int64   // the base pair's width, in ticks: base may be off from tick0's time by as much
}

func (s *scaled) at(t int64) int64 { return s.base + int64(float64(t-s.tick0)*s.scale) }

// calibrate returns the scale measured from (ns0, t0) to (ns1, t1), Precise
// and counter readings, based at the second, or nil if the readings make
// no sense for a counter that runs at a steady rate of 10 MHz to 100 GHz.
func calibrate(ns0, t0, ns1, t1 int64) *scaled {
	if ns1 <= ns0 || t1 <= t0 {
		return nil
	}
	s := float64(ns1-ns0) / float64(t1-t0)
	if s < 0.01 || s > 100 {
		return nil
	}
	return &scaled{
		base: ns1, tick0: t1, scale: s,
		floor: t1 - int64(float64(time.Millisecond)/s),
		next:  t1 + int64(float64(recheckEvery)/s),
	}
}

// checked returns what follows s given a pair read to check it (see pair:
// Precise's reading ns, the counter's t, the pair's width w in ticks): a
// scale measured over the span since s's base and based at the pair, if
// the counter kept within maxDrift of Precise over it; off if it did not,
// or went back; or s itself if the pair is too wide to judge by (a later
// reading checks again).
func (s *scaled) checked(ns, t, w int64) *scaled {
	span := ns - s.base
	if t < s.floor || span <= 0 {
		return &off
	}
	if float64(w)*s.scale > maxError*float64(span) {
		return s
	}
	// Each pair's Precise reading may sit anywhere within its width: the
	// base's too, so the two widths are allowed besides the drift.
	lim := maxDrift*float64(span) + float64(driftSlack) + float64(w+s.width)*s.scale
	if d := float64(s.at(t) - ns); d > lim || -d > lim {
		return &off
	}
	if r := calibrate(s.base, s.tick0, ns, t); r != nil {
		r.width = w
		return r
	}
	return &off
}

// pair reads the counter and Precise together: the counter, Precise, the
// counter again, and returns Precise's reading, the first counter
// reading, and the width between the two counter readings, the most the
// pair may be out.
func pair() (ns, t, width int64) {
	t = ticks()
	ns = int64(time.Since(epoch))
	return ns, t, ticks() - t
}

var counter struct {
	// scale is nil until measured, then the scale, or off for good.
	scale atomic.Pointer[scaled]
	once  sync.Once
	ns0   int64 // the first pair, set in once
	t0    int64
	w0    int64
}

// off is counter.scale's value once arrivals are Precise's for good: no
// counter, one the kernel does not keep its time on, readings that make no
// sense, or a counter gone back.
var off scaled

// Arrival returns the time for a waiter's arrival, on Precise's scale and
// origin, read before the owner's lock (see above).
func (c *Clock) Arrival() int64 {
	if c.fake != nil || c.precise {
		return c.Precise()
	}
	return counterNow()
}

// counterNow returns the time from the counter, scaled to Precise's
// nanoseconds and origin, where the counter is in use; Precise's reading
// elsewhere and until the scale is known.
func counterNow() int64 {
	s := counter.scale.Load()
	switch {
	case s == nil:
		return arrivalCalibrating()
	case s != &off:
		if t := ticks(); t >= s.floor {
			if t < s.next && (uint64(t)>>pickShift)%checkOdds != 0 {
				return s.at(t)
			}
			return recheck(s, t >= s.next)
		}
		counter.scale.Store(&off)
	}
	return int64(time.Since(epoch))
}

// recheck is a reading that checks scale s (see checked), due once the
// counter has run recheckEvery on it, or picked early: it reads a pair,
// publishes off if the counter strayed, or (due) the rebased scale, unless
// another reading did first, and returns the pair's Precise reading. An
// early check that finds the counter in step leaves s: rebasing more often
// would only measure the scale over shorter spans.
func recheck(s *scaled, due bool) int64 {
	ns, t, w := pair()
	if r := s.checked(ns, t, w); r == &off || (due && r != s) {
		counter.scale.CompareAndSwap(s, r)
	}
	return ns
}

// arrivalCalibrating is Arrival before the scale is known: Precise's
// reading, which also measures the scale once calibration has passed.
func arrivalCalibrating() int64 {
	counter.once.Do(func() {
		if !trustTicks() {
			counter.scale.CompareAndSwap(nil, &off)
			return
		}
		// The narrowest of a few pairs: one the goroutine was descheduled
		// in would hold the scale back until the span is 1e4 times its
		// width (a millisecond's: ten seconds).
		ns, t, w := pair()
		for range 7 {
			if n1, t1, w1 := pair(); w1 < w {
				ns, t, w = n1, t1, w1
			}
		}
		counter.ns0, counter.t0, counter.w0 = ns, t, w
	})
	ns, t, w := pair()
	if counter.scale.Load() != nil {
		return ns // measured by another, or off
	}
	span := t - counter.t0
	if ns-counter.ns0 < int64(calibration) || float64(counter.w0+w) > maxError*float64(span) {
		return ns // too soon, or a pair too wide for the span: a later one will do
	}
	s := calibrate(counter.ns0, counter.t0, ns, t)
	if s == nil {
		s = &off
	} else {
		s.width = w
	}
	counter.scale.CompareAndSwap(nil, s)
	return ns
}

// trustTicks reports whether ticks reads a counter the kernel keeps its
// own time on.
func trustTicks() bool {
	if !haveTicks || runtime.GOOS != "linux" {
		return false
	}
	b, err := os.ReadFile(clocksourceFile)
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("tsc"))
}
