package redislane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// On a Ring client, a lane's keys and its wake channel live on the shard
// of the lane's hash tag, a server of its own, so each channel, sharded or
// classic, is subscribed on that shard, on a connection of its own. Lanes
// on both shards of a Ring are handed over by a message. Before, the first
// waiter of a Ring client panicked (go-redis's Ring.Subscribe needs a
// channel, and the hub made its connection with none), holding the hub's
// lock.
func TestRingHandsOverOnEveryShard(t *testing.T) {
	s1, s2 := startRedis(t), startRedis(t)
	ring := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": s1.Addr, "b": s2.Addr}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	ra, rb := ring(), ring()
	servers := []*redis.Client{newClient(t, s1.Addr), newClient(t, s2.Addr)}
	ctx := testCtx(t)
	for _, classic := range []bool{false, true} {
		opts := []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}
		kind := "sharded"
		if classic {
			opts = append(opts, redislane.WithClassicPubSub())
			kind = "classic"
		}
		covered := map[int]bool{}
		for i := 0; len(covered) < 2; i++ {
			require.Less(t, i, 30, "%s: no lane on one of the shards", kind)
			lane := laneName(t)
			a, err := redislane.NewWeighted(ra, lane, 1, opts...)
			require.NoError(t, err)
			defer a.Close()
			b, err := redislane.NewWeighted(rb, lane, 1, opts...)
			require.NoError(t, err)
			defer b.Close()
			p, err := a.Acquire(ctx, 1)
			require.NoError(t, err)
			shard := -1
			for j, srv := range servers {
				if srv.Exists(ctx, "{lanes:"+lane+"}:meta").Val() == 1 {
					shard = j
				}
			}
			require.NotEqual(t, -1, shard, "the lane's keys are on neither shard")
			covered[shard] = true
			got := acquireAsync(ctx, b)
			srv, channel := servers[shard], "{lanes:"+lane+"}:wake"
			waitFor(t, 10*time.Second, kind+": both instances to subscribe on the lane's shard, and the waiter to queue", func() bool {
				n := srv.PubSubNumSub(ctx, channel).Val()[channel]
				if !classic {
					n = srv.PubSubShardNumSub(ctx, channel).Val()[channel]
				}
				return n >= 2 && srv.ZCard(context.Background(), "{lanes:"+lane+"}:g:q").Val() == 1
			})
			p.Release()
			require.NoError(t, testkit.Recv(t, got, "the waiter's grant"))
			assert.EqualValues(t, 1, b.Stats().Handovers, "%s: lane on shard %d: the waiter was not woken by the message", kind, shard)
		}
	}
}
