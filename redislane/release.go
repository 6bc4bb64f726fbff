package redislane

import "time"

// relQueue is the releases of one bucket that wait for a release call
// while one is in flight: the next call carries them all (group commit),
// so that an instance whose callers release together makes one call for
// them, not one each.
type relQueue struct {
	next []relReq
}

// relReq is one Release waiting for its call.
type relReq struct {
	id   string
	done chan struct{} // closed when the call that carried id is over
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
	q := c.rel[rk]
	if q == nil {
		q = &relQueue{}
		c.rel[rk] = q
		c.mu.Unlock()
		_, err := c.releaseIDs(rk, []string{id}, c.cfg.releaseWait())
		c.mu.Lock()
		more := len(q.next) > 0
		if !more {
			delete(c.rel, rk)
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
	req := relReq{id: id, done: make(chan struct{})}
	q.next = append(q.next, req)
	c.mu.Unlock()
	t := time.NewTimer(c.cfg.releaseWait())
	defer t.Stop()
	select {
	case <-req.done:
	case <-t.C:
	}
}

// releaseLoop makes the release calls of bucket rk until no release waits.
func (c *core) releaseLoop(rk [4]string, q *relQueue) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		batch := q.next[:min(len(q.next), maxReleaseBatch)]
		q.next = q.next[len(batch):]
		if len(batch) == 0 {
			delete(c.rel, rk)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ids := make([]string, len(batch))
		for i, r := range batch {
			ids[i] = r.id
		}
		if _, err := c.releaseIDs(rk, ids, c.cfg.releaseWait()); err != nil {
			_, _ = c.releaseIDs(rk, ids, c.cfg.margin())
		}
		for _, r := range batch {
			close(r.done)
		}
	}
}
