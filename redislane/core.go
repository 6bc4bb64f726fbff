package redislane

import (
	"container/list"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/lanequeue"
)

// Bounds of the wait between two calls of a waiter, and of the backoff
// after a failed call. 5 ms keeps a waiter from hammering Redis; 250 ms
// bounds how long a waiter whose wake-up message was lost sleeps past a
// free permit.
const (
	minWait = 5 * time.Millisecond
	maxWait = 250 * time.Millisecond
)

// core is what a Semaphore and a Keyed share: a lane in Redis, the local
// lines of waiters (one per bucket), and the refresher of the permits and
// queued ids of this instance.
type core struct {
	client redis.UniversalClient
	name   string
	kind   lanequeue.Kind // Global or Keyed
	limit  int64          // the limit, or the per-key limit
	cfg    config

	prefix  string // {lanes:<name>}
	metaKey string
	channel string
	hub     *hub

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	refDone   chan struct{} // closed when the refresher returns
	kick      chan struct{} // wakes the refresher; buffered 1

	closeBy atomic.Pointer[time.Time] // set by Close: no call of the lane outlasts it

	mu      sync.Mutex // protects the fields below, and waiter.{id,rk,lastQueued,due}, Permit.due
	closed  bool
	bgDone  bool               // set by Close once the waiters left: no new background call
	lines   map[string]*line   // local waiters by bucket; a line exists while it has waiters
	permits map[string]*Permit // permits out whose lease is kept, by id
	queued  map[string]*waiter // head waiters queued in Redis, by id
	nwait   int                // waiters in all lines
	drained chan struct{}      // after Close: closed when nwait drops to 0
	planned time.Time          // when the refresher means to wake (zero: only when kicked)
	retryAt time.Time          // after a failed refresh: not before this

	held atomic.Int64 // weight of the permits of this instance that are out
	st   counters

	// wg counts the calls and clean-ups that finish in the background after
	// their caller left: a waiter's, a TryAcquire's, a Release's. Close sets
	// bgDone (under mu) once the waiters left, and after that none starts,
	// so Close can wait for them.
	wg sync.WaitGroup
}

type counters struct {
	acquired, released, cancelled, rejected, doubleRel atomic.Uint64
	lost, expired, late, redisErrs                     atomic.Uint64
	handoffs, polls                                    atomic.Uint64 // how queued waiters were granted / woke up
	stale                                              atomic.Uint64 // hand-over messages for an earlier queue entry
	maxHold                                            atomic.Uint64 // permits ended by WithMaxHold
}

// A line is the local FIFO of waiters for one bucket. Only its head talks to
// Redis; the others wait for their turn (local FIFO coalescing).
type line struct {
	key  string
	rk   [4]string // the bucket's keys: h, q, x, d
	list list.List // of *waiter
}

type waiter struct {
	n    int64
	elem *list.Element
	turn chan struct{} // closed when the waiter becomes the head; nil if it started as head
	wake chan string   // head only: "<fence>" from the hub, "" from the refresher (poll now)

	// Guarded by core.mu while the waiter is queued in Redis:
	id         string
	rk         [4]string
	lastQueued time.Time // send time of the latest call that found id queued
	due        time.Time // when the refresher should next extend the queue entry
}

func newCore(client redis.UniversalClient, name string, kind lanequeue.Kind, limit int64, opts []Option) (*core, error) {
	if err := checkArgs(client, name, limit); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	prefix := "{lanes:" + name + "}"
	c := &core{
		client:  client,
		name:    name,
		kind:    kind,
		limit:   limit,
		cfg:     cfg,
		prefix:  prefix,
		metaKey: prefix + ":meta",
		channel: prefix + ":wake",
		done:    make(chan struct{}),
		refDone: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		lines:   make(map[string]*line),
		permits: make(map[string]*Permit),
		queued:  make(map[string]*waiter),
	}
	c.hub = joinHub(client, c.channel)
	go c.refreshLoop()
	return c, nil
}

// kindName is the kind stored in the lane's meta hash.
func (c *core) kindName() string {
	if c.kind == lanequeue.Global {
		return "global"
	}
	return "keyed"
}

func (c *core) bucketKeys(key string) [4]string {
	b := c.prefix + ":g:"
	if c.kind != lanequeue.Global {
		b = c.prefix + ":k:" + key + ":"
	}
	return [4]string{b + "h", b + "q", b + "x", b + "d"}
}

func (c *core) check(n int64) error {
	switch {
	case n <= 0:
		c.st.rejected.Add(1)
		return ErrInvalidWeight
	case n > c.limit:
		c.st.rejected.Add(1)
		return ErrTooHeavy
	}
	return nil
}

