package redislane

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/semaphore"
)

// Weighted is a weighted semaphore whose capacity is shared by every instance,
// in any process, that uses the same Redis and the same name.
//
// Instances may be made freely, one per process and name being the usual
// case; they must all use the same capacity (else acquires fail with
// [ErrCapacityMismatch]) and should use the same lease. A Weighted is safe for
// concurrent use. Close it to stop its goroutines.
type Weighted struct {
	c *core
	q *quota // WithQuota: the blocks and the local grants; nil otherwise
}

// NewWeighted returns the instance of the lane name, of capacity permits, on
// client (a single node, Sentinel or Cluster client). It makes no call to
// Redis: a wrong client shows at the first Acquire. It fails for a nil
// client, a client without ContextTimeoutEnabled (see the package doc), an
// empty name or one with a brace, a capacity below 1 or above
// [semaphore.MaxCapacity], or bad options (a [WithQuota] block that does
// not divide the capacity among them), with an error wrapping
// [ErrInvalidConfig].
func NewWeighted(client redis.UniversalClient, name string, capacity int64, opts ...Option) (*Weighted, error) {
	if cfg, err := newConfig(opts); err == nil && checkArgs(client, name, capacity) == nil {
		if err := checkQuota(cfg, capacity); err != nil {
			return nil, err
		}
	}
	c, err := newCore(client, name, false, capacity, opts)
	if err != nil {
		return nil, err
	}
	s := &Weighted{c: c}
	if c.cfg.quotaSet {
		s.q = newQuota(c, c.cfg.quota)
	}
	return s, nil
}

// Acquire takes n permits, waiting until they are free. On success it returns
// a [Permit] that the caller owns and must release once. It fails at once
// with [ErrInvalidWeight] for n <= 0, [ErrTooHeavy] for n above the capacity,
// [ErrClosed] after Close, and [ErrCapacityMismatch] when Redis holds the lane
// with another capacity.
//
// Waiting: callers of one instance wait in one local FIFO line, and only the
// first of them asks Redis, with one call that carries the requests of the
// callers behind it too and grants, after the first, those that fit in line
// order, up to the first that does not (see the package doc); in Redis, the
// first waiters of all instances wait in one FIFO queue, so a heavy request
// is not overtaken by lighter ones, and instances take turns. On a lane
// made [WithPriorities] or [WithFairShare], every caller waits in the
// Redis queue itself, placed by its [semaphore.Priority] and
// [semaphore.Group] (see "Priorities and fair share" in the package doc);
// a FIFO lane refuses an option that sets something, and an ordered one
// any but those it orders by (errors wrapping [ErrInvalidConfig]; nothing
// is taken). A waiter is woken by a pub/sub message when a
// release hands it the permits, and asks again after a hint from Redis
// (jittered, 5-250 ms) in case the message was lost. Calls that fail for a
// passing reason (the network, a server loading, busy or failing over) are
// retried with the same permit id, so a retry never grants twice, until ctx
// ends; other failures (an error reply such as OOM or NOPERM, a closed
// client) end Acquire at once with the error wrapped. The client must stay
// open until the lane is closed and its permits are released.
//
// Cancellation: when ctx ends, Acquire returns ctx.Err() at once (wrapping
// the last Redis error, if the last call failed), even with a call in
// flight (its own, or the first waiter's that carries its request); its
// place in the line goes to the next waiter, and whatever Redis granted or
// queued for it is released in the background. If ctx is already
// done, Acquire fails without calling Redis. A grant that races with the
// cancellation is released, never returned and lost.
//
// With [WithQuota], callers wait in the instance's local FIFO line for
// units of the blocks it holds, and the instance leases blocks while they
// wait; n may not exceed the block ([ErrTooHeavy]). See the package doc
// (Quota leasing).
func (s *Weighted) Acquire(ctx context.Context, n int64, opts ...semaphore.AcquireOption) (*Permit, error) {
	pl, err := s.c.placeOf(n, opts)
	if err != nil {
		s.c.st.rejected.Add(1)
		return nil, err
	}
	if s.q != nil {
		return s.q.acquire(ctx, n)
	}
	return s.c.acquireAt(ctx, "", n, pl)
}

// TryAcquire takes n permits if Redis grants them at once and no caller of
// this instance is waiting. It makes one call to Redis, with a timeout of a
// fifth of the lease, and never waits in a queue. If the call fails or its
// reply comes too late, the permits it may have been granted are given back
// in the background. With [WithQuota], it takes n units of the blocks held
// without a call; if they are short and no caller of the instance waits,
// it leases one block with one call and tries once more.
func (s *Weighted) TryAcquire(n int64) (*Permit, bool) {
	if s.q != nil {
		return s.q.tryAcquire(n)
	}
	return s.c.tryAcquire("", n)
}

// Do acquires n permits as Acquire does (with its options), runs fn, and
// releases them when fn returns or panics. fn's context ends when ctx ends
// or when the permit's lease ends; its cause then tells which. Do returns
// Acquire's error, or fn's.
func (s *Weighted) Do(ctx context.Context, n int64, fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	p, err := s.Acquire(ctx, n, opts...)
	if err != nil {
		return err
	}
	return p.run(ctx, fn)
}

// Cooldown closes the lane to new grants for every instance of the fleet
// until d from now on the Redis server's clock (a provider's retry time),
// unless it is closed until later already: a cooldown only ever extends.
// Waiters keep their place; an acquire whose context's deadline comes
// before the reopening fails at once with a [*LateError]; the lane
// reopens by itself. It returns the time until the lane reopens as Redis
// has it (later than d if another cooldown ends later); d <= 0 sets
// nothing and reads it. It makes one call, bounded by a fifth of the
// lease; see the package doc (Cooldown).
func (s *Weighted) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	return s.c.cooldown(ctx, d)
}

// Capacity returns the capacity. For the lane of a [Fleet], it is the
// fleet's limit as this instance last read it from Redis.
func (s *Weighted) Capacity() int64 { return s.c.limit() }

// Name returns the lane's name.
func (s *Weighted) Name() string { return s.c.name }

// Stats returns a snapshot of this instance.
func (s *Weighted) Stats() Stats { return s.c.stats() }

// Close refuses later acquires, sends the callers waiting away with
// [ErrClosed], and ends every permit of the instance still out: their
// contexts are cancelled with [ErrClosed] as the cause, their leases are no
// longer refreshed and run out in Redis within one lease of their last
// refresh (Release after Close is allowed, and makes no call). It returns
// when the waiters have left and the instance's goroutines and calls have
// ended: within a third of the lease plus 250 ms, whatever Redis does.
// Close does not close the Redis client.
//
// With [WithQuota], Close first gives every block back to Redis (after
// it ended the permits granted from them), so the fleet gets the units at
// once; that adds at most 250 ms to its bound.
func (s *Weighted) Close() {
	if s.q != nil {
		s.q.close()
		return
	}
	s.c.close()
}

// run runs fn under the permit, releasing it on every way out.
func (p *Permit) run(ctx context.Context, fn func(context.Context) error) error {
	defer p.Release()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pctx := p.Context()
	stop := context.AfterFunc(pctx, func() { cancel(context.Cause(pctx)) })
	defer stop()
	return fn(fctx)
}
