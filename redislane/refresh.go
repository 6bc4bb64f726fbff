package redislane

import (
	"context"
	"time"
)

// refreshChunk bounds the ids of one refresh call (and so the time Redis
// spends in it): a few hundred ids run in well under a millisecond.
const refreshChunk = 256

// planLocked makes sure the refresher wakes by t. Called with c.mu held.
func (c *core) planLocked(t time.Time) {
	if c.planned.IsZero() || t.Before(c.planned) {
		c.planned = t
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *core) kickRefresher() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// forget stops refreshing p's lease.
func (c *core) forget(p *Permit) {
	c.mu.Lock()
	if c.permits[p.id] == p {
		delete(c.permits, p.id)
	}
	c.expiryRemoveLocked(p)
	last := c.closed && c.nwait == 0 && len(c.permits) == 0
	c.mu.Unlock()
	if last {
		c.kickRefresher()
	}
}

// refreshLoop is the instance's one refresher: whenever an entry (a permit
// out, or a head waiter queued in Redis) is due, it extends all of them with
// one script call, so they all fall due together again. After a failure it
// backs off (5-250 ms, jittered); leases whose deadline passes meanwhile end
// through the heap of deadlines and its timer (see expiry), not through
// this goroutine.
func (c *core) refreshLoop() {
	defer close(c.refDone)
	done := c.done
	t := time.NewTimer(time.Hour)
	t.Stop()
	backoff := time.Duration(0)
	for {
		c.mu.Lock()
		// Waiters count too: one may be about to register a permit.
		if c.closed && c.nwait == 0 && len(c.permits) == 0 && len(c.queued) == 0 {
			c.mu.Unlock()
			return
		}
		next := c.nextDueLocked()
		if !next.IsZero() && next.Before(c.retryAt) {
			next = c.retryAt
		}
		c.planned = next
		c.mu.Unlock()

		if next.IsZero() {
			select {
			case <-c.kick:
			case <-done:
				done = nil
			}
			continue
		}
		if d := time.Until(next); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-c.kick:
				t.Stop()
				continue
			case <-done:
				done = nil
				t.Stop()
				continue
			}
		}
		ok := c.refreshAll()
		c.mu.Lock()
		if ok {
			backoff = 0
			c.retryAt = time.Time{}
		} else {
			backoff = nextBackoff(backoff)
			c.retryAt = time.Now().Add(jitter(backoff))
		}
		c.mu.Unlock()
	}
}

func (c *core) nextDueLocked() time.Time {
	var next time.Time
	for _, p := range c.permits {
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	for _, w := range c.queued {
		if next.IsZero() || w.due.Before(next) {
			next = w.due
		}
	}
	return next
}

type refreshEntry struct {
	id string
	rk [4]string
	p  *Permit
	w  *waiter
}

// refreshAll refreshes every entry; it reports whether every call worked.
func (c *core) refreshAll() bool {
	c.mu.Lock()
	entries := make([]refreshEntry, 0, len(c.permits)+len(c.queued))
	for id, p := range c.permits {
		entries = append(entries, refreshEntry{id: id, rk: p.rk, p: p})
	}
	for id, w := range c.queued {
		entries = append(entries, refreshEntry{id: id, rk: w.rk, w: w})
	}
	c.mu.Unlock()
	ok := true
	for len(entries) > 0 {
		n := min(len(entries), refreshChunk)
		if !c.refreshChunk(entries[:n]) {
			ok = false
		}
		entries = entries[n:]
	}
	return ok
}

func (c *core) refreshChunk(entries []refreshEntry) bool {
	sent := time.Now()
	ctx, cancel := c.callCtx(context.Background(), c.cfg.refreshTimeout())
	defer cancel()
	pub, err := c.pubCmd(ctx)
	if err != nil {
		c.st.redisErrs.Add(1)
		return false
	}
	buckets := make(map[[4]string]int, 1)
	keys := []string{c.metaKey}
	limit, lterm := c.limitAndTerm()
	args := []any{limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), c.channel, pub, lterm}
	for _, e := range entries {
		b, seen := buckets[e.rk]
		if !seen {
			b = len(buckets)
			buckets[e.rk] = b
			keys = append(keys, e.rk[:]...)
		}
		args = append(args, b, e.id)
	}
	script := refreshScript
	switch {
	case c.seq != nil:
		script = c.seq.refres
	case c.ord != nil:
		script = c.ord.refres
		if c.fairKey != "" { // one bucket: its fifth key follows its four
			keys = append(keys, c.fairKey)
		}
	}
	v, err := script.Run(ctx, c.client, keys, args...).Int64Slice()
	if err == nil && len(v) != len(entries) {
		err = errBadRefresh
	}
	if err != nil {
		c.st.redisErrs.Add(1)
		return false
	}
	due := sent.Add(c.cfg.refreshEvery)
	for i, e := range entries {
		st := v[i]
		if e.p != nil {
			if st == refHeld {
				e.p.extend(sent)
				c.mu.Lock()
				e.p.due = due
				c.mu.Unlock()
			} else {
				e.p.lose()
			}
			continue
		}
		c.mu.Lock()
		if c.queued[e.id] == e.w {
			e.w.due = due
			if st == refQueued {
				if sent.After(e.w.lastQueued) {
					e.w.lastQueued = sent
				}
			} else { // granted (its message may be lost) or gone: poll now
				select {
				case e.w.wake <- "":
				default:
				}
			}
		}
		c.mu.Unlock()
	}
	return true
}