// acquire takes n units of bucket key, waiting in the local line and then in
// the Redis queue.
func (c *core) acquire(ctx context.Context, key string, n int64) (*Permit, error) {
	if err := c.check(n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		c.st.cancelled.Add(1)
		return nil, err
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
	w := &waiter{n: n}
	head := ln.list.Len() == 0
	if !head {
		w.turn = make(chan struct{})
	}
	w.elem = ln.list.PushBack(w)
	c.nwait++
	c.mu.Unlock()

	if !head {
		// leave passes the turn on if it came while we were leaving, so
		// whichever case wins, the line never stalls.
		select {
		case <-w.turn:
		case <-ctx.Done():
			c.leave(ln, w)
			c.st.cancelled.Add(1)
			return nil, ctx.Err()
		case <-c.done:
			c.leave(ln, w)
			c.st.rejected.Add(1)
			return nil, ErrClosed
		}
	}
	p, err := c.lead(ctx, ln, w)
	c.leave(ln, w)
	return p, err
}

// leave takes w out of its line; if w was the head, the next waiter's turn
// begins.
func (c *core) leave(ln *line, w *waiter) {
	c.mu.Lock()
	front := ln.list.Front() == w.elem
	ln.list.Remove(w.elem)
	if front {
		if next := ln.list.Front(); next != nil {
			close(next.Value.(*waiter).turn)
		}
	}
	if ln.list.Len() == 0 {
		delete(c.lines, ln.key)
	}
	c.nwait--
	c.drainedLocked()
	c.mu.Unlock()
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
// handoff message, the hint's timer, the caller's context or Close.
func (c *core) lead(ctx context.Context, ln *line, w *waiter) (*Permit, error) {
	if err := ctx.Err(); err != nil {
		c.st.cancelled.Add(1)
		return nil, err
	}
	id := newID()
	w.wake = make(chan string, 2)
	sharded, err := c.sharded(ctx)
	if err == nil { // else Redis is away: poll only, the next waiter asks again
		c.hub.watch(ctx, c.done, c.channel, sharded, id, w.wake, c.cfg.margin())
	}
	defer c.hub.unwatch(id)
	defer c.unqueue(id, w)
	if ctx.Err() != nil || c.isClosed() { // while it subscribed; nothing asked of Redis yet
		return nil, c.quit(ctx, nil)
	}

	var lastErr error
	backoff := time.Duration(0)
	for {
		r, abandoned := c.callAcquire(ctx, ln.rk, id, w.n)
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
			return p, nil
		case stMismatch:
			c.st.rejected.Add(1)
			return nil, fmt.Errorf("%w: %q has limit %d (or another kind) in Redis; this %s lane has %d",
				ErrLimitMismatch, c.name, r.a, c.kindName(), c.limit)
		case stQueued:
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
	t := time.NewTimer(jitter(min(max(time.Duration(r.a)*time.Millisecond, minWait), maxWait)))
	defer t.Stop()
	for {
		select {
		case m := <-w.wake:
			if m == "" { // the refresher found id granted or gone
				c.st.polls.Add(1)
				return nil, nil, true
			}
			fence, seq, ok := parseHandover(m)
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
				// units back rather than return a permit after either.
				c.cleanupAsync(ln.rk, id)
				return nil, c.quit(ctx, nil), false
			}
			p := c.grant(ln.rk, id, w.n, fence, sent)
			if p == nil { // Close came first
				return nil, c.quit(ctx, nil), false
			}
			c.st.handoffs.Add(1)
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

// parseHandover reads a hand-over message, "<fence> <arrival number>".
func parseHandover(m string) (fence, seq int64, ok bool) {
	f, q, ok := strings.Cut(m, " ")
	if !ok {
		return 0, 0, false
	}
	fence, err1 := strconv.ParseInt(f, 10, 64)
	seq, err2 := strconv.ParseInt(q, 10, 64)
	return fence, seq, err1 == nil && err2 == nil
}

// quit returns the error of a waiter that stops waiting: ctx's error (with
// the last Redis error, if the last call failed), or ErrClosed.
func (c *core) quit(ctx context.Context, lastErr error) error {
	err := ctx.Err()
	if err == nil {
		c.st.rejected.Add(1)
		return ErrClosed
	}
	c.st.cancelled.Add(1)
	if lastErr != nil {
		return fmt.Errorf("%w (last Redis error: %w)", err, lastErr)
	}
	return err
}

// pause sleeps for d unless ctx ends or the lane closes first.
func (c *core) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.done:
	}
	return false
}

func (c *core) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
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

type reply struct {
	status, a, b int64
	seq          int64     // queued: the arrival number of the entry
	sent         time.Time // taken before the call was sent
	err          error
}

// callAcquire runs the acquire script in a goroutine, so that the caller can
// leave as soon as its context ends or the lane closes. If it leaves
// (abandoned is true), the goroutine waits for the call (bounded by one
// margin) and then releases id, whatever the call did.
func (c *core) callAcquire(ctx context.Context, rk [4]string, id string, n int64) (r reply, abandoned bool) {
	if ctx.Done() == nil {
		// ctx never ends: no need to be able to leave early. Close ends
		// the waiter once the call returns, within one margin.
		return c.runAcquire(ctx, rk, id, n, false), false
	}
	ch := make(chan reply, 1)
	var state atomic.Int32 // 0: in flight, 1: delivered, 2: abandoned
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r := c.runAcquire(context.WithoutCancel(ctx), rk, id, n, false)
		if state.CompareAndSwap(0, 1) {
			ch <- r
			return
		}
		c.cleanup(rk, id)
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

func (c *core) runAcquire(ctx context.Context, rk [4]string, id string, n int64, try bool) reply {
	tryFlag := 0
	if try {
		tryFlag = 1
	}
	pub, err := c.pubCmd(ctx)
	if err != nil {
		return reply{sent: time.Now(), err: err}
	}
	ctx, cancel := c.callCtx(ctx, c.cfg.margin())
	defer cancel()
	r := reply{sent: time.Now()}
	v, err := acquireScript.Run(ctx, c.client,
		[]string{c.metaKey, rk[0], rk[1], rk[2], rk[3]},
		id, n, c.limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), tryFlag, c.channel, pub,
	).Int64Slice()
	switch {
	case err != nil:
		r.err = err
	case len(v) < 2:
		r.err = fmt.Errorf("%w: acquire script returned %v", errBadReply, v)
	default:
		r.status, r.a = v[0], v[1]
		if len(v) > 2 {
			r.b = v[2]
		}
		if len(v) > 3 {
			r.seq = v[3]
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
	ctx, cancel := c.callCtx(context.Background(), d)
	defer cancel()
	pub, err := c.pubCmd(ctx)
	if err != nil {
		c.st.redisErrs.Add(1)
		return 0, err
	}
	res, err := releaseScript.Run(ctx, c.client,
		[]string{c.metaKey, rk[0], rk[1], rk[2], rk[3]},
		id, c.limit, c.kindName(), ms(c.cfg.lease), ms(c.cfg.quarantine), c.channel, pub,
	).Int64()
	if err != nil {
		c.st.redisErrs.Add(1)
	}
	return res, err
}

// startBackground counts a call that Close must wait for, unless Close
// has begun waiting (then it returns false and the call must not be made).
func (c *core) startBackground() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bgDone {
		return false
	}
	c.wg.Add(1)
	return true
}

func (c *core) endBackground() { c.wg.Done() }

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
	p.tok.Init((*owner)(p), -1, &p.gen)
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.mu.Lock()
	p.deadline = sent.Add(c.cfg.validity())
	if c.cfg.maxHold > 0 {
		p.holdUntil = time.Now().Add(c.cfg.maxHold)
		if p.holdUntil.Before(p.deadline) {
			p.deadline = p.holdUntil
		}
	}
	p.mu.Unlock()

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		p.cancel(ErrClosed)
		c.cleanupAsync(rk, id)
		return nil
	}
	p.due = sent.Add(c.cfg.refreshEvery)
	c.permits[id] = p
	c.planLocked(p.due)
	p.mu.Lock()
	p.timer = time.AfterFunc(time.Until(p.deadline), p.onTimer)
	p.mu.Unlock()
	c.mu.Unlock()
	c.held.Add(n)
	c.st.acquired.Add(1)
	return p
}

// tryAcquire takes n units of bucket key if Redis grants them at once and no
// local waiter is ahead. It makes one call.
func (c *core) tryAcquire(key string, n int64) (*Permit, bool) {
	if c.check(n) != nil {
		return nil, false
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.st.rejected.Add(1)
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
	r := c.runAcquire(context.Background(), rk, id, n, true) // bounded by one margin
	switch {
	case r.err != nil:
		c.st.redisErrs.Add(1)
		c.cleanupAsync(rk, id) // the outcome is unknown
		return nil, false
	case r.status == stMismatch:
		c.st.rejected.Add(1)
		return nil, false
	case r.status != stGranted:
		return nil, false
	case time.Since(r.sent) > c.cfg.margin():
		c.st.late.Add(1)
		c.cleanupAsync(rk, id)
		return nil, false
	}
	p := c.grant(rk, id, n, r.a, r.sent)
	return p, p != nil
}

// close refuses later acquires, sends the waiters away with ErrClosed, ends
// every permit out (cause ErrClosed; their leases are left to run out),
// waits for the waiters, the background calls and the refresher, and leaves
// the hub. Every call in flight ends within a third of the lease, and every
// call begun after Close started within one margin of its start (see
// callCtx).
func (c *core) close() {
	c.closeOnce.Do(func() {
		by := time.Now().Add(c.cfg.margin())
		c.closeBy.Store(&by)
		c.mu.Lock()
		c.closed = true
		close(c.done)
		var drained chan struct{}
		if c.nwait > 0 {
			drained = make(chan struct{})
			c.drained = drained
		}
		c.mu.Unlock()
		if drained != nil {
			<-drained // waiters leave at once: their calls go on in wg
		}
		// The waiters are gone, so every grant has registered its permit
		// (or, seeing closed, released it), and no background call starts
		// after this.
		c.mu.Lock()
		c.bgDone = true
		out := make([]*Permit, 0, len(c.permits))
		for _, p := range c.permits {
			out = append(out, p)
		}
		c.mu.Unlock()
		for _, p := range out {
			p.end(ErrClosed, nil)
		}
		c.kickRefresher()
		c.wg.Wait()
		c.hub.leave(c.channel, by)
		<-c.refDone
	})
}

func (c *core) stats() Stats {
	c.mu.Lock()
	waiters, keys := c.nwait, len(c.lines)
	c.mu.Unlock()
	return Stats{
		Name:           c.name,
		Limit:          c.limit,
		Held:           c.held.Load(),
		Waiters:        waiters,
		Keys:           keys,
		Acquired:       c.st.acquired.Load(),
		Released:       c.st.released.Load(),
		Cancelled:      c.st.cancelled.Load(),
		Rejected:       c.st.rejected.Load(),
		DoubleReleases: c.st.doubleRel.Load(),
		LeasesLost:     c.st.lost.Load(),
		LeasesExpired:  c.st.expired.Load(),
		LateReplies:    c.st.late.Load(),
		RedisErrors:    c.st.redisErrs.Load(),
		Handoffs:       c.st.handoffs.Load(),
		Polls:          c.st.polls.Load(),
		StaleHandovers: c.st.stale.Load(),
		MaxHolds:       c.st.maxHold.Load(),
	}
}

// Stats is a snapshot of one instance of a lane. Held, Waiters and Keys
// count this instance only; the counters count its calls since it was made.
type Stats struct {
	Name    string
	Limit   int64 // the limit, or the per-key limit of a Keyed
	Held    int64 // weight of this instance's permits that are out
	Waiters int   // callers of this instance waiting now (TryAcquire calls in flight included)
	Keys    int   // buckets with local waiters now (keys of a Keyed)

	Acquired       uint64
	Released       uint64
	Cancelled      uint64 // acquires ended by their context
	Rejected       uint64 // acquires refused: bad weight, closed, limit mismatch, Redis error that retrying cannot fix
	DoubleReleases uint64 // Release calls that found the permit already released
	LeasesLost     uint64 // permits whose refresh found them gone
	LeasesExpired  uint64 // permits whose local deadline passed without a successful refresh
	LateReplies    uint64 // grants that came back too late to be used (asked again)
	RedisErrors    uint64 // failed Redis calls
	Handoffs       uint64 // grants handed over by a release, told by a pub/sub message
	Polls          uint64 // waits in the Redis queue that ended with no message: on the timer, or on a refresh that found the waiter granted
	StaleHandovers uint64 // hand-over messages ignored: made for an earlier queue entry of the waiter, which expired
	MaxHolds       uint64 // permits ended by WithMaxHold
}

func (s Stats) laneStats(k lanequeue.Kind) lanequeue.LaneStats {
	return lanequeue.LaneStats{
		Name: s.Name, Kind: k, Capacity: s.Limit, Held: s.Held, Waiters: s.Waiters, Keys: s.Keys,
		Acquired: s.Acquired, Released: s.Released, Cancelled: s.Cancelled, Rejected: s.Rejected,
	}
}

// retryable tells a failure worth another try (the network, a server busy,
// loading or failing over) from one that will not go away: an error reply
// such as OOM or NOPERM, a reply the scripts cannot have sent, or a client
// that has been closed.
func retryable(err error) bool {
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, errBadReply) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK", "NOREPLICAS", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// errBadReply marks a reply that the scripts cannot have sent: retrying
// would not change it.
var errBadReply = errors.New("redislane: malformed script reply")

// nextBackoff doubles a retry delay, within [minWait, maxWait].
func nextBackoff(d time.Duration) time.Duration { return min(max(2*d, minWait), maxWait) }

// jitter spreads d over [0.75d, 1.25d).
func jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
}

// newID returns a permit id: 130 random bits, unique across the fleet.
func newID() string { return crand.Text() }
