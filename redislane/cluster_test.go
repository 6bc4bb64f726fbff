package redislane_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// startCluster starts a one-node Redis Cluster (all slots on one node) of
// the test's own, and kills it (its whole process group) when the test
// ends. It skips as startRedis does when redis-server is missing.
func startCluster(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redislane tests need a real redis-server and CI=true: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	node := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer node.Close()
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the cluster node to answer", func() bool { return node.Ping(ctx).Err() == nil })
	require.NoError(t, node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	waitFor(t, 10*time.Second, "the cluster to be ok", func() bool {
		return strings.Contains(node.ClusterInfo(ctx).Val(), "cluster_state:ok")
	})
	return addr
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
