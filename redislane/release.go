package redislane

import "time"

// relQueue is the releases of one bucket that wait for a release call
// while one is in flight: the next call carries them all (group commit),
// so that an instance whose callers release together makes one call for
// them, not one each. They wait in batches of at most maxReleaseBatch,
// one call each.
type relQueue struct {
	next []*relBatch
}

// relBatch is the releases that one call carries. Its waiters share one
// channel, closed when the call is over, and one timer, which closes
// expired a release wait after the first of them joined: a waiter that
// joined later and finds it expired waits out the rest of its own release
// wait with a timer of its own. So a batch costs one channel and one timer,
// not one of each per Release.
type relBatch struct {
	ids     []string
	done    chan struct{} // closed when the call that carried ids is over
	expired chan struct{} // closed a release wait after the first waiter joined
	timer   *time.Timer
}

// maxReleaseBatch bounds the ids of one release call.
const maxReleaseBatch = 256

// release removes id (a permit's) from bucket rk, and returns within
// releaseWait whatever Redis does. With no release call of the bucket in
// flight, it makes the call itself, with a deadline of releaseWait, as
// an uncontended Release always does; a call that failed is made once more
// in the background, within the margin (it is idempotent). With one in
// flight, it waits for the next call, which carries every release made
// meanwhile and which a goroutine of its own makes (counted in c.wg, whose
// count the caller holds: see startBackground), with the same deadlines.
// The release of a permit happens before its Release returns unless that
// call takes longer than releaseWait.
func (c *core) release(rk [4]string, id string) {
	c.mu.Lock()
	q := c.rel[rk[0]]
	if q == nil {
		q = &relQueue{}
		c.rel[rk[0]] = q
		c.mu.Unlock()
		_, err := c.releaseIDs(rk, []string{id}, c.cfg.releaseWait())
		c.mu.Lock()
		more := len(q.next) > 0
		if !more {
			delete(c.rel, rk[0])
		}
		c.mu.Unlock()
		if more {
			c.wg.Add(1)
			go c.releaseLoop(rk, q)
		}
		if err != nil {
			c.cleanupAsync(rk, id)
		}
		return
	}
	wait := c.cfg.releaseWait()
	var b *relBatch
	if n := len(q.next); n > 0 && len(q.next[n-1].ids) < maxReleaseBatch {
		b = q.next[n-1]
	} else {
		b = &relBatch{done: make(chan struct{}), expired: make(chan struct{})}
		expired := b.expired
		b.timer = time.AfterFunc(wait, func() { close(expired) })
		q.next = append(q.next, b)
	}
	first := len(b.ids) == 0
	b.ids = append(b.ids, id)
	c.mu.Unlock()
	var joined time.Time
	if !first {
		joined = time.Now()
	}
	select {
	case <-b.done:
		return
	case <-b.expired:
	}
	if first {
		return
	}
	// It joined after the batch's first: its own wait may not be over.
	left := wait - time.Since(joined)
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
}

// releaseLoop makes the release calls of bucket rk until no release waits.
func (c *core) releaseLoop(rk [4]string, q *relQueue) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		if len(q.next) == 0 {
			delete(c.rel, rk[0])
			c.mu.Unlock()
			return
		}
		b := q.next[0]
		q.next = q.next[1:]
		c.mu.Unlock()
		if _, err := c.releaseIDs(rk, b.ids, c.cfg.releaseWait()); err != nil {
			_, _ = c.releaseIDs(rk, b.ids, c.cfg.margin())
		}
		b.timer.Stop()
		close(b.done)
	}
}
