package redislane

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A line is the local FIFO of waiters for one bucket. Only its head talks to
// Redis, and its calls carry the requests of the waiters behind it (a
// batch): one call grants the head and then, in line order, as many of them
// as fit while nobody is queued in Redis.
type line struct {
	key  string
	rk   [4]string // the bucket's keys: h, q, x, d
	list list.List // of *waiter
}

type waiter struct {
	n    int64
	pl   place  // its place in line on an ordered lane (zero: none)
	rid  string // the id of the waiter's request for its whole wait (its permit's, once granted)
	elem *list.Element
	wake chan string // head only: "<fence>" from the hub, "" from the refresher (poll now)
	// waited is set when the waiter had to wait: behind others in its
	// line, or queued in Redis. Its own goroutine's only.
	waited bool
	since  int64 // WithHistograms: when its Acquire call began (core.clk.Precise)

	// Behind the head only (nil for a waiter that started as head): the
	// outcome of the latest head's call that carried its request, or the
	// nudge of its turn as head. Buffered 1: one such call at a time, and
	// an unread message that granted nothing gives way to the next, which
	// takes on its nudge (see waiter.tell).
	got chan batchResult

	// Guarded by core.mu:
	inflight bool // a head's call carries its request now
	unsure   bool // a call with rid may have granted it: it cleans up if it leaves without a permit
	mayHold  bool // unsure when the call in flight was sent (that call's argument)
	left     bool // it left while a call carried its request: that call cleans up
	removed  bool // a call granted it and took it out of the line

	// Guarded by core.mu while the waiter is queued in Redis:
	id         string
	rk         [4]string
	lastQueued time.Time // send time of the latest call that found id queued
	due        time.Time // when the refresher should next extend the queue entry
}

// acquire takes n permits of bucket key, waiting in the local line and then in
// the Redis queue.
func (c *core) acquire(ctx context.Context, key string, n int64) (*Permit, error) {
	return c.acquireAt(ctx, key, n, place{})
}

// acquireAt is acquire for a caller at place pl. On a sequenced Keyed
// and an ordered Weighted (eachAsks) every waiter is the head of its own
// request: it asks Redis itself, where the queue is ordered, so its line
// only counts the bucket's local waiters.
func (c *core) acquireAt(ctx context.Context, key string, n int64, pl place) (*Permit, error) {
	// An ended context comes before any refusal, as in package
	// semaphore and keyedsem: the same call counts the same everywhere.
	if err := ctx.Err(); err != nil {
		c.st.cancelled.Add(1)
		return nil, err
	}
	if err := c.check(n); err != nil {
		c.st.rejected.Add(1)
		return nil, err
	}
	if err := c.coolRefusal(ctx); err != nil {
		c.st.cancelled.Add(1)
		return nil, err
	}
	var since int64
	if c.tm != nil {
		since = c.clk.Precise()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.st.rejected.Add(1)
		return nil, ErrClosed
	}
	ln := c.lines[key]
	if ln == nil {
		ln = &line{key: key, rk: c.bucketKeys(key)}
		c.lines[key] = ln
	}
	w := &waiter{n: n, pl: pl, rid: newID(), since: since}
	head := ln.list.Len() == 0 || c.eachAsks()
	if !head {
		w.got = make(chan batchResult, 1)
		w.waited = true
	}
	w.elem = ln.list.PushBack(w)
	c.nwait++
	c.mu.Unlock()

	if !head {
		if p, err, done := c.follow(ctx, ln, w); done {
			return p, err
		}
	}
	p, err := c.lead(ctx, ln, w)
	c.leave(ln, w)
	switch {
	case err != nil:
	case w.waited:
		c.waitedGrant(w)
	default:
		c.grantedAtOnce()
	}
	return p, err
}

// leave takes w out of its line; if w was the head, the next waiter's turn
// begins.
func (c *core) leave(ln *line, w *waiter) {
	c.mu.Lock()
	c.leaveLocked(ln, w)
	c.mu.Unlock()
}

func (c *core) leaveLocked(ln *line, w *waiter) {
	c.removeLocked(ln, w)
	if ln.list.Len() == 0 && c.lines[ln.key] == ln {
		delete(c.lines, ln.key)
	}
	c.nwait--
	c.drainedLocked()
}

