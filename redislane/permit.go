package redislane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/semaphore"
)

// Permit is a grant of permits of a Redis lane, held under a lease that the
// instance that granted it keeps refreshing until Release.
//
// A Permit is owned by exactly one party at a time; it may be handed to
// another goroutine. Release gives it back once: the first call returns
// true, every later one false.
//
// The lease can end before Release: when the holder cannot reach Redis for
// longer than the lease allows, when its process was paused past the lease,
// when Redis lost its state, when the permit was held for the longest hold
// ([WithMaxHold]), or when the lane was closed. The permit's
// [Permit.Context] is then cancelled, with [ErrLeaseExpired],
// [ErrLeaseLost], [ErrMaxHold] or [ErrClosed] as its cause, and the holder
// must stop using what the permit protects. The permit should still be
// released.
//
// The zero Permit holds nothing, as package semaphore's zero Permit: its
// Release returns false (and is not counted anywhere), Weight and Fence
// return 0, Deadline returns the zero time, and Context returns a context
// that is never cancelled.
type Permit struct {
	tok   permit.Token
	gen   atomic.Uint64
	c     *core
	id    string
	rk    [4]string
	n     int64
	fence int64
	since int64 // WithHistograms: when it was granted (core.clk.Stamp)

	// A permit granted from quota blocks (WithQuota): its quota, the pool
	// it was granted in and the local permit behind it; nil and zero for a
	// permit held in Redis.
	q     *quota
	pool  *pool
	local semaphore.Permit

	// ctx is made on the first call of Context (most permits are released
	// unasked, and a context each would cost every grant); cause is the
	// permit's end, once it ended, for a context made after. Guarded by
	// ctxMu.
	ctxMu  sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	cause  error

	// Guarded by c.mu: when the refresher should next extend the lease, and
	// the permit's place in the heap of deadlines (see expiry).
	due    time.Time
	expAt  time.Time // the deadline it went into the heap with
	expIdx int       // its index in the heap; checked against the heap's entry, so a stale one (or 0 out of it) is harmless

	mu        sync.Mutex // protects the fields below
	state     int
	deadline  time.Time
	holdUntil time.Time // WithMaxHold: the end of the longest hold (zero: none)
	// moved, if not nil, is called (without p.mu) after the deadline
	// moved: a quota block's, to keep its quota's earliest deadline.
	moved func()
}

const (
	active   = iota // the lease is kept
	ended           // lease lost or expired; not yet released
	released        // released
)

// Release gives the permit back. It returns true the first time it is
// called, whichever copy of the lane handle it goes through (see
// [PermitOf]), and false ever after (counted in [Stats].DoubleReleases).
//
// Release first stops refreshing the lease and cancels the permit's
// context (cause [ErrReleased], unless it had ended before), then removes
// the permit from Redis with one call, which hands the permits to the next
// waiter; releases of the instance's permits made while such a call of the
// bucket is in flight wait for it and go together in the next call. Release
// waits for the call that carries its permit a fifth of the lease, and at
// most 250 ms, and returns by then whatever Redis does; each call has that
// deadline, and one that did not get through is made once more in the
// background (it is idempotent), for at most a fifth of the lease. If Redis
// cannot be reached, the permits come back when the lease runs out. After
// the lane's Close, Release makes no call: the lease runs out by itself.
// On the zero Permit it returns false and does nothing.
func (p *Permit) Release() bool {
	if p.c == nil { // the zero Permit: no lane granted it
		return false
	}
	return p.handle().Release()
}

// Weight returns the number of permits the permit holds.
func (p *Permit) Weight() int64 { return p.n }

// Fence returns the permit's fencing token: it is larger than the token of
// every permit of the same lane granted before it, by any instance, also
// after Redis lost its state (it is then seeded from the server's clock in
// microseconds). Pass it along to the resource the permit protects, which
// must reject any request carrying a token smaller than the largest it has
// seen; that makes a holder that was paused past its lease harmless.
func (p *Permit) Fence() int64 { return p.fence }

// Context returns a context that is cancelled when the permit stops being
// valid: on Release (cause [ErrReleased]), when a refresh finds the permit
// gone ([ErrLeaseLost]), when its local deadline passes with no
// successful refresh ([ErrLeaseExpired]), when it has been held for the
// longest hold ([ErrMaxHold], see [WithMaxHold]), or when the lane is
// closed ([ErrClosed]). Read the cause with [context.Cause]. It does not
// derive from the context given to Acquire.
func (p *Permit) Context() context.Context {
	p.ctxMu.Lock()
	defer p.ctxMu.Unlock()
	if p.ctx != nil {
		return p.ctx
	}
	parent := context.Background()
	if p.pool != nil && p.cause == nil {
		parent = p.pool.ctx // a permit granted from quota blocks ends with its pool
	}
	p.ctx, p.cancel = context.WithCancelCause(parent)
	if p.cause != nil {
		p.cancel(p.cause)
	}
	return p.ctx
}

