package redislane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/semaphore"
)

// WithQuota makes a [Weighted] lease the lane's capacity in blocks of
// block permits and grant from the blocks it holds in process, without a
// Redis call per grant. A block is an ordinary permit of the lane, of
// weight block, taken, refreshed and released as any other; so blocks
// are carved from the capacity and the fleet never exceeds it. See the
// package doc (Quota leasing) for what it gives up and its bounds.
//
// block must be at least 1, at most the capacity, and divide it (a
// remainder could never be leased), and the capacity plus a block must stay
// within [semaphore.MaxCapacity] (an instance grants from a local semaphore
// of a block more than the blocks it holds); an Acquire with quota takes at most
// block permits at once ([ErrTooHeavy] above). Only [NewWeighted] takes
// it, and not with [WithMaxHold] (which would bound the blocks, not the
// permits granted from them): other uses are refused with an error
// wrapping [ErrInvalidConfig].
func WithQuota(block int64) Option { return func(c *config) { c.quota, c.quotaSet = block, true } }

// quotaReturnEvery is the return interval of quota leasing: an instance
// gives back the blocks it did not use at any time during one interval.
const quotaReturnEvery = 100 * time.Millisecond

// errQuotaOnly refuses WithQuota on a lane that does not take it.
func errQuotaOnly(kind string) error {
	return fmt.Errorf("%w: WithQuota applies to a Weighted only, not to a %s", ErrInvalidConfig, kind)
}

// checkQuota checks a Weighted's WithQuota against its capacity.
func checkQuota(cfg config, capacity int64) error {
	if !cfg.quotaSet {
		return nil
	}
	switch b := cfg.quota; {
	case b < 1 || b > capacity:
		return fmt.Errorf("%w: quota block %d out of range [1, %d] (the capacity)", ErrInvalidConfig, b, capacity)
	case capacity%b != 0:
		return fmt.Errorf("%w: quota block %d does not divide the capacity %d (the remainder could never be leased)", ErrInvalidConfig, b, capacity)
	case capacity > semaphore.MaxCapacity-b:
		return fmt.Errorf("%w: quota block %d with capacity %d: the instance's local semaphore holds a block more than the capacity, which must stay within %d (semaphore.MaxCapacity)", ErrInvalidConfig, b, capacity, int64(semaphore.MaxCapacity))
	case cfg.maxHold > 0:
		return fmt.Errorf("%w: WithQuota takes no WithMaxHold (it would bound the blocks, not the permits granted from them)", ErrInvalidConfig)
	}
	return nil
}

// quota is the leasing of a Weighted's capacity in blocks: the blocks held
// (fleet permits of weight block) and the local semaphore that grants from
// them. The local semaphore's capacity is block (a base permit, held until
// Close, keeps it so, so that no waiter is ever too heavy for it) plus
// block per block held: a block leased raises it, a block returned or
// lapsed lowers it (a lapse possibly below the units out, which then come
// back to nobody until their holders release).
type quota struct {
	c     *core
	block int64
	max   int // blocks the capacity holds
	sem   *semaphore.Weighted
	base  semaphore.Permit

	pool  atomic.Pointer[pool]      // the current generation of local grants
	dl    atomic.Pointer[time.Time] // the earliest deadline of the blocks held; nil: none held
	fence atomic.Int64              // the fence of the newest block
	inuse atomic.Int64              // units granted locally and not released
	peak  atomic.Int64              // the most inuse since the last tick
	want  atomic.Int64              // local acquires waiting
	asked atomic.Bool               // a local acquire waited since the last tick
	err   atomic.Pointer[error]

	kick     chan struct{} // wakes the loop; buffered 1
	done     chan struct{} // closed by close
	loopDone chan struct{}

	mu      sync.Mutex // protects the fields below and orders the sem's capacity changes
	closed  bool
	blocks  []*quotaBlock
	lapses  sync.WaitGroup // lapse handlers at work (Add under mu while !closed)
	closing sync.Once
}

// quotaBlock is a block held: a fleet permit of weight block.
type quotaBlock struct {
	p    *Permit
	stop func() bool // stops the watch of p's context
}

// pool is a generation of local grants: every local permit's context
// derives from the pool current at its grant, and a lapsed block ends the
// pool. The units of a lapsed block cannot be told from the others' (the
// local semaphore does not say which block a grant came from), so every
// permit granted while it was held loses its lease with it: more than
// needed, never less.
type pool struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	dead   atomic.Bool
	endMu  sync.Mutex
	endAt  time.Time // when it ended
}

func newPool() *pool {
	pl := &pool{}
	pl.ctx, pl.cancel = context.WithCancelCause(context.Background())
	return pl
}

