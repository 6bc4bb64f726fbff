package redislane_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// bucketKeys are the Redis keys of a Weighted lane's one bucket (holders,
// queue, expiries, weights).
func bucketKeys(name string) []string {
	b := "{lanes:" + name + "}:g:"
	return []string{b + "h", b + "q", b + "x", b + "d"}
}

// WithQuota is refused where it cannot work, with ErrInvalidConfig.
func TestQuotaRefusesBadSettings(t *testing.T) {
	rc := newClient(t, "127.0.0.1:1") // never dialled
	for _, tc := range []struct {
		what string
		mk   func() error
	}{
		{"block 0", func() error { _, err := redislane.NewWeighted(rc, "q", 4, redislane.WithQuota(0)); return err }},
		{"negative block", func() error { _, err := redislane.NewWeighted(rc, "q", 4, redislane.WithQuota(-1)); return err }},
		{"block above the capacity", func() error { _, err := redislane.NewWeighted(rc, "q", 4, redislane.WithQuota(5)); return err }},
		{"block not dividing the capacity", func() error { _, err := redislane.NewWeighted(rc, "q", 10, redislane.WithQuota(4)); return err }},
		{"capacity plus a block past MaxCapacity", func() error {
			_, err := redislane.NewWeighted(rc, "q", 100_000_000_000_000, redislane.WithQuota(50_000_000_000_000))
			return err
		}},
		{"capacity and block MaxCapacity", func() error {
			_, err := redislane.NewWeighted(rc, "q", semaphore.MaxCapacity, redislane.WithQuota(semaphore.MaxCapacity))
			return err
		}},
		{"with WithMaxHold", func() error {
			_, err := redislane.NewWeighted(rc, "q", 4, redislane.WithQuota(2), redislane.WithMaxHold(time.Second))
			return err
		}},
		{"on a Keyed", func() error { _, err := redislane.NewKeyed(rc, "q", 4, redislane.WithQuota(2)); return err }},
		{"on a Fleet", func() error { _, err := redislane.NewFleet(rc, "q", 4, redislane.WithQuota(2)); return err }},
		{"on a Tokens lane", func() error { _, err := redislane.NewTokens(rc, "q", 4, redislane.WithQuota(2)); return err }},
	} {
		assert.ErrorIs(t, tc.mk(), redislane.ErrInvalidConfig, tc.what)
	}
	s, err := redislane.NewWeighted(rc, "q", 4, redislane.WithQuota(2))
	require.NoError(t, err)
	defer s.Close()
	p, err := s.Acquire(testCtx(t), 3)
	failed(t, p, err, redislane.ErrTooHeavy, "a weight above the block")
}

// Four instances of one lane, each on a client of its own, lease blocks
// and grant from them (a fifth, without quota, takes a permit per call) to goroutines that take 1-3 units at a time. A
// checker counts the holders of every instance together, from each grant
// to its release or the end of its lease: the count never passes the
// limit. Fails with, for example, the base permit of the local semaphore
// left free (each instance grants a block more than it leased).
func TestQuotaFleetNeverExceedsLimit(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	const limit, block = 12, 3
	var insts []*redislane.Weighted
	for range 4 {
		insts = append(insts, newSem(t, srv.Addr, name, limit, redislane.WithQuota(block)))
	}
	insts = append(insts, newSem(t, srv.Addr, name, limit)) // and one without quota, a grant per call
	ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond)
	defer cancel()
	var (
		inUse, most atomic.Int64
		grants      atomic.Int64
		orc         oracle
		wg          sync.WaitGroup
	)
	for i, s := range insts {
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := int64(1 + (i+g)%3)
				for ctx.Err() == nil {
					p, err := s.Acquire(ctx, w)
					if err != nil {
						continue
					}
					start := redistest.Now()
					u := inUse.Add(w)
					for m := most.Load(); u > m && !most.CompareAndSwap(m, u); m = most.Load() {
					}
					time.Sleep(200 * time.Microsecond) // the work the permit protects
					inUse.Add(-w)
					orc.add(span{Start: start, End: endOf(p.Deadline()), W: w})
					require.NoError(t, p.Context().Err(), "a lease ended in a run without faults")
					p.Release()
					grants.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(limit), "holders counted fleet-wide")
	assert.LessOrEqual(t, maxInUse(orc.spans), int64(limit), "the oracle's weight in use")
	assert.Greater(t, grants.Load(), int64(100), "the fleet made grants")
}

