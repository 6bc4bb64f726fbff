package redislane_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// Scenario 6: misuse.

// A second instance of a lane with another limit fails at once, and the
// stored limit does not change.
func TestCapacityMismatchIsAnError(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	a, err := redislane.NewWeighted(rc, name, 3, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer a.Close()
	warm(t, a)

	b, err := redislane.NewWeighted(rc, name, 4, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer b.Close()
	p, err := b.Acquire(testCtx(t), 1)
	failed(t, p, err, redislane.ErrCapacityMismatch)
	p, ok := b.TryAcquire(1)
	refused(t, p, ok)
	assert.Equal(t, "3", rc.HGet(context.Background(), "{lanes:"+name+"}:meta", "limit").Val())

	// A keyed lane may not share the name of a global one either.
	k, err := redislane.NewKeyed(rc, name, 3, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer k.Close()
	p, err = k.Acquire(testCtx(t), "x")
	failed(t, p, err, redislane.ErrCapacityMismatch)

	warm(t, a) // the first instance is unaffected
}

// A second Release, through the permit or any copy of its lane handle,
// returns false, frees nothing and is counted.
func TestDoubleReleaseIsANoOp(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)

	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	q, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, p.Release())
	assert.False(t, p.Release())

	// Through the lane: the handle, a copy of it, and the Redis permit.
	lane := redislane.AsLane[string](s)
	h, err := lane.Acquire(ctx, "ignored", 1)
	require.NoError(t, err)
	cp := h
	assert.True(t, h.Release())
	assert.False(t, cp.Release())
	assert.False(t, redislane.PermitOf(h).Release())

	st := s.Stats()
	assert.EqualValues(t, 3, st.DoubleReleases)
	assert.EqualValues(t, 2, st.Released)
	assert.EqualValues(t, 1, st.Held)
	assert.EqualValues(t, 1, rc.ZCard(ctx, "{lanes:"+name+"}:g:h").Val(), "only q still holds")
	assert.EqualValues(t, "1", rc.HGet(ctx, "{lanes:"+name+"}:g:d", "held").Val())
	q.Release()
}

// Releases racing with refreshes: a refresh never re-creates a released
// permit, and a released permit's cause is ErrReleased, never a lost lease.
// The lease is long enough that no permit expires on a loaded machine,
// where many refreshes, with a deadline of their 5 ms period (the
// shortest WithRefreshEvery takes), time out; a
// Release may return before its call got through (that call goes on in the
// background, within a margin), but an entry that a refresh re-created
// would stay for a lease.
func TestReleaseRacingRefreshNeverRecreatesPermit(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	var cnt redistest.Calls
	rc.AddHook(&cnt)
	name := laneName(t)
	const lease = 3 * time.Second
	s, err := redislane.NewWeighted(rc, name, 64, redislane.WithLease(lease),
		redislane.WithRefreshEvery(5*time.Millisecond), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)
	key := "{lanes:" + name + "}:g:h"

	for round := range 10 {
		ps := make([]*redislane.Permit, 32)
		for i := range ps {
			ps[i], err = s.Acquire(ctx, 1)
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.True(t, p.Release())
			}()
		}
		wg.Wait()
		for _, p := range ps {
			assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrReleased, "round %d", round)
		}
		waitFor(t, lease/2, fmt.Sprintf("round %d: the released permits to leave Redis", round), func() bool {
			return rc.ZCard(ctx, key).Val() == 0
		})
	}
	// Let more refreshes run: nothing comes back.
	p, err := s.Acquire(ctx, 1) // keeps the refresher busy
	require.NoError(t, err)
	calls := cnt.Evals()
	waitFor(t, 5*time.Second, "more refreshes", func() bool { return cnt.Evals() >= calls+5 })
	assert.EqualValues(t, 1, rc.ZCard(ctx, key).Val())
	p.Release()
	st := s.Stats()
	assert.Zero(t, st.LeasesLost+st.LeasesExpired)
	assert.Zero(t, st.DoubleReleases)
}