// end ends the pool with cause (before the cancel, dead is set, so that a
// grant that checks dead after it derived its context never escapes).
func (pl *pool) end(cause error) {
	pl.endMu.Lock()
	if pl.endAt.IsZero() {
		pl.endAt = time.Now()
	}
	pl.endMu.Unlock()
	pl.dead.Store(true)
	pl.cancel(cause)
}

func newQuota(c *core, block int64) *quota {
	q := &quota{
		c:        c,
		block:    block,
		max:      int(c.capacity / block),
		sem:      semaphore.New(block),
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	q.base, _ = q.sem.TryAcquire(block) // a fresh semaphore: it cannot fail
	q.pool.Store(newPool())
	go q.loop()
	return q
}

func (q *quota) poke() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// acquire takes n units from the blocks held, waiting in the local FIFO
// line while the loop leases more.
func (q *quota) acquire(ctx context.Context, n int64) (*Permit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case n <= 0:
		return nil, ErrInvalidWeight
	case n > q.block:
		return nil, ErrTooHeavy
	}
	for {
		pl := q.pool.Load()
		sp, ok := q.sem.TryAcquire(n)
		if !ok {
			q.want.Add(1)
			q.asked.Store(true)
			q.poke()
			var err error
			sp, err = q.sem.Acquire(ctx, n)
			if q.want.Add(-1) == 0 {
				q.poke()
			}
			if err != nil {
				if e := q.err.Load(); e != nil && ctx.Err() != nil {
					return nil, fmt.Errorf("%w (last error leasing a block: %w)", err, *e)
				}
				return nil, err
			}
		}
		if p := q.wrap(sp, pl); p != nil {
			return p, nil
		}
		// A block lapsed under the grant: its units may be the lapsed
		// block's. Give them back and ask again.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// tryAcquire takes n units from the blocks held, or, if they are short
// and nobody waits, leases one block with one call and tries again.
func (q *quota) tryAcquire(n int64) (*Permit, bool) {
	if n <= 0 || n > q.block {
		return nil, false
	}
	for i := 0; ; i++ {
		pl := q.pool.Load()
		if sp, ok := q.sem.TryAcquire(n); ok {
			p := q.wrap(sp, pl)
			return p, p != nil
		}
		if i > 0 || q.want.Load() > 0 {
			return nil, false
		}
		bp, ok := q.c.tryAcquire("", q.block)
		if !ok {
			return nil, false
		}
		q.add(bp)
	}
}

// wrap makes the local permit of sp, granted while pl was current, or
// gives sp back and returns nil if pl has ended meanwhile.
func (q *quota) wrap(sp semaphore.Permit, pl *pool) *Permit {
	n := sp.Weight()
	if pl.dead.Load() {
		sp.Release()
		return nil
	}
	// Its context derives from pl's when first asked for (Context), so a
	// pool that ends after this check ends it all the same.
	p := &Permit{c: q.c, n: n, fence: q.fence.Load(), q: q, pool: pl, local: sp}
	p.tok.Init((*localOwner)(p), -1, &p.gen)
	u := q.inuse.Add(n)
	for pk := q.peak.Load(); u > pk && !q.peak.CompareAndSwap(pk, u); pk = q.peak.Load() {
	}
	return p
}

// deadline is a local permit's Deadline: the earliest of the blocks' while
// its pool lasts, the end of its pool after.
func (q *quota) deadline(pl *pool) time.Time {
	if pl.dead.Load() {
		pl.endMu.Lock()
		defer pl.endMu.Unlock()
		return pl.endAt
	}
	if dl := q.dl.Load(); dl != nil {
		return *dl
	}
	return time.Now()
}

// blocksMoved keeps q.dl, the earliest deadline of the blocks held, after
// a block came, went, or its deadline moved: read by every local permit's
// Deadline, it is computed here, not there.
func (q *quota) blocksMoved() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.blocksMovedLocked()
}

func (q *quota) blocksMovedLocked() {
	var dl time.Time
	for _, b := range q.blocks {
		if d := b.p.Deadline(); dl.IsZero() || d.Before(dl) {
			dl = d
		}
	}
	if dl.IsZero() {
		q.dl.Store(nil)
		return
	}
	q.dl.Store(&dl)
}

// add takes bp, a block just leased, into the local capacity; after Close
// it gives it back.
func (q *quota) add(bp *Permit) {
	b := &quotaBlock{p: bp}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		bp.Release()
		return
	}
	q.blocks = append(q.blocks, b)
	bp.mu.Lock()
	bp.moved = q.blocksMoved
	bp.mu.Unlock()
	q.blocksMovedLocked()
	q.fence.Store(bp.Fence())
	b.stop = context.AfterFunc(bp.Context(), func() { q.lapsed(b) })
	q.sem.SetCapacity(q.sem.Capacity() + q.block)
	q.mu.Unlock()
}

