package redislane

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

type reply struct {
	status, a, b int64
	seq          int64     // queued: the arrival number of the entry
	cool         int64     // queued or try: ms until the lane reopens from a cooldown (0: open)
	fences       []int64   // granted: the tokens of the requests behind the head that were granted too, in order
	sent         time.Time // taken before the call was sent
	err          error
}

// callAcquire runs the acquire script for the head w of line ln, carrying
// the requests of the waiters behind it (see gatherLocked), in a goroutine,
// so that the caller can leave as soon as its context ends or the lane
// closes. The outcome of those waiters is settled whatever the head does.
// If the head leaves (abandoned is true), the goroutine waits for the call
// (bounded by one margin) and then releases w's id, whatever the call did.
func (c *core) callAcquire(ctx context.Context, ln *line, w *waiter) (r reply, abandoned bool) {
	c.mu.Lock()
	fs := c.gatherLocked(ln, w)
	c.mu.Unlock()
	if ctx.Done() == nil {
		// ctx never ends: no need to be able to leave early. Close ends
		// the waiter once the call returns, within one margin.
		r := c.runAcquire(ctx, ln.rk, w.rid, w.n, w.pl, false, fs)
		c.settle(ln, fs, r)
		return r, false
	}
	ch := make(chan reply, 1)
	var state atomic.Int32 // 0: in flight, 1: delivered, 2: abandoned
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r := c.runAcquire(context.WithoutCancel(ctx), ln.rk, w.rid, w.n, w.pl, false, fs)
		c.settle(ln, fs, r)
		if state.CompareAndSwap(0, 1) {
			ch <- r
			return
		}
		c.cleanup(ln.rk, w.rid)
	}()
	select {
	case r := <-ch:
		return r, false
	case <-ctx.Done():
	case <-c.done:
	}
	if state.CompareAndSwap(0, 2) {
		return reply{}, true
	}
	return <-ch, false
}

// runAcquire runs the acquire script once for id (weight n), followed by
// the requests of fs, which it may grant after id (see acquireSrc). On a
// sequenced Keyed it runs the sequenced script with id's number, on an
// ordered Weighted the ordered one with its band, group and length (there
// fs is empty: see gatherLocked).
func (c *core) runAcquire(ctx context.Context, rk [4]string, id string, n int64, pl place, try bool, fs []*waiter) reply {
	tryFlag := 0
	if try {
		tryFlag = 1
	}
	// One deadline for the call and, on the first call of a client, the
	// question whether the server has sharded pub/sub: a TryAcquire
	// returns within one margin, not two.
	ctx, cancel := c.callCtx(ctx, c.cfg.margin())
	defer cancel()
	pub, err := c.pubCmd(ctx)
	if err != nil {
		return reply{sent: time.Now(), err: err}
	}
	limit, lterm := c.limitAndTerm()
	args := make([]any, 0, 10+3*len(fs))
	args = append(args, id, n, limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), tryFlag, c.channel, pub, lterm)
	for _, f := range fs {
		args = append(args, f.rid, f.n, flag(f.mayHold))
	}
	script := acquireScript
	switch {
	case c.seq != nil:
		script = c.seq.acquire
		args = append(args, pl.num)
	case c.ord != nil:
		script = c.ord.acquire
		args = append(args, pl.band, pl.group, pl.flen)
	}
	r := reply{sent: time.Now()}
	v, err := script.Run(ctx, c.client, c.scriptKeys(rk, c.metaKey), args...).Int64Slice()
	switch {
	case err != nil:
		r.err = err
	case len(v) < 2:
		r.err = fmt.Errorf("%w: acquire script returned %v", errBadReply, v)
	case v[0] == stGranted && len(v)-4 > len(fs):
		r.err = fmt.Errorf("%w: acquire script granted %d of %d requests behind the head", errBadReply, len(v)-4, len(fs))
	default:
		r.status, r.a = v[0], v[1]
		if len(v) > 2 {
			r.b = v[2]
		}
		switch {
		case r.status == stGranted && len(v) > 4:
			r.fences = v[4:]
		case r.status == stQueued && len(v) > 4:
			r.seq, r.cool = v[3], v[4]
		case r.status == stQueued && len(v) > 3:
			r.seq = v[3]
		case r.status == stTry && len(v) > 3:
			r.cool = v[3]
		}
		switch r.status {
		case stGranted:
			c.learnCool(r.sent, 0) // granted: open
		case stQueued, stTry:
			c.learnCool(r.sent, msDur(r.cool))
		}
	}
	return r
}

// sharded tells whether the lane's wake-ups go through sharded pub/sub:
// where the server has it, unless WithClassicPubSub. Asking the server
// (once per client) is a call of the lane, bounded by one margin.
func (c *core) sharded(ctx context.Context) (bool, error) {
	if c.cfg.classicPubSub {
		return false, nil
	}
	if sh, known := c.hub.knownSharded(); known {
		return sh, nil
	}
	ctx, cancel := c.callCtx(ctx, c.cfg.margin())
	defer cancel()
	return c.hub.sharded(ctx)
}