// removeLocked takes w out of the list of its line, if it is still there,
// and passes the turn on if w was at its front.
func (c *core) removeLocked(ln *line, w *waiter) {
	if w.removed {
		return
	}
	w.removed = true
	front := ln.list.Front() == w.elem
	ln.list.Remove(w.elem)
	if front {
		// (where each waiter asks Redis, every waiter leads: none waits for a turn)
		if next := ln.list.Front(); next != nil && next.Value.(*waiter).got != nil {
			next.Value.(*waiter).tell(batchResult{turn: true})
		}
	}
}

// drainedLocked tells Close, and the refresher, when the last waiter of a
// closed lane has left.
func (c *core) drainedLocked() {
	if c.nwait == 0 && c.closed {
		if c.drained != nil {
			close(c.drained)
			c.drained = nil
		}
		c.kickRefresher()
	}
}

// lead is the head waiter's loop: ask Redis with one id for the whole wait
// (so that a retried call never grants twice), and between calls wait for a
// hand-over message, the hint's timer, the caller's context or Close.
func (c *core) lead(ctx context.Context, ln *line, w *waiter) (*Permit, error) {
	if err := ctx.Err(); err != nil {
		c.giveBackUnsure(ln, w)
		c.st.cancelled.Add(1)
		return nil, err
	}
	id := w.rid
	w.wake = make(chan string, 2)
	var lastErr error
	sharded, err := c.sharded(ctx)
	switch {
	case err == nil:
		c.hub.watch(ctx, c.done, c.channel, sharded, id, w.wake, c.cfg.margin())
	case ctx.Err() == nil:
		// Redis is away: poll only, the next waiter asks again. The probe
		// is a Redis call like the others: counted, and the error a wait
		// that ends before the next call answers wraps.
		c.st.redisErrs.Add(1)
		lastErr = err
	}
	defer c.hub.unwatch(id)
	defer c.unqueue(id, w)
	if ctx.Err() != nil || c.isClosed() { // while it subscribed
		c.giveBackUnsure(ln, w)
		return nil, c.quit(ctx, lastErr)
	}

	backoff := time.Duration(0)
	for {
		r, abandoned := c.callAcquire(ctx, ln, w)
		if abandoned { // the call's goroutine cleans id up
			return nil, c.quit(ctx, lastErr)
		}
		if ctx.Err() != nil || c.isClosed() {
			c.cleanupAsync(ln.rk, id)
			return nil, c.quit(ctx, lastErr)
		}
		if r.err != nil {
			c.st.redisErrs.Add(1)
			lastErr = r.err
			if !retryable(r.err) {
				c.cleanupAsync(ln.rk, id)
				c.st.rejected.Add(1)
				return nil, fmt.Errorf("redislane: acquire %q: %w", c.name, r.err)
			}
			backoff = nextBackoff(backoff)
			if !c.pause(ctx, jitter(backoff)) {
				c.cleanupAsync(ln.rk, id)
				return nil, c.quit(ctx, lastErr)
			}
			continue
		}
		lastErr = nil
		if r.status == stGranted && time.Since(r.sent) > c.cfg.margin() {
			// A late reply never yields a permit: too little of the lease
			// is known to be left. Ask again with the same id, after a
			// backoff as for a failed call (Redis or the network is slow);
			// Redis returns the same grant with a fresh lease.
			c.st.late.Add(1)
			backoff = nextBackoff(backoff)
			if !c.pause(ctx, jitter(backoff)) {
				c.cleanupAsync(ln.rk, id)
				return nil, c.quit(ctx, nil)
			}
			continue
		}
		backoff = 0
		switch r.status {
		case stGranted:
			p := c.grant(ln.rk, id, w.n, r.a, r.sent)
			if p == nil { // Close came first
				return nil, c.quit(ctx, nil)
			}
			if c.seq != nil && r.b == 1 {
				c.holdsOut.Add(1)
			}
			return p, nil
		case stMismatch:
			c.st.rejected.Add(1)
			return nil, mismatchError(c.name, "capacity", r.a, c.kindName(), c.capacity)
		case stTooHeavy: // a fleet lane shrank below the weight; the script unqueued id
			c.fleet.seen(r.a)
			if w.waited {
				c.st.failed.Add(1) // a waiter failed by a shrink, as package semaphore counts it
			} else {
				c.st.rejected.Add(1)
			}
			return nil, c.tooHeavyNow(w.n, r.a)
		case stQueued:
			w.waited = true
			if err := c.coolRefusal(ctx); err != nil {
				// Closed by a cooldown past the deadline: fail now,
				// not at the deadline.
				c.cleanupAsync(ln.rk, id)
				c.st.cancelled.Add(1)
				return nil, err
			}
			c.setQueued(w, ln.rk, id, r.sent)
			p, err, next := c.waitQueued(ctx, ln, w, id, r)
			if !next {
				return p, err
			}
		default:
			c.cleanupAsync(ln.rk, id)
			return nil, fmt.Errorf("redislane: acquire %q: unexpected script status %d", c.name, r.status)
		}
	}
}

