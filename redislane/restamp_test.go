package redislane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// TestRateLaneRestampsACharge: AsRateLane's lane moves a charge a queue
// held while its call waited for another lane to now, keeping its units
// in the window (the sum stays), and says so when the charge has left the
// window, changing nothing.
func TestRateLaneRestampsACharge(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	lane := redislane.AsRateLane[string](newTokens(t, srv.Addr, name, 10))
	rs, ok := lane.(interface {
		RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool)
	})
	require.True(t, ok, "AsRateLane's lane cannot move its charges")
	ctx := testCtx(t)
	p, err := lane.Acquire(ctx, "k", 3)
	require.NoError(t, err)
	z := "{lanes:" + name + "}:t:z"
	ids, err := rc.ZRangeWithScores(ctx, z, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, ids, 1)
	id, at := ids[0].Member.(string), int64(ids[0].Score)
	// Charged 5 s ago, as if its call had then waited for another lane.
	require.NoError(t, rc.ZAdd(ctx, z, redis.Z{Score: float64(at - 5000), Member: id}).Err())

	q, moved := rs.RestampPermit(ctx, p)
	require.True(t, moved, "a charge in the window was not moved")
	assert.Equal(t, p, q)
	now, err := rc.ZScore(ctx, z, id).Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, int64(now), at, "the charge was not moved to now")
	assert.EqualValues(t, 3, windowSum(t, rc, name), "a move changed the window's sum")

	require.NoError(t, rc.ZRem(ctx, z, id).Err()) // as if it had left the window
	_, moved = rs.RestampPermit(ctx, p)
	assert.False(t, moved, "a charge gone from the window was moved")
	n, err := rc.ZCard(ctx, z).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a refused move charged something")
}

// TestQueueMovesTheHeldChargeToTheGrant: through a queue, a call that
// took fleet lane b and then waited for fleet lane a's room (another
// replica spent a while the call waited for b) is let through with its
// charge of b moved to a's grant on the server's clock, not left from
// before the wait.
func TestQueueMovesTheHeldChargeToTheGrant(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	an, bn := laneName(t)+"-a", laneName(t)+"-b"
	// The call waits for b first (b's window ends at 1 s, and a waiter
	// asks Redis again within 250 ms), then for a (to 1.8 s), holding b's
	// charge, which is still in b's window when a grants it.
	winA, winB := redislane.WithWindow(1800*time.Millisecond), redislane.WithWindow(time.Second)
	q := lanequeue.New[string]()
	defer q.Close()
	ta := newTokens(t, srv.Addr, an, 1, winA)
	require.NoError(t, q.Add("a", redislane.AsRateLane[string](ta)))
	tb := newTokens(t, srv.Addr, bn, 1, winB)
	require.NoError(t, q.Add("b", redislane.AsRateLane[string](tb)))
	ctx := testCtx(t)
	_, err := newTokens(t, srv.Addr, bn, 1, winB).Acquire(ctx, 1) // another replica spends b
	require.NoError(t, err)
	both, err := q.Lanes("a", "b")
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		tk, err := q.AcquireAll(ctx, "k", both)
		if err == nil {
			tk.Release()
		}
		res <- err
	}()
	testkit.Eventually(t, "the call to wait for b", func() bool { return tb.Stats().Waiters == 1 })
	_, err = newTokens(t, srv.Addr, an, 1, winA).Acquire(ctx, 1) // and a, while the call holds nothing
	require.NoError(t, err)
	require.NoError(t, testkit.Recv(t, res, "the call"))
	require.EqualValues(t, 1, ta.Stats().Waited, "the call did not wait for a: the test's windows no longer make it")

	last := func(name string) int64 {
		zs, err := rc.ZRangeWithScores(ctx, "{lanes:"+name+"}:t:z", -1, -1).Result()
		require.NoError(t, err)
		require.Len(t, zs, 1)
		return int64(zs[0].Score)
	}
	atA, atB := last(an), last(bn)
	assert.GreaterOrEqual(t, atB, atA, "the call's charge of b counts from %d ms before its grant on a", atA-atB)
}
