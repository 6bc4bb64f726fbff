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

// release removes id (a permit's) from bucket rk and returns when the call
// that carried it is over, or after releaseWait, whichever comes first:
// the calls go on in a goroutine of their own (counted in c.wg, whose
// count the caller holds: see startBackground). The call is made with a
// deadline of releaseWait, and once more within the margin if it failed
// (it is idempotent). The release of a permit happens before its Release
// returns unless that call takes longer than releaseWait.
func (c *core) release(rk [4]string, id string) {
	req := relReq{id: id, done: make(chan struct{})}
	c.mu.Lock()
	q := c.rel[rk]
	lead := q == nil
	if lead {
		q = &relQueue{}
		c.rel[rk] = q
	}
	q.next = append(q.next, req)
	c.mu.Unlock()
	if lead {
		c.wg.Add(1)
		go c.releaseLoop(rk, q)
	}
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