// waitQueued waits, after a call that found id queued (reply r), for a
// hand-over message, the hint's timer, the end of ctx or Close. It returns
// next == true when the waiter should call Redis again, and otherwise the
// waiter's result.
func (c *core) waitQueued(ctx context.Context, ln *line, w *waiter, id string, r reply) (_ *Permit, _ error, next bool) {
	t := time.NewTimer(jitter(min(max(msDur(r.a), minWait), maxWait)))
	defer t.Stop()
	news := c.coolNews()
	for {
		select {
		case <-news: // another call of the instance found the lane closed longer
			if err := c.coolRefusal(ctx); err != nil {
				c.cleanupAsync(ln.rk, id)
				c.st.cancelled.Add(1)
				return nil, err, false
			}
			news = c.coolNews()
		case m := <-w.wake:
			if m == "" { // the refresher found id granted or gone
				c.st.polls.Add(1)
				return nil, nil, true
			}
			fence, seq, runOut, ok := parseHandover(m)
			if !ok {
				// A message without an arrival number (from an older
				// version): it cannot be matched to this entry; ask.
				c.st.polls.Add(1)
				return nil, nil, true
			}
			if seq != r.seq {
				// Made for an earlier entry of id, which expired while the
				// waiter could not reach Redis: never a grant of this one.
				c.st.stale.Add(1)
				continue
			}
			// Handed over by a release. The grant happened after the last
			// call that found this entry queued was sent, so the lease runs
			// at least until that send time plus the lease.
			c.mu.Lock()
			sent := w.lastQueued
			c.mu.Unlock()
			if time.Until(sent.Add(c.cfg.validity())) <= c.cfg.margin() {
				return nil, nil, true // too little left: confirm (and extend) with a call
			}
			if ctx.Err() != nil || c.isClosed() {
				// The hand-off raced with the end of ctx or with Close
				// (select picks at random among ready cases): give the
				// permits back rather than return a permit after either.
				c.cleanupAsync(ln.rk, id)
				return nil, c.quit(ctx, nil), false
			}
			p := c.grant(ln.rk, id, w.n, fence, sent)
			if p == nil { // Close came first
				return nil, c.quit(ctx, nil), false
			}
			c.st.handovers.Add(1)
			if runOut {
				c.holdsOut.Add(1)
			}
			return p, nil, false
		case <-t.C:
			c.st.polls.Add(1)
			return nil, nil, true
		case <-ctx.Done():
			c.cleanupAsync(ln.rk, id)
			return nil, c.quit(ctx, nil), false
		case <-c.done:
			c.cleanupAsync(ln.rk, id)
			return nil, c.quit(ctx, nil), false
		}
	}
}

// parseHandover reads a hand-over message, "<fence> <arrival number>",
// followed on a sequenced Keyed by " 1" for a grant that went on a
// reorder hold that ran out (runOut).
func parseHandover(m string) (fence, seq int64, runOut, ok bool) {
	f, q, ok := strings.Cut(m, " ")
	if !ok {
		return 0, 0, false, false
	}
	q, flag, hasFlag := strings.Cut(q, " ")
	fence, err1 := strconv.ParseInt(f, 10, 64)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	return fence, seq, hasFlag && flag == "1", err1 == nil && err2 == nil && (!hasFlag || flag == "1")
}

func (c *core) setQueued(w *waiter, rk [4]string, id string, sent time.Time) {
	c.mu.Lock()
	w.id, w.rk = id, rk
	if sent.After(w.lastQueued) {
		w.lastQueued = sent
	}
	w.due = sent.Add(c.cfg.refreshEvery)
	c.queued[id] = w
	c.planLocked(w.due)
	c.mu.Unlock()
}

func (c *core) unqueue(id string, w *waiter) {
	c.mu.Lock()
	if c.queued[id] == w {
		delete(c.queued, id)
	}
	c.mu.Unlock()
}
