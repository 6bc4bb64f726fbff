package redislane_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
)

// fleetOf returns n instances of one Weighted lane of capacity, each on a
// client of its own (as n replicas would be), with the lane created (and
// so past its quarantine, which is off).
func fleetOf(t *testing.T, addr string, n int, capacity int64) []*redislane.Weighted {
	t.Helper()
	name := laneName(t)
	out := make([]*redislane.Weighted, n)
	for i := range out {
		s, err := redislane.NewWeighted(newClient(t, addr), name, capacity,
			redislane.WithLease(handoverLease), redislane.WithQuarantine(0))
		require.NoError(t, err)
		t.Cleanup(s.Close)
		out[i] = s
	}
	p, err := out[0].Acquire(testCtx(t), 1)
	require.NoError(t, err)
	p.Release()
	return out
}

// closedUntil reads the lane's "closed until" (ms of the server's clock).
func closedUntil(t *testing.T, rc *redis.Client, name string) int64 {
	t.Helper()
	v, err := rc.HGet(context.Background(), "{lanes:"+name+"}:meta", "cu").Result()
	require.NoError(t, err)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// requireCoolRefusal fails the test unless err is a cooldown refusal that
// came before ctx ended, with a retry time of at least atLeast.
func requireCoolRefusal(t *testing.T, ctx context.Context, err error, atLeast time.Duration) {
	t.Helper()
	var ce *redislane.LateError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, redislane.ErrCoolingDown)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, ctx.Err(), "refused at once, not at the deadline")
	assert.GreaterOrEqual(t, ce.RetryAfter, atLeast, "the retry time says when the lane reopens")
}

// TestCooldownIsObeyedByEveryInstance: a cooldown set by one replica
// closes the lane for the others (their TryAcquire fails, their callers
// whose deadline comes first fail at once with the retry time); a
// shorter cooldown from another replica never shortens it; a waiter with
// time to wait keeps its place, and a release does not hand it the units.
func TestCooldownIsObeyedByEveryInstance(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	f := fleetOf(t, srv.Addr, 3, 4)
	a, b, c := f[0], f[1], f[2]
	ctx := testCtx(t)
	held, err := a.Acquire(ctx, 1) // released during the cooldown
	require.NoError(t, err)
	defer held.Release()

	left, err := a.Cooldown(ctx, time.Minute)
	require.NoError(t, err)
	require.Greater(t, left, 50*time.Second)
	require.LessOrEqual(t, left, time.Minute)
	cu := closedUntil(t, rc, a.Name())

	// A shorter cooldown, from another replica, does not shorten it.
	left, err = b.Cooldown(ctx, time.Second)
	require.NoError(t, err)
	assert.Greater(t, left, 50*time.Second, "b reads the longer cooldown back")
	assert.Equal(t, cu, closedUntil(t, rc, a.Name()), "a shorter cooldown never shortens the lane's")

	p, ok := c.TryAcquire(1)
	refused(t, p, ok, "c is granted during a's cooldown")

	// c's caller whose deadline comes first fails at once, though c never
	// heard of the cooldown before: its acquire call reads it.
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err = c.Acquire(dctx, 1)
	if err == nil {
		p.Release()
	}
	requireCoolRefusal(t, dctx, err, 30*time.Second)

	// A waiter with time to wait stays in line (queued in Redis) until
	// its context ends; nothing was granted meanwhile. (Its context is
	// not the test's, which ends before the reopening.)
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer wcancel()
	waiter := testkit.Go(func() error {
		p, err := b.Acquire(wctx, 4)
		if err == nil {
			p.Release()
			return errors.New("granted during the cooldown")
		}
		return err
	})
	waitFor(t, 10*time.Second, "b's waiter to queue in Redis", func() bool {
		return rc.ZCard(ctx, "{lanes:"+b.Name()+"}:g:q").Val() == 1
	})
	assert.True(t, held.Release())
	assert.EqualValues(t, 1, rc.ZCard(ctx, "{lanes:"+b.Name()+"}:g:q").Val(), "a release handed the units over during the cooldown")
	select {
	case err := <-waiter:
		t.Fatalf("the waiter returned during the cooldown: %v", err)
	default:
	}
	wcancel()
	select {
	case err := <-waiter:
		assert.ErrorIs(t, err, context.Canceled, "the waiter left when its context ended, not before")
	case <-time.After(10 * time.Second):
		t.Fatal("b's waiter did not return after its context ended")
	}
}