// A block whose lease lapses (Redis lost its permit, or Redis was paused
// past the lease) ends the lease of every permit granted from the
// instance's blocks (cause ErrLeaseLost or ErrLeaseExpired), and its units
// leave the instance: once the fleet has handed them to another instance,
// the first grants none of them again. Fails with the pool not ended at a
// lapse (the holders' contexts are never cancelled), or with the local
// capacity kept after a lapse (the TryAcquire at the end grants units
// that the other instance holds).
func TestQuotaLapsedBlockEndsLocalHolders(t *testing.T) {
	for _, tc := range []struct {
		how   string
		lapse func(ctx context.Context, rc *redis.Client, name string) error
		cause error
	}{
		{"permit deleted", func(ctx context.Context, rc *redis.Client, name string) error {
			return rc.Del(ctx, bucketKeys(name)...).Err()
		}, redislane.ErrLeaseLost},
		{"Redis paused past the lease", func(ctx context.Context, rc *redis.Client, _ string) error {
			return rc.Do(ctx, "CLIENT", "PAUSE", 1200, "ALL").Err()
		}, redislane.ErrLeaseExpired},
	} {
		t.Run(tc.how, func(t *testing.T) {
			srv := startRedis(t)
			direct := newClient(t, srv.Addr)
			name := laneName(t)
			const lease = 300 * time.Millisecond
			a := newSem(t, srv.Addr, name, 4, redislane.WithQuota(2), redislane.WithLease(lease))
			other := newSem(t, srv.Addr, name, 4, redislane.WithLease(lease))
			ctx := testCtx(t, 10*time.Second)

			p1, err := a.Acquire(ctx, 1)
			require.NoError(t, err)
			p2, err := a.Acquire(ctx, 1) // from the same block
			require.NoError(t, err)
			require.NoError(t, tc.lapse(ctx, direct, name))

			for i, p := range []*redislane.Permit{p1, p2} {
				select {
				case <-p.Context().Done():
					assert.ErrorIs(t, context.Cause(p.Context()), tc.cause, "holder %d", i)
				case <-ctx.Done():
					t.Fatalf("holder %d still valid after its block lapsed", i)
				}
				assert.False(t, time.Now().Before(p.Deadline()), "holder %d's deadline passed with its lease", i)
			}
			// The fleet's units are free in Redis: the other instance takes all.
			all, err := other.Acquire(ctx, 4)
			require.NoError(t, err)
			defer all.Release()
			p1.Release()
			p2.Release()
			p, ok := a.TryAcquire(1)
			refused(t, p, ok, "a unit of the lapsed block granted again while another instance holds the whole limit")
		})
	}
}

// Close ends the permits granted from the blocks (cause ErrClosed) and
// gives every block back at once: another instance gets the whole limit
// with one TryAcquire, not a lease later. Fails with Close leaving the
// blocks to run out.
func TestQuotaCloseGivesEveryUnitBack(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 6,
		redislane.WithLease(10*time.Second), redislane.WithQuarantine(0), redislane.WithQuota(2))
	require.NoError(t, err)
	other := newSem(t, srv.Addr, name, 6)
	ctx := testCtx(t)
	var held []*redislane.Permit
	for range 3 {
		p, err := s.Acquire(ctx, 2)
		require.NoError(t, err)
		held = append(held, p)
	}
	s.Close()
	for i, p := range held {
		assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrClosed, "holder %d", i)
		assert.True(t, p.Release(), "the first Release after Close")
	}
	p, ok := other.TryAcquire(6)
	require.True(t, ok, "the closed instance's blocks are still held in Redis")
	p.Release()
	_, err = s.Acquire(ctx, 1)
	assert.ErrorIs(t, err, redislane.ErrClosed)
}

// quotaIdleBound is the documented bound on how long units left idle in
// one instance keep another instance waiting: two return intervals (100
// ms each) and a wake-up (a pub/sub message, or a poll at most 250 ms
// later), with slack for a loaded machine.
const quotaIdleBound = 2*100*time.Millisecond + 250*time.Millisecond + 2*time.Second

