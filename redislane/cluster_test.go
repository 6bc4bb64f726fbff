package redislane_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// startCluster starts a one-node Redis Cluster (all slots on one node) of
// the test's own, and stops it when the test ends (see startClusterNodes).
func startCluster(t *testing.T) string { return startClusterOf(t, 1)[0] }

// startClusterOf starts a Redis Cluster of n masters of the test's own,
// the slots split evenly among them in the order of the addresses
// returned, and stops it when the test ends.
func startClusterOf(t *testing.T, n int) []string { return startClusterNodes(t, n).Addrs() }

// startClusterNodes starts a Redis Cluster of n masters of the test's own
// (see redistest.StartCluster) and stops it when the test ends. Without
// redis-server the test fails under CI (CI=true) and is skipped elsewhere.
func startClusterNodes(t *testing.T, n int) *redistest.Cluster {
	t.Helper()
	c, err := redistest.StartCluster(n)
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("skipping: %v", err)
	}
	require.NoError(t, err, "redislane tests need a real redis-server")
	t.Cleanup(c.Stop)
	return c
}

func clusterClient(t *testing.T, addr string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// On a Cluster client, hand-overs go through sharded pub/sub, each lane's
// shard channel on a connection of its own (to its slot's node), and with
// WithClassicPubSub through PUBLISH and SUBSCRIBE on one shared connection.
// Two lanes per client, so that a client holds two channels.
func TestClusterHandoverThroughShardedAndClassicPubSub(t *testing.T) {
	addr := startCluster(t)
	direct := clusterClient(t, addr)
	ctx := context.Background()
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	serverHas := len(info) > 0 && info[0] != nil
	for _, classic := range []bool{false, true} {
		name := "sharded"
		if classic {
			name = "classic"
		}
		t.Run(name, func(t *testing.T) {
			var opts = []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}
			if classic {
				opts = append(opts, redislane.WithClassicPubSub())
			}
			ca, cb := clusterClient(t, addr), clusterClient(t, addr)
			sharded := serverHas && !classic
			for _, lane := range []string{laneName(t), laneName(t)} {
				a, err := redislane.NewWeighted(ca, lane, 1, opts...)
				require.NoError(t, err)
				defer a.Close()
				a2, err := redislane.NewWeighted(cb, lane, 1, opts...)
				require.NoError(t, err)
				defer a2.Close()
				p, err := a.Acquire(ctx, 1)
				require.NoError(t, err)
				got := acquireAsync(ctx, a2)
				channel := "{lanes:" + lane + "}:wake"
				waitFor(t, 5*time.Second, "both instances to subscribe and the waiter to queue", func() bool {
					n := direct.PubSubNumSub(ctx, channel).Val()[channel]
					if sharded {
						n = direct.PubSubShardNumSub(ctx, channel).Val()[channel]
					}
					return n >= 2 && direct.ZCard(ctx, "{lanes:"+lane+"}:g:q").Val() == 1
				})
				p.Release()
				select {
				case err := <-got:
					require.NoError(t, err)
				case <-time.After(10 * time.Second):
					t.Fatal("the waiter was never granted")
				}
				assert.EqualValues(t, 1, a2.Stats().Handovers, "the waiter was not woken by the message")
			}
		})
	}
}

// A Fleet on a Cluster client: every key of its scripts, the leader key
// included, is in the lane's slot; a raise hands a queued waiter its
// permit through the lane's shard channel.
func TestClusterFleet(t *testing.T) {
	addr := startCluster(t)
	ca, cb := clusterClient(t, addr), clusterClient(t, addr)
	name := laneName(t)
	a := newFleet(t, ca, name, 1, redislane.WithLease(handoverLease))
	b := newFleet(t, cb, name, 1, redislane.WithLease(handoverLease))
	controller{a}.set(1)
	waitFor(t, 10*time.Second, "a to lead", a.Leader)
	ctx := testCtx(t)
	p, err := a.Acquire(ctx, 1)
	require.NoError(t, err)
	got := acquireAsync(ctx, b.Weighted)
	direct := clusterClient(t, addr)
	waitFor(t, 10*time.Second, "b's waiter to queue in Redis", func() bool {
		return direct.ZCard(context.Background(), "{lanes:"+name+"}:g:q").Val() == 1
	})
	h0 := b.Stats().Handovers
	controller{a}.setInForce(t, 2)
	require.NoError(t, testkit.Recv(t, got, "b's waiter, let in by the raise"))
	assert.Equal(t, h0+1, b.Stats().Handovers, "not handed over by the raise")
	pickedUp(t, b, 2, "b")
	p.Release()
}

// laneOnSlots returns a lane name, unique to the test run, whose keys are
// in a slot in [lo, hi].
func laneOnSlots(t *testing.T, rc *redis.ClusterClient, lo, hi int) string {
	t.Helper()
	for range 1000 {
		name := laneName(t)
		slot, err := rc.ClusterKeySlot(context.Background(), "{lanes:"+name+"}:meta").Result()
		require.NoError(t, err)
		if int(slot) >= lo && int(slot) <= hi {
			return name
		}
	}
	t.Fatalf("no lane name in slots [%d, %d]", lo, hi)
	return ""
}

// On a Cluster of three masters, with a lane on each, every lane's shard
// channel is subscribed on the node of its slot, and each lane's waiter is
// handed its permit by a message. TestClusterHandoverThroughShardedAndClassicPubSub
// cannot see this: its cluster has one node, which takes every shard
// channel on one connection. Mutation that it catches: the hub putting
// every channel of a Cluster client on one connection (the node of the
// first lane refuses the others' channels with MOVED, and their waiters
// only poll).
func TestClusterOfThreeHandsOverOnEveryNode(t *testing.T) {
	addrs := startClusterOf(t, 3)
	direct := clusterClient(t, addrs[0])
	ctx := testCtx(t)
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	if len(info) == 0 || info[0] == nil {
		t.Skip("the server has no sharded pub/sub")
	}
	opts := []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}
	ca, cb := clusterClient(t, addrs[0]), clusterClient(t, addrs[0])
	for i, addr := range addrs {
		lane := laneOnSlots(t, direct, i*16384/3, (i+1)*16384/3-1)
		a, err := redislane.NewWeighted(ca, lane, 1, opts...)
		require.NoError(t, err)
		defer a.Close()
		b, err := redislane.NewWeighted(cb, lane, 1, opts...)
		require.NoError(t, err)
		defer b.Close()
		p, err := a.Acquire(ctx, 1)
		require.NoError(t, err)
		got := acquireAsync(ctx, b)
		node := newClient(t, addr)
		channel := "{lanes:" + lane + "}:wake"
		waitFor(t, 10*time.Second, fmt.Sprintf("lane %d: both instances to subscribe on the lane's node, and the waiter to queue", i), func() bool {
			return node.PubSubShardNumSub(ctx, channel).Val()[channel] >= 2 &&
				node.ZCard(ctx, "{lanes:"+lane+"}:g:q").Val() == 1
		})
		p.Release()
		require.NoError(t, testkit.Recv(t, got, "the waiter's grant"))
		assert.EqualValues(t, 1, b.Stats().Handovers, "lane %d: the waiter was not woken by the message", i)
	}
}
