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
// not. An arrival is never a wait's start (see Clock.Precise): the
// scale's error, some 1e-5 here, would drift a long run's timings.
//
// The scale is measured once per process, from the first arrival read to
// the first read at least calibration later, and is published with its
// base at that read's own Precise reading, so that arrivals carry on
// from Precise's readings without a step.

// calibration is the span over which the counter's rate is measured: at
// this span, the scale's error measured 2e-6 to 2e-4 (about 0.2 us in a
// 1 ms aging step).
const calibration = 10 * time.Millisecond

// scaled turns counter readings into Precise's nanoseconds.
type scaled struct {
	base  int64   // Precise's reading at tick0
	tick0 int64   // the counter's reading at base
	scale float64 // nanoseconds per tick
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
	return &scaled{base: ns1, tick0: t1, scale: s}
}

var counter struct {
	scale atomic.Pointer[scaled] // nil until measured
	once  sync.Once
	off   atomic.Bool // no counter, or not trusted: Precise for good
	ns0   int64       // the first readings, set in once
	t0    int64
}

// Arrival returns the time for a waiter's arrival, on Precise's scale and
// origin, read before the owner's lock (see above).
func (c *Clock) Arrival() int64 {
	if c.fake != nil || c.precise {
		return c.Precise()
	}
	if s := counter.scale.Load(); s != nil {
		return s.at(ticks())
	}
	return arrivalCalibrating()
}

// arrivalCalibrating is Arrival before the scale is known: Precise's
// reading, which also measures the scale once calibration has passed.
func arrivalCalibrating() int64 {
	ns := int64(time.Since(epoch))
	if counter.off.Load() {
		return ns
	}
	counter.once.Do(func() {
		if !trustTicks() {
			counter.off.Store(true)
			return
		}
		counter.ns0, counter.t0 = ns, ticks()
	})
	if counter.off.Load() || ns-counter.ns0 < int64(calibration) {
		return ns
	}
	s := calibrate(counter.ns0, counter.t0, ns, ticks())
	if s == nil {
		counter.off.Store(true)
		return ns
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
