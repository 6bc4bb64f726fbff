// Package coarse is a clock for hot paths: reading it is an atomic load,
// and it is right to about a millisecond.
package coarse

import (
	"sync"
	"sync/atomic"
	"time"
)

// Resolution is how often the coarse clock moves on while tickets
// are being granted.
const Resolution = time.Millisecond

// Clock is a clock that hot paths read with an atomic load instead
// of a system clock read, which can cost as much as the operation being
// stamped (figures in docs/internals.md). While it is being read, a timer moves it on every
// Resolution; after a tick with no grant the timer stops, so an idle
// queue costs nothing and leaves no goroutine behind. The first grant
// after a pause restarts it with a fresh reading. Readings are therefore
// at most about Resolution old (more if the timer is late).
//
// The zero Clock is not ready: call Init first.
type Clock struct {
	epoch  time.Time    // monotonic origin; immutable after Init
	now    atomic.Int64 // nanoseconds since epoch, as of the last tick
	active atomic.Bool  // the timer is running
	used   atomic.Bool  // a grant read the clock since the last tick

	mu      sync.Mutex // protects timer and stopped
	timer   *time.Timer
	stopped bool // stop was called: never restart
}

// Read returns the coarse time, starting the timer if it is stopped.
func (c *Clock) Read() int64 {
	if !c.active.Load() {
		c.start()
	}
	// Written by many goroutines at once, the flag would bounce its cache
	// line between cores; set it only when a tick has cleared it.
	if !c.used.Load() {
		c.used.Store(true)
	}
	return c.now.Load()
}

func (c *Clock) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.active.Load() {
		return
	}
	c.now.Store(int64(time.Since(c.epoch)))
	c.active.Store(true)
	if c.timer == nil {
		c.timer = time.AfterFunc(Resolution, c.tick)
	} else {
		c.timer.Reset(Resolution)
	}
}

// tick moves the clock on, and keeps the timer going only if the last
// period saw a grant. A grant that reads the clock between the Swap and the
// Store below reads the value just stored, and the next grant restarts the
// timer.
func (c *Clock) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.now.Store(int64(time.Since(c.epoch)))
	if c.used.Swap(false) {
		c.timer.Reset(Resolution)
		return
	}
	c.active.Store(false)
}

// Stop stops the timer for good; read then returns the last reading.
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