// Blocks an instance no longer uses go back to Redis, where an instance
// waiting for them gets them within the documented bound, well inside the
// lease (10 s here) that would return them otherwise. Fails with idle
// blocks kept (the waiter's deadline passes).
func TestQuotaIdleBlocksGoToWaitingInstance(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	lease := redislane.WithLease(10 * time.Second)
	a := newSem(t, srv.Addr, name, 4, redislane.WithQuota(2), lease)
	b := newSem(t, srv.Addr, name, 4, redislane.WithQuota(2), lease)
	ctx := testCtx(t)
	p1, err := a.Acquire(ctx, 2)
	require.NoError(t, err)
	p2, err := a.Acquire(ctx, 2)
	require.NoError(t, err) // a holds the whole limit in two blocks
	p1.Release()
	p2.Release()

	wctx, cancel := context.WithTimeout(ctx, quotaIdleBound)
	defer cancel()
	var got []*redislane.Permit
	for range 2 {
		p, err := b.Acquire(wctx, 2)
		require.NoError(t, err, "units idle in another instance not had within %v", quotaIdleBound)
		got = append(got, p)
	}
	for _, p := range got {
		p.Release()
	}
}

// A Weighted with quota in a lanequeue.Queue grants from its blocks too:
// its lane's heaviest weight is the block, and PermitOf finds the Redis
// permit (a local one) behind the queue's permit.
func TestQuotaAsLane(t *testing.T) {
	srv := startRedis(t)
	s := newSem(t, srv.Addr, laneName(t), 4, redislane.WithQuota(2))
	l := redislane.AsLane[string](s)
	assert.Equal(t, int64(2), l.MaxWeight())
	sp, err := l.Acquire(testCtx(t), "k", 2)
	require.NoError(t, err)
	p := redislane.PermitOf(sp)
	require.NotNil(t, p, "PermitOf of a quota lane's permit")
	assert.Equal(t, int64(2), p.Weight())
	require.NoError(t, p.Context().Err())
	assert.True(t, sp.Release())
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrReleased)
	assert.False(t, p.Release(), "released through the queue's permit already")
}

// A queue call with a number reaches a lane through AcquireAt and
// TryAcquireAt; a Weighted with quota takes those from its blocks
// too (a global lane orders by no number), so a weight above the block is
// refused there as in Acquire, not granted per call in Redis.
func TestQuotaAsLaneNumberedCallsUseTheBlocks(t *testing.T) {
	srv := startRedis(t)
	s := newSem(t, srv.Addr, laneName(t), 4, redislane.WithQuota(2))
	l := redislane.AsLane[string](s)
	nl, ok := l.(interface {
		AcquireAt(ctx context.Context, key string, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, error)
		TryAcquireAt(key string, n int64, opts ...semaphore.AcquireOption) (semaphore.Permit, bool)
	})
	require.True(t, ok, "the lane takes numbered calls")
	sp, err := nl.AcquireAt(testCtx(t), "k", 3, semaphore.Sequence(7))
	failed(t, sp, err, redislane.ErrTooHeavy, "a numbered call heavier than the block")
	sp, ok = nl.TryAcquireAt("k", 3, semaphore.Sequence(8))
	refused(t, sp, ok, "a numbered try heavier than the block")
	sp, err = nl.AcquireAt(testCtx(t), "k", 2, semaphore.Sequence(9))
	require.NoError(t, err)
	assert.True(t, sp.Release())
}

// A permit granted from the blocks has the earliest deadline of the blocks
// held, which moves forward as the refresher extends them; it is kept
// beside the blocks, not read from them on each Deadline, so this checks
// that each refresh reaches it. Fails with the blocks' refresh not telling
// their quota (the permit's deadline then stays at the block's first).
func TestQuotaPermitDeadlineFollowsBlockRefresh(t *testing.T) {
	srv := startRedis(t)
	const lease = 300 * time.Millisecond
	// One block is the whole capacity: no second block comes, whose
	// arrival would read the first's deadline afresh.
	a := newSem(t, srv.Addr, laneName(t), 2, redislane.WithQuota(2), redislane.WithLease(lease))
	ctx := testCtx(t, 10*time.Second)
	p, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	defer p.Release()
	first := p.Deadline()
	require.True(t, first.After(time.Now().Add(-lease)), "a fresh permit's deadline is within a lease of now: %v", time.Until(first))
	waitFor(t, 5*time.Second, "the permit's deadline to move with its block's refresh", func() bool {
		return p.Deadline().After(first)
	})
	assert.NoError(t, p.Context().Err(), "the permit ended while its block was refreshed")
}