// Bad input fails at once with a clear error, without calling Redis.
func TestBadInputFailsAtOnce(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // never dialled
	defer rc.Close()

	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		lane   string
		limit  int64
		opts   []redislane.Option
	}{
		{"nil client", nil, "x", 1, nil},
		{"typed nil client", (*redis.Client)(nil), "x", 1, nil},
		{"typed nil cluster client", (*redis.ClusterClient)(nil), "x", 1, nil},
		{"empty name", rc, "", 1, nil},
		{"brace in name", rc, "a}b", 1, nil},
		{"zero limit", rc, "x", 0, nil},
		{"negative limit", rc, "x", -3, nil},
		{"tiny lease", rc, "x", 1, []redislane.Option{redislane.WithLease(time.Millisecond)}},
		{"refresh slower than the lease", rc, "x", 1, []redislane.Option{redislane.WithLease(time.Second), redislane.WithRefreshEvery(time.Second)}},
		{"negative refresh", rc, "x", 1, []redislane.Option{redislane.WithRefreshEvery(-time.Second)}},
		// A period of 0 is not the default: a value out of range is refused,
		// never replaced (Option). One under 5 ms made every refresh call's
		// deadline shorter than a round trip to a loaded Redis, and leases
		// ended on a healthy server (a new user's trial).
		{"zero refresh", rc, "x", 1, []redislane.Option{redislane.WithRefreshEvery(0)}},
		{"tiny refresh", rc, "x", 1, []redislane.Option{redislane.WithRefreshEvery(time.Microsecond)}},
		{"refresh under 5 ms", rc, "x", 1, []redislane.Option{redislane.WithRefreshEvery(4 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redislane.NewWeighted(tc.client, tc.lane, tc.limit, tc.opts...)
			assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
			assert.Nil(t, s)
			k, err := redislane.NewKeyed(tc.client, tc.lane, tc.limit, tc.opts...)
			assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
			assert.Nil(t, k)
		})
	}

	s, err := redislane.NewWeighted(rc, "x", 3)
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)
	p, err := s.Acquire(ctx, 0)
	failed(t, p, err, redislane.ErrInvalidWeight)
	p, err = s.Acquire(ctx, -1)
	failed(t, p, err, redislane.ErrInvalidWeight)
	p, err = s.Acquire(ctx, 4)
	failed(t, p, err, redislane.ErrTooHeavy)
	p, ok := s.TryAcquire(4)
	refused(t, p, ok)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p, err = s.Acquire(cancelled, 1)
	failed(t, p, err, context.Canceled)
	// Three refused acquires; TryAcquire's false counts in no counter, and
	// the cancelled call counts as Cancelled (see semaphore.Counters).
	assert.EqualValues(t, 3, s.Stats().Rejected)
	assert.EqualValues(t, 1, s.Stats().Cancelled)

	k, err := redislane.NewKeyed(rc, "y", 1)
	require.NoError(t, err)
	defer k.Close()
	p, err = k.Acquire(ctx, "a", semaphore.Weight(2))
	failed(t, p, err, redislane.ErrTooHeavy)
	// A fleet key's line is FIFO: an option that sets an order is refused,
	// not dropped; one that sets nothing is read past (the weight counts).
	p, err = k.Acquire(ctx, "a", semaphore.Sequence(3))
	failed(t, p, err, redislane.ErrInvalidConfig)
	if p, ok := k.TryAcquire("a", semaphore.Priority(1)); ok {
		p.Release()
		t.Fatal("TryAcquire took a priority on a fleet key")
	}
	p, err = k.Acquire(ctx, "a", semaphore.Priority(0), semaphore.Weight(2)) // Priority(0) sets nothing
	failed(t, p, err, redislane.ErrTooHeavy)
}

// A client closed under a lane is a mistake that no retry mends: Acquire
// fails at once with redis.ErrClosed instead of retrying until its context
// ends.
func TestClosedClientFailsAtOnce(t *testing.T) {
	srv := startRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	s, err := redislane.NewWeighted(rc, laneName(t), 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, rc.Close())

	// Were the error taken for a passing one, Acquire would retry until
	// ctx ends: the error would then be DeadlineExceeded (wrapping the
	// last Redis error), after a wait bounded so as not to hang the package.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := s.Acquire(ctx, 1)
	if err == nil {
		p.Release()
	}
	require.ErrorIs(t, err, redis.ErrClosed)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Acquire retried until its context ended")
	assert.Equal(t, uint64(1), s.Stats().Rejected)
}