// lapsed runs when a block's context ends. A block that the instance
// returned, or that Close took, is gone from q.blocks by then; any other
// lapsed (its lease expired or was lost): its units leave the local
// capacity first, then a new pool takes the grants to come, then the old
// pool ends, cancelling every permit granted from it with the block's
// cause. Last, the block is released (what Redis may still hold of it).
func (q *quota) lapsed(b *quotaBlock) {
	q.mu.Lock()
	i := slices.Index(q.blocks, b)
	if i < 0 || q.closed {
		q.mu.Unlock()
		return
	}
	q.blocks = slices.Delete(q.blocks, i, i+1)
	q.blocksMovedLocked()
	q.sem.SetCapacity(q.sem.Capacity() - q.block)
	old := q.pool.Load()
	q.pool.Store(newPool())
	q.lapses.Add(1)
	q.mu.Unlock()
	defer q.lapses.Done()
	old.end(context.Cause(b.p.Context()))
	b.p.Release()
	q.poke() // the waiters may need another block
}

// loop leases blocks while local acquires wait, and returns the blocks
// left idle for a whole return interval.
func (q *quota) loop() {
	defer close(q.loopDone)
	tick := time.NewTicker(quotaReturnEvery)
	defer tick.Stop()
	var (
		growing  bool
		cancel   context.CancelFunc
		grown    = make(chan error, 1)
		holdOff  bool // a lease failed: not again before the next tick
		nblocks  = func() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.blocks) }
		stopGrow = func() {
			if growing {
				cancel()
			}
		}
	)
	for {
		if !growing && !holdOff && q.want.Load() > 0 && nblocks() < q.max {
			cancel, growing = q.grow(grown), true
		}
		select {
		case <-q.done:
			stopGrow()
			if growing {
				<-grown
			}
			return
		case <-q.kick:
		case err := <-grown:
			growing = false
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				q.err.Store(&err)
				holdOff = true
			}
		case <-tick.C:
			holdOff = false
			if q.want.Load() == 0 && !q.asked.Swap(false) {
				stopGrow() // nobody asked for a whole interval
			}
			q.returnIdle()
		}
	}
}

// grow leases one block in a goroutine of its own, which sends the
// outcome on grown; the block, if granted, is added before.
func (q *quota) grow(grown chan<- error) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		p, err := q.c.acquire(ctx, "", q.block)
		if err == nil {
			q.add(p)
		}
		grown <- err
	}()
	return cancel
}

// returnIdle gives back the blocks whose units were not used at any time
// since the last tick, when no local acquire waits.
func (q *quota) returnIdle() {
	peak := q.peak.Swap(q.inuse.Load())
	if q.want.Load() > 0 {
		return
	}
	q.mu.Lock()
	spare := int64(len(q.blocks))*q.block - peak
	q.mu.Unlock()
	for ; spare >= q.block; spare -= q.block {
		sp, ok := q.sem.TryAcquire(q.block) // only if free and nobody waits
		if !ok {
			return
		}
		q.mu.Lock()
		if q.closed || len(q.blocks) == 0 {
			q.mu.Unlock()
			sp.Release()
			return
		}
		b := q.blocks[0] // the oldest
		q.blocks = q.blocks[1:]
		q.blocksMovedLocked()
		q.sem.SetCapacity(q.sem.Capacity() - q.block)
		q.mu.Unlock()
		sp.Release() // the capacity went down by block: it frees nothing
		b.stop()
		b.p.Release()
	}
}

// close sends the local waiters away, ends every local permit (cause
// ErrClosed), gives every block back to Redis (their releases in
// parallel, within one release wait), then closes the core.
func (q *quota) close() {
	q.closing.Do(func() {
		q.mu.Lock()
		q.closed = true
		blocks := q.blocks
		q.blocks = nil
		q.blocksMovedLocked()
		q.mu.Unlock()
		close(q.done)
		<-q.loopDone
		q.sem.Close()
		q.pool.Load().end(ErrClosed)
		var wg sync.WaitGroup
		for _, b := range blocks {
			b.stop()
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.p.Release()
			}()
		}
		wg.Wait()
		q.lapses.Wait()
		q.c.close()
	})
}

// localOwner is a permit granted from the blocks, as the owner of its
// token.
type localOwner Permit

func (o *localOwner) ReleaseToken(_ *permit.Token, n int64) {
	p := (*Permit)(o)
	p.endCtx(ErrReleased) // before the units go to the next holder
	p.q.inuse.Add(-n)
	p.local.Release()
}

func (o *localOwner) CountDoubleRelease(*permit.Token) { o.c.st.doubleRel.Add(1) }
