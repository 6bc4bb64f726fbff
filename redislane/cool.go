package redislane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrCoolingDown is matched (errors.Is) by a [*CooldownError].
var ErrCoolingDown = errors.New("redislane: lane cooling down after an overload")

// CooldownError is the error of an acquire whose context's deadline comes
// before its lane reopens from a cooldown ([Weighted.Cooldown]): it fails
// at once rather than wait for the deadline, and nothing is held. It
// matches [ErrCoolingDown] and context.DeadlineExceeded (errors.Is).
// Through a lanequeue.Queue it is the cause of the lane's LaneError
// (errors.As reaches it).
type CooldownError struct {
	Lane string // the lane's name
	// RetryAfter is the time from the refusal until the lane reopens, as
	// far as this instance knows: counted from the send time of the call
	// that read it, so never later than the reopening on the server.
	RetryAfter time.Duration
}

func (e *CooldownError) Error() string {
	return fmt.Sprintf("redislane: lane %q cooling down (retry after %v): %v", e.Lane, e.RetryAfter, context.DeadlineExceeded)
}

// Unwrap returns [ErrCoolingDown] and context.DeadlineExceeded.
func (e *CooldownError) Unwrap() []error { return []error{ErrCoolingDown, context.DeadlineExceeded} }

// coolState is what an instance knows of its lane's cooldown: the
// reopening read from Redis, on the local clock.
type coolState struct {
	mu    sync.Mutex
	at    time.Time     // send time of the call it was read by (later calls win)
	until time.Time     // the reopening, or zero: open
	news  chan struct{} // closed, and replaced, when until moves later
}

// coolNews returns a channel closed when the instance learns of a later
// reopening.
func (c *core) coolNews() <-chan struct{} {
	c.cool.mu.Lock()
	defer c.cool.mu.Unlock()
	if c.cool.news == nil {
		c.cool.news = make(chan struct{})
	}
	return c.cool.news
}

// learnCool records what a call sent at sent read: the lane reopens left
// from the server's now (0: open). The reopening is counted from the send
// time, the earliest the server's now can have been, so that it is never
// later than the server's.
func (c *core) learnCool(sent time.Time, left time.Duration) {
	c.cool.mu.Lock()
	defer c.cool.mu.Unlock()
	if sent.Before(c.cool.at) {
		return // an older reading
	}
	c.cool.at = sent
	var u time.Time
	if left > 0 {
		u = sent.Add(left)
	}
	if u.After(c.cool.until) && c.cool.news != nil {
		close(c.cool.news)
		c.cool.news = nil
	}
	c.cool.until = u
}

// coolRefusal returns the error of a caller whose context's deadline comes
// before the lane reopens, as far as the instance knows; nil otherwise.
func (c *core) coolRefusal(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	c.cool.mu.Lock()
	u := c.cool.until
	c.cool.mu.Unlock()
	if u.IsZero() || !dl.Before(u) {
		return nil
	}
	return &CooldownError{Lane: c.name, RetryAfter: max(time.Until(u), 0)}
}

// cooldown closes the lane for d from now on the server's clock, unless
// it is closed until later (see coolSrc), and returns the time until it
// reopens from the cooldown.
func (c *core) cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	if c.isClosed() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dms := int64(0)
	if d > 0 {
		dms = int64((d + time.Millisecond - 1) / time.Millisecond) // never shorter than d
	}
	cctx, cancel := c.callCtx(ctx, c.cfg.margin())
	defer cancel()
	limit, lterm := c.limitAndTerm()
	sent := time.Now()
	v, err := coolScript.Run(cctx, c.client, []string{c.metaKey},
		limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), lterm, dms).Int64Slice()
	switch {
	case err != nil:
		c.st.redisErrs.Add(1)
		return 0, fmt.Errorf("redislane: cooldown %q: %w", c.name, err)
	case len(v) != 2:
		return 0, fmt.Errorf("%w: cooldown script returned %v", errBadReply, v)
	case v[0] == stMismatch:
		return 0, fmt.Errorf("%w: %q has capacity %d (or another kind) in Redis; this %s lane has %d",
			ErrCapacityMismatch, c.name, v[1], c.kindName(), c.capacity)
	}
	left := time.Duration(v[1]) * time.Millisecond
	c.learnCool(sent, left)
	return left, nil
}
