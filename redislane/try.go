package redislane

import (
	"context"
	"time"
)

// tryAcquire takes n permits of bucket key if Redis grants them at once and no
// local waiter is ahead. It makes one call.
func (c *core) tryAcquire(key string, n int64) (*Permit, bool) {
	return c.tryAcquireAt(key, n, place{})
}

// tryAcquireAt is tryAcquire for a caller at place pl: a number, which a
// sequenced Keyed's script may hold back (then it returns false). On an
// ordered Weighted the place changes nothing: a TryAcquire is granted
// only when nobody is queued, as on a FIFO one.
func (c *core) tryAcquireAt(key string, n int64, pl place) (*Permit, bool) {
	if c.check(n) != nil {
		return nil, false
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false
	}
	if c.lines[key] != nil { // never overtake a local waiter
		c.mu.Unlock()
		return nil, false
	}
	c.nwait++ // counted as a waiter, so that Close waits for it
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.nwait--
		c.drainedLocked()
		c.mu.Unlock()
	}()

	rk := c.bucketKeys(key)
	id := newID()
	r := c.runAcquire(context.Background(), rk, id, n, pl, true, nil) // bounded by one margin
	switch {
	case r.err != nil:
		c.st.redisErrs.Add(1)
		c.cleanupAsync(rk, id) // the outcome is unknown
		return nil, false
	case r.status == stMismatch:
		return nil, false
	case r.status != stGranted:
		return nil, false
	case time.Since(r.sent) > c.cfg.margin():
		c.st.late.Add(1)
		c.cleanupAsync(rk, id)
		return nil, false
	}
	p := c.grant(rk, id, n, r.a, r.sent)
	if p != nil {
		c.grantedAtOnce()
	}
	return p, p != nil
}