// TestCooldownFailsWaitersBehindTheHead: a caller waiting behind its
// instance's head (which carries its request) fails at once when the
// instance learns of a cooldown that ends after its deadline; the head,
// with time to wait, stays.
func TestCooldownFailsWaitersBehindTheHead(t *testing.T) {
	srv := startRedis(t)
	f := fleetOf(t, srv.Addr, 2, 2)
	a, c := f[0], f[1]
	ctx := testCtx(t)

	full, err := a.Acquire(ctx, 2) // the head of c's line queues in Redis
	require.NoError(t, err)
	defer full.Release()
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Minute) // past the reopening
	defer hcancel()
	head := testkit.Go(func() error {
		p, err := c.Acquire(hctx, 1)
		if err == nil {
			p.Release()
		}
		return err
	})
	waitFor(t, 10*time.Second, "c's head to wait", func() bool { return c.Stats().Waiters == 1 })
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	behind := testkit.Go(func() error {
		p, err := c.Acquire(fctx, 1)
		if err == nil {
			p.Release()
		}
		return err
	})
	waitFor(t, 10*time.Second, "a waiter behind c's head", func() bool { return c.Stats().Waiters == 2 })

	_, err = a.Cooldown(ctx, time.Minute)
	require.NoError(t, err)
	select {
	case err := <-behind:
		requireCoolRefusal(t, fctx, err, 30*time.Second)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter behind c's head did not fail before its deadline")
	}
	assert.Equal(t, 1, c.Stats().Waiters, "the head, with time to wait, stays")
	hcancel()
	select {
	case err := <-head:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("c's head did not return after its context ended")
	}
}

// TestCooldownEndsByItself: waiters of three replicas that wait through a
// short cooldown are granted once it ends, and not before: the server
// seeds each fencing token from its clock (microseconds), so a token below
// the reopening would be a grant made while the lane was closed.
func TestCooldownEndsByItself(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	f := fleetOf(t, srv.Addr, 3, 3)
	ctx := testCtx(t)

	_, err := f[0].Cooldown(ctx, 500*time.Millisecond)
	require.NoError(t, err)
	cu := closedUntil(t, rc, f[0].Name())
	fences := make([]<-chan error, len(f))
	got := make([]int64, len(f))
	for i, s := range f {
		fences[i] = testkit.Go(func() error {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			got[i] = p.Fence()
			p.Release()
			return nil
		})
	}
	for i, ch := range fences {
		select {
		case err := <-ch:
			require.NoError(t, err, "replica %d", i)
		case <-time.After(20 * time.Second):
			t.Fatalf("replica %d's waiter was not granted after the cooldown", i)
		}
		assert.GreaterOrEqual(t, got[i], cu*1000, "replica %d granted at server time %dus, before the reopening at %dms", i, got[i], cu)
	}
	left, err := f[1].Cooldown(ctx, 0) // reads
	require.NoError(t, err)
	assert.Zero(t, left, "the cooldown is over")
}

// TestCooldownThroughAQueue: a Redis lane in a lanequeue.Queue refuses a
// call whose deadline comes before the reopening with a LaneError whose
// cause is the LateError.
func TestCooldownThroughAQueue(t *testing.T) {
	srv := startRedis(t)
	f := fleetOf(t, srv.Addr, 2, 2)
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("provider", redislane.AsLane[string](f[1])))
	set, err := q.Lanes("provider")
	require.NoError(t, err)
	ctx := testCtx(t)
	_, err = f[0].Cooldown(ctx, time.Minute)
	require.NoError(t, err)

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tk, err := q.AcquireAll(dctx, "k", set)
	if err == nil {
		tk.Release()
	}
	var le *lanequeue.LaneError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "provider", le.Lane)
	assert.Greater(t, le.RetryAfter, 30*time.Second, "the LaneError's RetryAfter comes from the LateError")
	requireCoolRefusal(t, dctx, err, 30*time.Second)
}