// An Acquire on a Redis that cannot be reached (a port nobody listens on)
// ends at its deadline with the deadline's error wrapping the last Redis
// error, and Stats counts the failed calls: the user learns that Redis is
// away, not only that time ran out. The first waiter's first call is the
// probe of sharded pub/sub; its failure was dropped, and the acquire call
// after it was still in flight at the deadline, so the error was a bare
// "context deadline exceeded" with RedisErrors 0 (a new user's trial).
func TestUnreachableRedisSaysSo(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DisableIdentity: true})
	defer rc.Close()
	s, err := redislane.NewWeighted(rc, laneName(t), 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := s.Acquire(ctx, 1)
	if err == nil {
		p.Release()
		t.Fatal("granted by a Redis that cannot be reached")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "last Redis error", "the error says nothing of Redis")
	assert.NotZero(t, s.Stats().RedisErrors, "no failed Redis call counted")
}

// The scripts read the server's run_id with INFO, to tell a restart that
// loaded old state (see the package doc). A user whose ACL forbids INFO
// gets an error that says so, at once, rather than a lane that grants
// without seeing restarts; nothing is left in Redis.
func TestUserWithoutInfoIsRefused(t *testing.T) {
	srv := startRedis(t)
	admin := newClient(t, srv.Addr)
	ctx := testCtx(t)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err())
	rc := newClient(t, srv.Addr, func(o *redis.Options) { o.Username, o.Password = "noinfo", "pw" })
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	p, err := s.Acquire(ctx, 1)
	if err == nil {
		p.Release()
		t.Fatal("granted to a user whose scripts cannot read the run_id")
	}
	assert.ErrorContains(t, err, "INFO")
	tp, ok := s.TryAcquire(1)
	refused(t, tp, ok, "TryAcquire granted to a user whose scripts cannot read the run_id")
	n, err := admin.Exists(ctx, "{lanes:"+name+"}:meta").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the lane's state was written")
}

// A permit's context is made when first asked for: one asked for only
// after the permit ended carries the cause it ended with, on each path.
// A quota permit released before its block lapsed keeps ErrReleased.
// Fails with Context ignoring the recorded end (a context never done).
func TestContextAskedAfterTheEnd(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		how  string
		opts []redislane.Option
	}{{"per grant", nil}, {"quota", []redislane.Option{redislane.WithQuota(2)}}} {
		s := newSem(t, srv.Addr, laneName(t), 4, tc.opts...)
		released, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		closed, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		released.Release()
		s.Close()
		require.Error(t, released.Context().Err(), "%s: released, then asked", tc.how)
		assert.ErrorIs(t, context.Cause(released.Context()), redislane.ErrReleased, tc.how)
		require.Error(t, closed.Context().Err(), "%s: closed, then asked", tc.how)
		assert.ErrorIs(t, context.Cause(closed.Context()), redislane.ErrClosed, tc.how)
		closed.Release()
		assert.ErrorIs(t, context.Cause(closed.Context()), redislane.ErrClosed, "%s: a Release after the end keeps its cause", tc.how)
	}
}

// The zero Permit holds nothing: Release returns false, as package
// semaphore's contract has it for its zero Permit, and Weight, Fence,
// Deadline and Context answer without a lane behind it. Fails with
// Release reaching for the lane the zero Permit does not have (a nil
// dereference).
func TestZeroPermit(t *testing.T) {
	var p redislane.Permit
	assert.NotPanics(t, func() { assert.False(t, p.Release(), "the zero Permit's Release") })
	assert.NotPanics(t, func() { assert.False(t, p.Release(), "a second Release of the zero Permit") })
	assert.Zero(t, p.Weight())
	assert.Zero(t, p.Fence())
	assert.True(t, p.Deadline().IsZero())
	assert.NoError(t, p.Context().Err())
}

