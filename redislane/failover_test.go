package redislane_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// replicaOf makes the server behind c a replica of primary (nil: a
// primary again) and, for a replica, waits until it has loaded the
// primary's data set.
func replicaOf(t *testing.T, ctx context.Context, c *redis.Client, primary *redistest.Server) {
	t.Helper()
	if primary == nil {
		require.NoError(t, c.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
		return
	}
	// A primary waits 5 s by default for more replicas before a diskless
	// sync starts: longer than the test's lease.
	require.NoError(t, newClient(t, primary.Addr).ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	require.NoError(t, c.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(primary.Port)).Err())
	testkit.Eventually(t, "the replica to sync with "+primary.Addr, func() bool {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up") &&
			strings.Contains(info, "master_sync_in_progress:0")
	})
}

// TestResyncedAndPromotedPrimaryQuarantines (from the review of issue 25's
// run_id check): a primary M that is demoted (after a partition, say),
// resyncs from the replica B that was promoted meanwhile, losing its
// latest grant, and is promoted again keeps its run_id; the state it now
// has was written before that grant. Its replication id is new at the
// promotion, so the lane is quarantined, and the holder M forgot is not
// given a second permit beside it. With the run_id alone the grant came
// at once.
func TestResyncedAndPromotedPrimaryQuarantines(t *testing.T) {
	m, b := startRedis(t), startRedis(t)
	cm, cb := newClient(t, m.Addr), newClient(t, b.Addr)
	ctx := testCtx(t)
	name := laneName(t)
	const lease = 2 * time.Second
	px, rc, _ := proxied(t, m.Addr, 100*time.Millisecond)
	a, err := redislane.NewKeyed(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	other, err := redislane.NewKeyed(cm, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(lease))
	require.NoError(t, err)
	t.Cleanup(other.Close)

	// The lane's state on M, replicated to B.
	replicaOf(t, ctx, cb, m)
	first, err := a.Acquire(ctx, "k")
	require.NoError(t, err)
	first.Release()
	require.NoError(t, cm.Do(ctx, "WAIT", 1, 0).Err())

	// B is promoted (M is cut off from it); M grants once more, which B
	// never sees; then M resyncs from B and is promoted again.
	replicaOf(t, ctx, cb, nil)
	old, err := a.Acquire(ctx, "k")
	require.NoError(t, err)
	px.black.Store(true) // old's refreshes no longer reach M: it keeps its lease
	replicaOf(t, ctx, cm, b)
	replicaOf(t, ctx, cm, nil)
	n, err := cm.Exists(ctx, "{lanes:"+name+"}:meta").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "M did not get B's copy of the lane: the test proves nothing")
	require.NoError(t, old.Context().Err(), "the failover outlasted the old holder's lease: the test proves nothing")

	p, err := other.Acquire(ctx, "k")
	require.NoError(t, err)
	start := redistest.Now()
	testkit.Within(t, 10*lease, "the cut-off holder's lease to end", old.Context().Done())
	assert.LessOrEqual(t, endOf(old.Deadline()), start,
		"a holder granted before the resync still held its permit when a new one was granted")
	p.Release()
	px.black.Store(false)
	old.Release()
}
