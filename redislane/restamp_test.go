package redislane_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