// pubCmd returns the command with which the lane's scripts publish a
// hand-over.
func (c *core) pubCmd(ctx context.Context) (string, error) {
	sh, err := c.sharded(ctx)
	switch {
	case err != nil:
		return "", err
	case sh:
		return "SPUBLISH", nil
	}
	return "PUBLISH", nil
}

// callCtx returns the context of one call of the lane: it ends d from now,
// or when Close's bound passes if that comes first (go-redis applies the
// deadline to the connection, as the client has ContextTimeoutEnabled).
// No call of the lane has a longer d than a third of the lease (a refresh;
// the others one margin), so every call in flight when Close begins ends
// within a third of the lease, and none begun after ends later than one
// margin after Close began.
func (c *core) callCtx(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	dl := time.Now().Add(d)
	if by := c.closeBy.Load(); by != nil && by.Before(dl) {
		dl = *by
	}
	return context.WithDeadline(parent, dl)
}

// cleanup removes id from Redis, held or queued. It is the release of a
// permit, and the clean-up of a waiter that left while its id may be queued
// or granted. It waits at most one margin; if Redis cannot be reached the
// entry expires within a lease.
func (c *core) cleanup(rk [4]string, id string) (int64, error) {
	return c.cleanupWithin(rk, id, c.cfg.margin())
}

// cleanupWithin is cleanup with a deadline of d.
func (c *core) cleanupWithin(rk [4]string, id string, d time.Duration) (int64, error) {
	return c.releaseIDs(rk, []string{id}, d)
}

// releaseIDs removes ids (at least one) from bucket rk, held or queued, in
// one call with a deadline of d, and returns the release script's result
// for the first.
func (c *core) releaseIDs(rk [4]string, ids []string, d time.Duration) (int64, error) {
	ctx, cancel := c.callCtx(context.Background(), d)
	defer cancel()
	pub, err := c.pubCmd(ctx)
	if err != nil {
		c.st.redisErrs.Add(1)
		return 0, err
	}
	limit, lterm := c.limitAndTerm()
	args := make([]any, 0, 7+len(ids))
	args = append(args, ids[0], limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), c.channel, pub, lterm)
	for _, id := range ids[1:] {
		args = append(args, id)
	}
	script := releaseScript
	switch {
	case c.seq != nil:
		script = c.seq.release
	case c.ord != nil:
		script = c.ord.release
	}
	res, err := script.Run(ctx, c.client, c.scriptKeys(rk, c.metaKey), args...).Int64()
	if err != nil {
		c.st.redisErrs.Add(1)
	}
	return res, err
}

// cleanupAsync runs cleanup in the background, unless Close has begun
// waiting (the entry then expires by itself).
func (c *core) cleanupAsync(rk [4]string, id string) {
	if !c.startBackground() {
		return
	}
	go func() {
		defer c.endBackground()
		_, _ = c.cleanup(rk, id)
	}()
}

// grant makes the permit for id, granted by a call sent at sent. After
// Close it releases id instead and returns nil.
func (c *core) grant(rk [4]string, id string, n, fence int64, sent time.Time) *Permit {
	p := &Permit{c: c, id: id, rk: rk, n: n, fence: fence}
	if c.tm != nil {
		p.since = c.clk.Stamp()
	}
	p.tok.Init((*owner)(p), -1, &p.gen)
	dl := sent.Add(c.cfg.validity())
	p.mu.Lock()
	if c.cfg.maxHold > 0 {
		p.holdUntil = time.Now().Add(c.cfg.maxHold)
		if p.holdUntil.Before(dl) {
			dl = p.holdUntil
		}
	}
	p.deadline = dl
	p.mu.Unlock()

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		p.endCtx(ErrClosed)
		c.cleanupAsync(rk, id)
		return nil
	}
	p.due = sent.Add(c.cfg.refreshEvery)
	c.permits[id] = p
	c.planLocked(p.due)
	c.expiryAddLocked(p, dl)
	c.mu.Unlock()
	c.held.Add(n)
	c.st.acquired.Add(1)
	return p
}

// waitedGrant counts a grant to w that had to wait, and its wait
// (WithHistograms), from w's Acquire call to now.
func (c *core) waitedGrant(w *waiter) {
	c.st.waited.Add(1)
	if c.tm != nil {
		c.tm.Wait.Observe(c.clk.Precise() - w.since)
	}
}

// grantedAtOnce counts, WithHistograms, a wait of 0 for a grant that did
// not wait (an Acquire's or a TryAcquire's), as package semaphore does.
func (c *core) grantedAtOnce() {
	if c.tm != nil {
		c.tm.Wait.Observe(0)
	}
}
