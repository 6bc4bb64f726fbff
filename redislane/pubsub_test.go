package redislane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// Hand-overs wake the next waiter through sharded pub/sub (SPUBLISH and
// SSUBSCRIBE) where the server has it, so that a Cluster does not
// broadcast them to every node, and through PUBLISH and SUBSCRIBE with
// WithClassicPubSub (or on a server without it). Both paths are run on the
// local server; which one was taken is read from Redis (PUBSUB SHARDNUMSUB,
// PUBSUB NUMSUB) while the waiter waits.
func TestHandoverThroughShardedAndClassicPubSub(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	ctx := context.Background()
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	serverHas := len(info) > 0 && info[0] != nil
	if !serverHas {
		t.Logf("this redis-server has no sharded pub/sub: both runs take the classic path")
	}
	for _, classic := range []bool{false, true} {
		name := "sharded"
		if classic {
			name = "classic"
		}
		t.Run(name, func(t *testing.T) {
			lane := laneName(t)
			// The holder's permit must outlast the subscriptions and the
			// waiter's queueing on a loaded machine: a lease of its own.
			opts := []redislane.Option{redislane.WithLease(handoverLease)}
			if classic {
				opts = append(opts, redislane.WithClassicPubSub())
			}
			a := newSem(t, srv.Addr, lane, 1, opts...)
			b := newSem(t, srv.Addr, lane, 1, opts...)
			p, err := a.Acquire(ctx, 1)
			require.NoError(t, err)
			got := acquireAsync(ctx, b)
			channel := "{lanes:" + lane + "}:wake"
			sharded := serverHas && !classic
			waitFor(t, 5*time.Second, "both instances to subscribe and the waiter to queue", func() bool {
				n := direct.PubSubNumSub(ctx, channel).Val()[channel]
				if sharded {
					n = direct.PubSubShardNumSub(ctx, channel).Val()[channel]
				}
				return n >= 2 && direct.ZCard(ctx, "{lanes:"+lane+"}:g:q").Val() == 1
			})
			if sharded {
				assert.Zero(t, direct.PubSubNumSub(ctx, channel).Val()[channel], "subscribed to the classic channel too")
			} else if serverHas {
				assert.Zero(t, direct.PubSubShardNumSub(ctx, channel).Val()[channel], "subscribed to the shard channel too")
			}
			p.Release()
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter was never granted")
			}
			assert.EqualValues(t, 1, b.Stats().Handovers, "the waiter was not woken by the message")
		})
	}
}

// replyErr is an error reply from the server, as go-redis returns one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (e replyErr) RedisError()   {}

// noCommand is a go-redis hook that answers COMMAND with an error reply,
// as a proxy or an ACL that does not pass it would.
type noCommand struct{ commandHook }

func (noCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "command" {
			err := replyErr("ERR unknown command 'COMMAND'")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// A server (or proxy) that will not say whether it has sharded pub/sub is
// used with the classic commands, and the lane works: the error reply is
// not taken for a failure of the lane's calls.
func TestUnansweredCommandInfoFallsBackToClassicPubSub(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	ctx := context.Background()
	lane := laneName(t)
	a := newSem(t, srv.Addr, lane, 1, redislane.WithLease(handoverLease))
	rc := newClient(t, srv.Addr)
	rc.AddHook(noCommand{})
	b, err := redislane.NewWeighted(rc, lane, 1, redislane.WithLease(handoverLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer b.Close()
	p, err := b.Acquire(ctx, 1)
	require.NoError(t, err, "the lane failed without COMMAND")
	p.Release()

	p, err = a.Acquire(ctx, 1)
	require.NoError(t, err)
	got := acquireAsync(ctx, b)
	channel := "{lanes:" + lane + "}:wake"
	waitFor(t, 5*time.Second, "the waiter to subscribe (classic) and queue", func() bool {
		return direct.PubSubNumSub(ctx, channel).Val()[channel] >= 1 &&
			direct.ZCard(ctx, "{lanes:"+lane+"}:g:q").Val() == 1
	})
	p.Release()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was never granted")
	}
}
