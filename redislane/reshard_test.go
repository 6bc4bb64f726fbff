package redislane_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// pushesAndPolls sums how the instances' queued waiters were woken: by a
// hand-over message (a push) or by their timer (a poll).
func pushesAndPolls(ss ...*redislane.Weighted) (pushes, polls uint64) {
	for _, s := range ss {
		st := s.Stats()
		pushes += st.Handovers
		polls += st.Polls
	}
	return pushes, polls
}

// reshardRun is what runReshard saw: grants, pushes (waits ended by a
// hand-over message) and polls (waits ended by the timer) of both
// instances, as counted at each step, and every permit's span.
type reshardRun struct {
	slot                int64
	grants              [5]int64 // at: start, before the move, after it, the first push after it, the end
	pushes, polls       [5]uint64
	at                  [5]time.Time
	spans               []span
	errs                []error
	subscribedOnNewNode int64 // the channel's subscribers on the new node at the end
	firstPushInGrants   bool  // a push came in the grants allowed for it
}

// runReshard runs a lane of capacity 1 on a 3-master cluster, with two
// instances (each its own client) of three goroutines each that take the
// lane and hold it about a millisecond, and moves the lane's slot from one
// master to another mid-run. It counts perPhase grants before the move,
// then the grants until the first push after it (at most firstPushIn), then
// perPhase more.
func runReshard(t *testing.T, perPhase, firstPushIn int64) reshardRun {
	t.Helper()
	cluster := startClusterNodes(t, 3)
	addrs := cluster.Addrs()
	direct := clusterClient(t, addrs[0])
	ctx := testCtx(t, 2*time.Minute)
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	if len(info) == 0 || info[0] == nil {
		t.Skip("the server has no sharded pub/sub")
	}
	nodes := make([]*redis.Client, len(addrs))
	for i, addr := range addrs {
		nodes[i] = newClient(t, addr)
	}
	lane := laneOnSlots(t, direct, 0, 16384/3-1) // on nodes[0]
	var r reshardRun
	r.slot, err = direct.ClusterKeySlot(ctx, "{lanes:"+lane+"}:meta").Result()
	require.NoError(t, err)
	channel := "{lanes:" + lane + "}:wake"

	opts := []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}
	a, err := redislane.NewWeighted(clusterClient(t, addrs[0]), lane, 1, opts...)
	require.NoError(t, err)
	defer a.Close()
	b, err := redislane.NewWeighted(clusterClient(t, addrs[0]), lane, 1, opts...)
	require.NoError(t, err)
	defer b.Close()

	run, stop := context.WithCancel(ctx)
	defer stop()
	var (
		o      oracle
		grants atomic.Int64
		errMu  sync.Mutex
		wg     sync.WaitGroup
	)
	for _, s := range []*redislane.Weighted{a, b} {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for run.Err() == nil {
					p, err := s.Acquire(run, 1)
					if err != nil {
						if run.Err() == nil {
							errMu.Lock()
							r.errs = append(r.errs, err)
							errMu.Unlock()
						}
						continue
					}
					sp := span{Start: redistest.Now(), W: 1, Fence: p.Fence()}
					time.Sleep(time.Millisecond) // the work the permit protects
					sp.End = endOf(p.Deadline())
					o.add(sp)
					grants.Add(1)
					p.Release()
				}
			}()
		}
	}
	halted := false
	halt := func() {
		if !halted {
			halted = true
			stop()
			wg.Wait()
		}
	}
	defer halt()
	mark := func(i int) {
		r.grants[i], r.at[i] = grants.Load(), time.Now()
		r.pushes[i], r.polls[i] = pushesAndPolls(a, b)
	}
	// upTo waits until the lane has made n grants in all, or until done
	// holds, or fails.
	upTo := func(n int64, what string, done func() bool) {
		t.Helper()
		for grants.Load() < n && !done() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %d of %d grants made by the test's deadline", what, grants.Load(), n)
			case <-time.After(5 * time.Millisecond): // polling counters
			}
		}
	}
	never := func() bool { return false }

	upTo(20, "warm-up", never) // both instances subscribed, their waiters queued
	mark(0)
	upTo(r.grants[0]+perPhase, "before the move", never)
	mark(1)
	require.NoError(t, cluster.MoveSlot(ctx, int(r.slot), 0, 1), "moving the slot")
	mark(2)
	upTo(r.grants[2]+firstPushIn, "after the move", func() bool {
		pushes, _ := pushesAndPolls(a, b)
		return pushes > r.pushes[2]
	})
	mark(3)
	r.firstPushInGrants = r.pushes[3] > r.pushes[2]
	if r.firstPushInGrants {
		upTo(r.grants[3]+perPhase, "after the first push", never)
	}
	mark(4)
	halt()
	r.subscribedOnNewNode = nodes[1].PubSubShardNumSub(ctx, channel).Val()[channel]
	r.spans = o.spans
	return r
}

