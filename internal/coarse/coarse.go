// Package coarse is a clock for hot paths: read often, reading it is an
// atomic load, right to about a millisecond; read seldom, it is the
// system clock.
package coarse

import (
	"sync"
	"sync/atomic"
	"time"
)

// Resolution is how often the coarse clock moves on while it is read
// often.
const Resolution = time.Millisecond

// Clock is a clock that hot paths read with an atomic load instead
// of a system clock read, which can cost as much as the operation being
// stamped (figures in docs/internals.md). While it is read often, a
// timer moves it on every Resolution; read seldom, it reads the system
// clock instead, because the timer is then the dearer of the two: on a
// process whose cores are otherwise idle a tick costs tens of
// microseconds of CPU (a thread woken to run it), the price of about a
// thousand system clock reads (figures in docs/internals.md, "the coarse
// clock's timer"). So:
//
//   - With the timer stopped, Read reads the system clock and counts the
//     reads of the current Resolution; the one that makes them
//     TickReads starts the timer.
//   - With the timer running, Read is an atomic load. After a tick with
//     no read, or every RecheckTicks ticks, the timer stops, and the
//     count starts again: a clock read less often than TickReads times a
//     Resolution goes back to system clock reads, and one read as often
//     starts its timer again after TickReads reads.
//
// Readings never go back, whichever way they are taken (every reading is
// kept as the clock's latest if it is the highest), and are at most
// about Resolution old (more if the timer is late). An idle clock costs
// nothing and leaves no goroutine behind.
//
// The zero Clock is not ready: call Init first.
type Clock struct {
	epoch  time.Time    // monotonic origin; immutable after Init
	now    atomic.Int64 // nanoseconds since epoch: the highest reading yet
	active atomic.Bool  // the timer is running
	used   atomic.Bool  // a grant read the clock since the last tick

	// With the timer stopped: the reads since window, a reading.
	window atomic.Int64
	reads  atomic.Int64

	mu      sync.Mutex // protects timer, ticks and stopped
	timer   *time.Timer
	ticks   int  // ticks since the timer last started
	stopped bool // stop was called: never restart
}

// TickReads is how many reads within one Resolution start the timer,
// and RecheckTicks how many ticks it runs before it stops to count
// again. A tick costs about what a thousand system clock reads do on an
// idle process and far less on a busy one; 256 a millisecond is well
// below the first (the timer pays as soon as the process is busy enough
// to keep a core awake) and above what a caller that waits on the
// network for each read makes (one read in tens of microseconds).
const (
	TickReads    = 256
	RecheckTicks = 64
)

// AlwaysTick, set by the ablation benchmarks, starts the timer on the
// first read, as the clock did before it counted reads.
var AlwaysTick bool

// Read returns the coarse time: the timer's latest reading while it
// runs, a system clock reading otherwise.
func (c *Clock) Read() int64 {
	if c.active.Load() {
		// Written by many goroutines at once, the flag would bounce its
		// cache line between cores; set it only when a tick has cleared it.
		if !c.used.Load() {
			c.used.Store(true)
		}
		return c.now.Load()
	}
	return c.readSystem()
}

// readSystem is Read with the timer stopped: a system clock reading,
// counted towards starting the timer.
func (c *Clock) readSystem() int64 {
	t := c.raise(int64(time.Since(c.epoch)))
	if AlwaysTick {
		c.start()
		return t
	}
	if w := c.window.Load(); t-w >= int64(Resolution) {
		// A new window; a lost race only loses a few counts.
		if c.window.CompareAndSwap(w, t) {
			c.reads.Store(0)
		}
	} else if c.reads.Add(1) == TickReads {
		c.start()
	}
	return t
}

// raise keeps t as the clock's latest reading unless a later one is
// kept, and returns the latest.
func (c *Clock) raise(t int64) int64 {
	for {
		old := c.now.Load()
		if t <= old {
			return old
		}
		if c.now.CompareAndSwap(old, t) {
			return t
		}
	}
}

func (c *Clock) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.active.Load() {
		return
	}
	c.raise(int64(time.Since(c.epoch)))
	c.ticks = 0
	c.used.Store(false)
	c.active.Store(true)
	if c.timer == nil {
		c.timer = time.AfterFunc(Resolution, c.tick)
	} else {
		c.timer.Reset(Resolution)
	}
}

// tick moves the clock on, and keeps the timer going only if the last
// period saw a read and it has not run RecheckTicks ticks. A read
// between the Swap and the Store below reads the value just raised; one
// after the Store reads the system clock.
func (c *Clock) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	t := c.raise(int64(time.Since(c.epoch)))
	c.ticks++
	if c.used.Swap(false) && c.ticks < RecheckTicks {
		c.timer.Reset(Resolution)
		return
	}
	c.reads.Store(0)
	c.window.Store(t)
	c.active.Store(false)
}

// Stop stops the timer for good; Read then returns the last reading. A
// Read that took the system clock before Stop and finishes after it may
// still raise that reading once.
func (c *Clock) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.active.Store(true) // Read never tries to start it again
	if c.timer != nil {
		c.timer.Stop()
	}
}

// Init sets the clock's origin; readings are nanoseconds since epoch.
func (c *Clock) Init(epoch time.Time) {
	c.epoch = epoch
}

// Time turns a reading back into a time.
func (c *Clock) Time(reading int64) time.Time {
	return c.epoch.Add(time.Duration(reading))
}