// TestQueueCooldownPausesTheFleet: a Queue's Cooldown of a Redis lane
// pauses every instance of it, not only the queue that was told (the
// provider's 429 that one replica got is the whole fleet's), and another
// replica's queue refuses a call whose deadline comes first with the
// retry time.
func TestQueueCooldownPausesTheFleet(t *testing.T) {
	srv := startRedis(t)
	f := fleetOf(t, srv.Addr, 2, 2)
	toks := newTokens(t, srv.Addr, "tpm", 1000)
	ctx := testCtx(t)
	queues := make([]*lanequeue.Queue[string], 2)
	for i := range queues {
		q := lanequeue.New[string]()
		defer q.Close()
		require.NoError(t, q.Add("provider", redislane.AsLane[string](f[i])))
		queues[i] = q
	}
	require.NoError(t, queues[0].Cooldown(ctx, "provider", time.Minute))
	left, err := f[1].Cooldown(ctx, 0) // reads, on the other replica
	require.NoError(t, err)
	assert.Greater(t, left, 30*time.Second, "the pause reached Redis")

	set, err := queues[1].Lanes("provider")
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tk, err := queues[1].AcquireAll(dctx, "k", set)
	if err == nil {
		tk.Release()
	}
	var le *lanequeue.LaneError
	require.ErrorAs(t, err, &le)
	assert.Greater(t, le.RetryAfter, 30*time.Second)
	requireCoolRefusal(t, dctx, err, 30*time.Second)

	// A rate lane of Redis is paused for the fleet too.
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("tpm", redislane.AsRateLane[string](toks)))
	require.NoError(t, q.Cooldown(ctx, "tpm", time.Minute))
	left, err = toks.Cooldown(ctx, 0)
	require.NoError(t, err)
	assert.Greater(t, left, 30*time.Second, "the rate lane's pause reached Redis")
}

// TestCooldownArguments: d <= 0 sets nothing; a closed lane refuses.
func TestCooldownArguments(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	f := fleetOf(t, srv.Addr, 1, 1)
	ctx := testCtx(t)
	left, err := f[0].Cooldown(ctx, -time.Second)
	require.NoError(t, err)
	assert.Zero(t, left)
	assert.False(t, rc.HExists(ctx, "{lanes:"+f[0].Name()+"}:meta", "cu").Val(), "d <= 0 sets nothing")
	f[0].Close()
	_, err = f[0].Cooldown(ctx, time.Second)
	assert.ErrorIs(t, err, redislane.ErrClosed)
}

// TestLateErrorReads: the error says the lane, the cause and when, once.
func TestLateErrorReads(t *testing.T) {
	err := &redislane.LateError{Lane: "openai", RetryAfter: 20 * time.Second, Err: redislane.ErrCoolingDown}
	assert.Equal(t, `redislane: lane "openai": lane cooling down after an overload (retry after 20s): context deadline exceeded`, err.Error())
}

// TestQueueCooldownForGoodReachesTheFleet: a Queue's Cooldown for the
// longest duration pauses the lane for good (until 2262) locally, and the
// fleet too: the millisecond rounding of a d within a millisecond of the
// largest Duration must not overflow into a negative d, which the
// cooldown script reads as "set nothing".
func TestQueueCooldownForGoodReachesTheFleet(t *testing.T) {
	srv := startRedis(t)
	f := fleetOf(t, srv.Addr, 1, 1)
	ctx := testCtx(t)
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("provider", redislane.AsLane[string](f[0])))
	require.NoError(t, q.Cooldown(ctx, "provider", time.Duration(math.MaxInt64)))
	left, err := f[0].Cooldown(ctx, 0) // reads
	require.NoError(t, err)
	assert.Greater(t, left, 100*365*24*time.Hour, "the pause for good reached Redis")
}