// A lane refused for its kind or order, with the capacity the lane in
// Redis has, is told so: the error names the kind, not two equal
// capacities, on each path that reads it (an Acquire, TryAcquireAll, a
// Cooldown, a Tokens' Acquire, a Fleet's); a refusal for the capacity
// still names both. Fails with the message "has capacity 1 (or another
// kind) in Redis; this keyed lane has 1".
func TestCapacityMismatchSaysWhatDiffers(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	kindMsg := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, redislane.ErrCapacityMismatch, what)
		assert.Contains(t, err.Error(), "in Redis as a lane of another kind", what)
		assert.NotContains(t, err.Error(), "has capacity", what)
		assert.NotContains(t, err.Error(), "has budget", what)
	}

	// A sequenced Keyed is in Redis; a FIFO one of the same capacity joins.
	name := laneName(t)
	seq := newSeqKeyed(t, srv.Addr, name)
	p, err := seq.Acquire(ctx, "t", semaphore.Sequence(0))
	require.NoError(t, err)
	p.Release()
	fifo := newKeyed(t, srv.Addr, name, 1)
	p, err = fifo.Acquire(ctx, "t")
	failed(t, p, err, redislane.ErrCapacityMismatch)
	kindMsg(err, "Keyed.Acquire")
	assert.Contains(t, err.Error(), "its capacity, 1, is this keyed lane's")
	got, ok, err := redislane.TryAcquireAll(fifo.Request("t", 1))
	refused(t, permits(got), ok)
	kindMsg(err, "TryAcquireAll")

	// An ordered Weighted is in Redis; a plain one of the same capacity
	// asks for a cooldown.
	name = laneName(t) + "-w"
	ord := newSem(t, srv.Addr, name, 2, redislane.WithPriorities(time.Second))
	warm(t, ord)
	plain := newSem(t, srv.Addr, name, 2)
	_, err = plain.Cooldown(ctx, time.Second)
	kindMsg(err, "Weighted.Cooldown")

	// A Fleet joins a Weighted: its limit is the stored one, so only the
	// kind can differ.
	f, err := redislane.NewFleet(newClient(t, srv.Addr), name, 5, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(f.Close)
	fp, err := f.Acquire(ctx, 1)
	failed(t, fp, err, redislane.ErrCapacityMismatch)
	kindMsg(err, "Fleet.Acquire")

	// A Tokens lane of another window, with the same budget.
	name = laneName(t) + "-t"
	a := newTokens(t, srv.Addr, name, 10, redislane.WithWindow(time.Minute))
	c, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, c.Settle(ctx, 1))
	b := newTokens(t, srv.Addr, name, 10, redislane.WithWindow(2*time.Minute))
	_, err = b.Acquire(ctx, 1)
	kindMsg(err, "Tokens.Acquire")
	assert.Contains(t, err.Error(), "another kind or window")

	// Another capacity of the same kind: both capacities are named.
	name = laneName(t) + "-c"
	warm(t, newSem(t, srv.Addr, name, 3))
	p, err = newSem(t, srv.Addr, name, 4).Acquire(ctx, 1)
	failed(t, p, err, redislane.ErrCapacityMismatch)
	assert.Contains(t, err.Error(), fmt.Sprintf("%q has capacity 3 in Redis; this global lane has 4", name))
}

// AsLane, AsKeyedLane, AsRateLane and AsBudget refuse a nil lane (and
// AsKeyedLane a nil key function) at once, with a panic that says so, as
// lanequeue's own constructors do, not at the lane's first use. Fails
// with AsKeyedLane taking a nil key function (the first AcquireAll of a
// queue panicked) and the others dereferencing nil, or not at all.
func TestAsLaneRefusesNil(t *testing.T) {
	srv := startRedis(t)
	k := newKeyed(t, srv.Addr, laneName(t), 1)
	assert.PanicsWithValue(t, "redislane: AsLane of a nil Weighted", func() { redislane.AsLane[string](nil) })
	assert.PanicsWithValue(t, "redislane: AsKeyedLane of a nil Keyed", func() {
		redislane.AsKeyedLane(nil, func(s string) string { return s })
	})
	assert.PanicsWithValue(t, "redislane: AsKeyedLane with a nil key function", func() {
		redislane.AsKeyedLane[string](k, nil)
	})
	assert.PanicsWithValue(t, "redislane: AsRateLane of a nil Tokens", func() { redislane.AsRateLane[string](nil) })
	assert.PanicsWithValue(t, "redislane: AsBudget of a nil Fleet", func() { redislane.AsBudget(nil) })
}
