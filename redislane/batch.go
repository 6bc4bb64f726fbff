package redislane

import (
	"context"
	"time"
)

// Batches: the head of a line carries, in each of its acquire calls, the
// requests of the waiters behind it, and the script grants them after the
// head in line order, the prefix that fits while nobody is queued in Redis
// (see acquireSrc). A waiter behind the head waits in follow for the
// outcome of each call that carries it (settle), for its turn as head, for
// its context or for Close.

// maxBatch bounds the requests of waiters behind the head that one acquire
// call carries (and so the time Redis spends in it).
const maxBatch = 256

// batchResult is a message to a waiter behind the head: the outcome of a
// head's call that carried its request, granted (with its fencing token)
// or not, or (turn) the nudge that its turn as head came, or both (see
// waiter.tell).
type batchResult struct {
	granted bool
	turn    bool // its turn as head came: it is at the front of its line
	fence   int64
	sent    time.Time // the call's send time
}

// follow is the wait of a waiter behind the head: until a head's call
// grants its request (done, with the permit), its turn comes as head and no
// call carries its request any more (not done: it leads), its context ends
// or the lane closes; or, on a fleet lane, until the limit falls below its
// weight (it fails with ErrTooHeavy).
func (c *core) follow(ctx context.Context, ln *line, w *waiter) (_ *Permit, _ error, done bool) {
	turn := false // its turn as head came
	news := c.coolNews()
	shrunk := c.shrinkNews()
	for {
		// A fleet lane's limit that fell below w's weight fails w now,
		// as the head's call would if w led, and the waiters behind go on.
		if shrunk != nil {
			if l := c.limit(); w.n > l {
				c.abandon(ln, w)
				c.st.failed.Add(1) // failed by a shrink, as package semaphore counts it
				return nil, c.tooHeavyNow(w.n, l), true
			}
		}
		select {
		case <-shrunk:
			shrunk = c.shrinkNews()
			continue
		case <-news: // the lane is closed longer than the instance knew
			if err := c.coolRefusal(ctx); err != nil {
				c.abandon(ln, w)
				c.st.cancelled.Add(1)
				return nil, err, true
			}
			news = c.coolNews()
			continue
		case r := <-w.got:
			if r.granted { // the call took w out of the line
				return c.takeBatched(ctx, ln, w, r)
			}
			turn = turn || r.turn
		case <-ctx.Done():
			c.abandon(ln, w)
			c.st.cancelled.Add(1)
			return nil, ctx.Err(), true
		case <-c.done:
			c.abandon(ln, w)
			c.st.failed.Add(1)
			return nil, ErrClosed, true
		}
		// Its turn came, and no outcome is on its way or unread: it leads.
		if turn {
			c.mu.Lock()
			busy := w.inflight || len(w.got) > 0
			c.mu.Unlock()
			if !busy {
				return nil, nil, false
			}
		}
	}
}

// takeBatched makes the permit of w, granted by a head's call (r), unless
// w's context ended or the lane closed meanwhile: then the grant is given
// back. w is no longer in the line.
func (c *core) takeBatched(ctx context.Context, ln *line, w *waiter, r batchResult) (*Permit, error, bool) {
	defer c.leave(ln, w) // after grant: Close waits for w, so it sees the permit
	if ctx.Err() != nil || c.isClosed() {
		c.cleanupAsync(ln.rk, w.rid)
		return nil, c.quit(ctx, nil), true
	}
	p := c.grant(ln.rk, w.rid, w.n, r.fence, r.sent)
	if p == nil { // Close came first
		return nil, c.quit(ctx, nil), true
	}
	c.waitedGrant(w)
	c.st.batched.Add(1)
	return p, nil, true
}

// abandon takes w out of its line when it stops waiting behind the head.
// If a call carries its request, that call gives back whatever it grants
// w; else w gives back what an earlier call may have granted it.
func (c *core) abandon(ln *line, w *waiter) {
	c.mu.Lock()
	w.left = true
	giveBack := false
	if !w.inflight {
		select {
		case r := <-w.got:
			giveBack = r.granted
		default:
		}
		giveBack = giveBack || w.unsure
	}
	c.leaveLocked(ln, w)
	c.mu.Unlock()
	if giveBack {
		c.cleanupAsync(ln.rk, w.rid)
	}
}

// gatherLocked marks the waiters behind the head h whose requests h's next
// call carries, in line order: up to maxBatch, as long as their weight and
// the head's fit in the limit, and stopping at one that an earlier call
// (of a head that left) still carries, so that none is granted before a
// waiter ahead of it.
func (c *core) gatherLocked(ln *line, h *waiter) []*waiter {
	if h.elem == nil || h.removed || c.eachAsks() { // an ordered lane's waiters each ask Redis
		return nil
	}
	var fs []*waiter
	sum, limit := h.n, c.limit()
	for e := h.elem.Next(); e != nil && len(fs) < maxBatch; e = e.Next() {
		f := e.Value.(*waiter)
		if f.inflight || sum+f.n > limit {
			break
		}
		sum += f.n
		f.inflight = true
		f.mayHold = f.unsure
		fs = append(fs, f)
	}
	return fs
}

// settle hands the outcome of a head's call to the waiters behind it whose
// requests it carried (fs): those granted leave the line with their grant,
// unless the reply came too late to be used (they ask again with the same
// id, which returns the same grant); what it granted to waiters that left
// meanwhile is given back, here.
func (c *core) settle(ln *line, fs []*waiter, r reply) {
	if len(fs) == 0 {
		return
	}
	late := r.err == nil && time.Since(r.sent) > c.cfg.margin()
	var giveBack []string
	c.mu.Lock()
	for i, f := range fs {
		res := batchResult{sent: r.sent}
		switch {
		case r.err != nil:
			f.unsure = true
		case i < len(r.fences) && late:
			f.unsure = true
		case i < len(r.fences):
			res.granted, res.fence = true, r.fences[i]
		}
		f.inflight = false
		if f.left {
			if res.granted || f.unsure {
				giveBack = append(giveBack, f.rid)
			}
			continue
		}
		if res.granted {
			c.removeLocked(ln, f)
		}
		f.tell(res)
	}
	c.mu.Unlock()
	if late {
		c.st.late.Add(uint64(min(len(r.fences), len(fs))))
	}
	for _, id := range giveBack {
		_, _ = c.cleanup(ln.rk, id)
	}
}

// tell hands a waiter behind the head the outcome of a call that carried
// its request, or the nudge of its turn, without waiting (the sender holds
// c.mu, which the waiter may be waiting for). Called with c.mu held. A
// message still unread is one that granted nothing (a grant takes the
// waiter out of the line, so no later call carries it and its turn never
// comes): it told the waiter that a call was over, which the new message
// tells as well, and perhaps that its turn came, which the new one takes
// on; so it makes room.
func (w *waiter) tell(res batchResult) {
	select {
	case old := <-w.got:
		res.turn = res.turn || old.turn
	default:
	}
	w.got <- res
}

// giveBackUnsure gives back, in the background, what a call that carried
// w's request behind an earlier head may have granted it (its outcome is
// unknown): for a waiter whose turn as head came and that leaves before it
// asks Redis itself.
func (c *core) giveBackUnsure(ln *line, w *waiter) {
	c.mu.Lock()
	unsure := w.unsure
	c.mu.Unlock()
	if unsure {
		c.cleanupAsync(ln.rk, w.rid)
	}
}