// endCtx ends the permit's context with cause (the first cause counts),
// or, if none was made yet, records cause for the one Context makes. A
// permit granted from quota blocks whose pool ended first keeps the
// pool's cause, as a context derived from the pool's would.
func (p *Permit) endCtx(cause error) {
	p.ctxMu.Lock()
	ctx, cancel := p.ctx, p.cancel
	if ctx == nil && p.cause == nil {
		p.cause = cause
		if p.pool != nil && p.pool.ctx.Err() != nil {
			p.cause = context.Cause(p.pool.ctx)
		}
	}
	p.ctxMu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// Deadline returns the local time until which the lease is known to hold:
// the send time of the last successful grant or refresh call, plus the
// lease, minus a fifth of it as a margin for reply time and clock rate.
// It moves forward with each refresh and stops moving when the lease ends;
// after a loss detected by a refresh it is the time of the detection. With
// [WithMaxHold] it is never later than the end of the longest hold.
func (p *Permit) Deadline() time.Time {
	if p.q != nil {
		return p.q.deadline(p.pool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deadline
}

func (p *Permit) handle() semaphore.Permit { return semaphore.Permit(permit.Make(&p.tok, 0, p.n)) }

// PermitOf returns the Redis permit behind a permit returned by a lane of
// this package ([AsLane], [AsKeyedLane]), for its Fence and Context, or nil
// for any other permit. Releasing either one releases both.
func PermitOf(sp semaphore.Permit) *Permit {
	t := permit.TokenOf(permit.Permit(sp))
	if t == nil {
		return nil
	}
	switch o := permit.OwnerOf(t).(type) {
	case *owner:
		return (*Permit)(o)
	case *localOwner:
		return (*Permit)(o)
	}
	return nil
}

// extend moves the deadline forward after a refresh sent at sent found the
// permit held.
func (p *Permit) extend(sent time.Time) {
	dl := sent.Add(p.c.cfg.validity())
	p.mu.Lock()
	if !p.holdUntil.IsZero() && p.holdUntil.Before(dl) {
		dl = p.holdUntil
	}
	if p.state != active || !dl.After(p.deadline) {
		p.mu.Unlock()
		return
	}
	p.deadline = dl // the heap of deadlines finds it when it comes to p (see expiry)
	moved := p.moved
	p.mu.Unlock()
	if moved != nil {
		moved()
	}
}

// lose ends the lease after a refresh found the permit gone.
func (p *Permit) lose() { p.end(ErrLeaseLost, &p.c.st.lost) }

// expired ends the lease whose deadline passed without a refresh: expire
// found it so, set its state and stopped refreshing it.
func (p *Permit) expired() {
	p.mu.Lock()
	maxHold := !p.holdUntil.IsZero() && !p.deadline.Before(p.holdUntil)
	p.mu.Unlock()
	if maxHold {
		p.c.st.maxHold.Add(1) // before the cancel, so that whoever sees it sees the count
		p.endCtx(ErrMaxHold)
	} else {
		p.c.st.expired.Add(1)
		p.endCtx(ErrLeaseExpired)
	}
}

// end ends the lease with cause (at Close, or after a refresh found the
// permit gone): it is no longer refreshed, and runs out in Redis. count, if
// not nil, counts it, before the cancel, so that whoever sees the cancel
// sees the count.
func (p *Permit) end(cause error, count *atomic.Uint64) {
	p.mu.Lock()
	if p.state != active {
		p.mu.Unlock()
		return
	}
	p.state = ended
	if now := time.Now(); now.Before(p.deadline) {
		p.deadline = now
	}
	moved := p.moved
	p.mu.Unlock()
	if moved != nil {
		moved() // before the cancel: whoever sees it sees the deadline
	}
	if count != nil {
		count.Add(1)
	}
	p.endCtx(cause)
	p.c.forget(p)
}

// owner is the permit as the owner of its token; its methods are called by
// the token's once-only Release.
type owner Permit

func (o *owner) ReleaseToken(_ *permit.Token, n int64) {
	p := (*Permit)(o)
	c := p.c
	p.mu.Lock()
	p.state = released
	p.mu.Unlock()
	c.forget(p) // stop refreshing first
	p.endCtx(ErrReleased)
	c.held.Add(-n)
	c.st.released.Add(1)
	if c.tm != nil {
		c.tm.Hold.Observe(c.clk.Stamp() - p.since)
	}
	if !c.startBackground() { // after Close: the lease runs out
		return
	}
	c.release(p.rk, p.id) // within releaseWait
	c.endBackground()
}

func (o *owner) CountDoubleRelease(*permit.Token) { o.c.st.doubleRel.Add(1) }