// check asserts what every reshard run must show: no two permits out at
// once, pushes again after the move, both instances subscribed on the
// slot's new node; and it logs the figures (-v; docs/benchmarks-fleet.md).
func (r reshardRun) check(t *testing.T) {
	t.Helper()
	d := func(x [5]uint64, i, j int) uint64 { return x[j] - x[i] }
	rate := func(i, j int) string {
		return fmt.Sprintf("%.0f grants/s", float64(r.grants[j]-r.grants[i])/r.at[j].Sub(r.at[i]).Seconds())
	}
	t.Logf("before the move: %d grants, %s, %d pushes, %d polls", r.grants[1]-r.grants[0], rate(0, 1), d(r.pushes, 0, 1), d(r.polls, 0, 1))
	t.Logf("the move (slot %d, node 0 to 1): %v, %d grants during it", r.slot, r.at[2].Sub(r.at[1]).Round(time.Millisecond), r.grants[2]-r.grants[1])
	t.Logf("from the move to the first push after it: %v, %d grants (%s), %d pushes, %d polls",
		r.at[3].Sub(r.at[2]).Round(time.Millisecond), r.grants[3]-r.grants[2], rate(2, 3), d(r.pushes, 2, 3), d(r.polls, 2, 3))
	t.Logf("after the first push: %d grants, %s, %d pushes, %d polls", r.grants[4]-r.grants[3], rate(3, 4), d(r.pushes, 3, 4), d(r.polls, 3, 4))

	assert.LessOrEqual(t, maxInUse(r.spans), int64(1), "two permits out at once")
	checkFences(t, r.spans)
	assert.Empty(t, errors.Join(r.errs...), "Acquire failed")
	assert.Greater(t, d(r.pushes, 0, 1), d(r.polls, 0, 1), "before the move, waiters are woken mostly by pushes")
	require.True(t, r.firstPushInGrants, "no push in %d grants after the move, %d polls: the subscription stayed on the old node",
		r.grants[3]-r.grants[2], d(r.polls, 2, 3))
	assert.Greater(t, d(r.pushes, 3, 4), d(r.polls, 3, 4), "after the move, waiters are woken mostly by pushes again")
	assert.EqualValues(t, 2, r.subscribedOnNewNode, "both instances subscribed on the slot's new node")
}

// After a reshard moves a lane's slot to another master mid-run, the
// lane's waiters are woken by pushes again within one poll interval: the
// hub's sharded subscription follows the slot to its new node when the old
// node drops it (Redis sends an sunsubscribe to the subscribers of a
// slot's channels when a node loses the slot), instead of staying there
// while the waiters fall back to polling. No two permits are out at once,
// across the move. The figures it logs (-v) are in docs/benchmarks-fleet.md.
//
// Before the fix: no push after the move, every grant by a poll, and no
// subscription on the new node.
func TestClusterReshardSubscriptionFollowsTheSlot(t *testing.T) {
	r := runReshard(t, 150, 60)
	r.check(t)
	// Within one poll interval: each instance's head waiter (the one of its
	// line queued in Redis) polls at most once, on the timer it had when
	// the slot moved, before a push comes. (The pushes of the hand-overs
	// made while the slot moved are lost: they cost that one poll.)
	assert.LessOrEqual(t, r.polls[3]-r.polls[2], uint64(2), "polls between the move and the first push after it")
}

// The backstop: if the node's sunsubscribe is never heard, a hub's shard
// channel connection that stays silent for receiveTimeout subscribes again
// on its node, which answers MOVED, and the hub follows the slot then.
func TestClusterReshardBackstopWithoutSunsubscribe(t *testing.T) {
	defer redislane.WithoutSunsubscribe(300 * time.Millisecond)()
	r := runReshard(t, 100, 100)
	r.check(t)
}

// A waiter whose client's slot map is stale (the slot moved since the
// client last read it) subscribes to the lane's shard channel on the node
// that served the slot before; that node answers MOVED, and the hub
// subscribes again on the node MOVED names, so the waiter is woken by the
// release's push. Before the fix the refused subscription stayed refused:
// the waiter only polled.
func TestClusterSubscriptionWithAStaleSlotMap(t *testing.T) {
	cluster := startClusterNodes(t, 3)
	addrs := cluster.Addrs()
	direct := clusterClient(t, addrs[0])
	ctx := testCtx(t)
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	if len(info) == 0 || info[0] == nil {
		t.Skip("the server has no sharded pub/sub")
	}
	nodes := make([]*redis.Client, len(addrs))
	for i, addr := range addrs {
		nodes[i] = newClient(t, addr)
	}
	lane := laneOnSlots(t, direct, 0, 16384/3-1) // on nodes[0]
	slot, err := direct.ClusterKeySlot(ctx, "{lanes:"+lane+"}:meta").Result()
	require.NoError(t, err)
	channel := "{lanes:" + lane + "}:wake"

	stale := clusterClient(t, addrs[0])
	require.NoError(t, stale.Ping(ctx).Err()) // it reads the slot map now
	require.NoError(t, cluster.MoveSlot(ctx, int(slot), 0, 1), "moving the slot")

	opts := []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}
	holder, err := redislane.NewWeighted(clusterClient(t, addrs[0]), lane, 1, opts...)
	require.NoError(t, err)
	defer holder.Close()
	waiter, err := redislane.NewWeighted(stale, lane, 1, opts...)
	require.NoError(t, err)
	defer waiter.Close()
	p, err := holder.Acquire(ctx, 1)
	require.NoError(t, err)
	got := acquireAsync(ctx, waiter)
	// The holder's Acquire subscribed too (through a client that read the
	// slot map after the move).
	waitFor(t, 10*time.Second, "the waiter to queue, and both instances to subscribe on the slot's new node", func() bool {
		return nodes[1].PubSubShardNumSub(ctx, channel).Val()[channel] == 2 &&
			nodes[1].ZCard(ctx, "{lanes:"+lane+"}:g:q").Val() == 1
	})
	p.Release()
	require.NoError(t, testkit.Recv(t, got, "the waiter's grant"))
	assert.EqualValues(t, 1, waiter.Stats().Handovers, "the waiter was not woken by the release's push")
}
