package coarse

// Ticking reports whether c's timer is running.
func (c *Clock) Ticking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active.Load() && !c.stopped
}

// Latest is c's latest reading, without counting as a read.
func (c *Clock) Latest() int64 { return c.now.Load() }
