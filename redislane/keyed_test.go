package redislane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

func newKeyed(t *testing.T, addr, name string, perKey int64) *redislane.Keyed {
	t.Helper()
	k, err := redislane.NewKeyed(newClient(t, addr), name, perKey, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

// One key runs one at a time across instances; other keys are not held up.
func TestKeyedSerialisesOneKeyNotOthers(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newKeyed(t, srv.Addr, name, 1)
	b := newKeyed(t, srv.Addr, name, 1)
	ctx := testCtx(t)

	p, err := a.Acquire(ctx, "thread-1")
	require.NoError(t, err)
	x, ok := b.TryAcquire("thread-1")
	refused(t, x, ok, "the same key ran twice at once")
	q, ok := b.TryAcquire("thread-2")
	require.True(t, ok, "another key was held up")
	q.Release()

	got := make(chan *redislane.Permit)
	go func() {
		r, err := b.Acquire(ctx, "thread-1")
		assert.NoError(t, err)
		got <- r
	}()
	waitFor(t, 5*time.Second, "b to wait for thread-1", func() bool { return b.Stats().Waiters == 1 })
	p.Release()
	r := testkit.Within(t, 30*time.Second, "the hand-over", got)
	assert.Greater(t, r.Fence(), p.Fence())
	r.Release()
}

// Several instances and goroutines on a few keys: per key, at most one
// holder at a time, and fencing tokens increase in the order of the grants
// (a true fencing token for a per-key lock).
func TestKeyedOracleAndFencingPerKey(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	keys := []string{"a", "b", "c"}
	spans := make(map[string]*oracle)
	for _, k := range keys {
		spans[k] = &oracle{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		kd := newKeyed(t, srv.Addr, name, 1)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					key := keys[rand.IntN(len(keys))]
					p, err := kd.Acquire(ctx, key)
					if err != nil {
						continue
					}
					start := redistest.Now()
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond) // the work
					spans[key].add(span{Start: start, End: endOf(p.Deadline()), W: 1, Fence: p.Fence()})
					p.Release()
				}
			}()
		}
	}
	wg.Wait()
	for _, k := range keys {
		ss := spans[k].spans
		require.NotEmpty(t, ss, "key %s was never granted", k)
		assert.LessOrEqual(t, maxInUse(ss), int64(1), "key %s had two holders at once", k)
		sort.Slice(ss, func(i, j int) bool { return ss[i].Start < ss[j].Start })
		for i := 1; i < len(ss); i++ {
			assert.Greater(t, ss[i].Fence, ss[i-1].Fence, "key %s: fencing tokens out of grant order", k)
		}
	}
}

// A key leaves nothing behind in Redis once idle: its keys carry an expiry.
func TestKeyedIdleKeysExpire(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	k := newKeyed(t, srv.Addr, name, 2)
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t)
	p, err := k.Acquire(ctx, "job-7", semaphore.Weight(2))
	require.NoError(t, err)
	p.Release()
	prefix := "{lanes:" + name + "}:k:job-7:"
	for _, suffix := range []string{"h", "q", "x", "d"} {
		ttl := rc.PTTL(ctx, prefix+suffix).Val()
		// -2: the key is gone; otherwise it must expire.
		assert.True(t, ttl == -2 || ttl > 0, "%s%s never expires (PTTL %v)", prefix, suffix, ttl)
	}
	keys, err := rc.Keys(ctx, "{lanes:"+name+"}*").Result()
	require.NoError(t, err)
	t.Logf("keys left: %v", keys)
}

// The adapters make the lanes plug into a lanequeue.Queue: kind, weight
// bound, permits whose Release runs the Redis release, and stats.
func TestLaneAdapters(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	s := newSem(t, srv.Addr, laneName(t), 4)
	g := redislane.AsLane[int](s)
	assert.Equal(t, lanequeue.Global, g.Kind())
	assert.EqualValues(t, 4, g.MaxWeight())
	p, err := g.Acquire(ctx, 42, 3)
	require.NoError(t, err)
	assert.EqualValues(t, 3, p.Weight())
	rp := redislane.PermitOf(p)
	require.NotNil(t, rp)
	assert.Positive(t, rp.Fence())
	x, ok := g.TryAcquire(7, 2)
	refused(t, x, ok)
	st := g.Stats()
	assert.Equal(t, s.Name(), st.Name)
	assert.Equal(t, lanequeue.Global, st.Kind)
	assert.EqualValues(t, 4, st.Capacity)
	assert.EqualValues(t, 3, st.Held)
	assert.True(t, p.Release())
	assert.ErrorIs(t, context.Cause(rp.Context()), redislane.ErrReleased)
	assert.Zero(t, g.Stats().Held)
	x, err = g.Acquire(ctx, 1, 5)
	failed(t, x, err, redislane.ErrTooHeavy)

	type session struct {
		Channel string
		Thread  int
	}
	kd := newKeyed(t, srv.Addr, laneName(t), 1)
	kl := redislane.AsKeyedLane(kd, func(k session) string { return fmt.Sprintf("%s/%d", k.Channel, k.Thread) })
	assert.Equal(t, lanequeue.Keyed, kl.Kind())
	assert.EqualValues(t, 1, kl.MaxWeight())
	a, err := kl.Acquire(ctx, session{"slack", 1}, 1)
	require.NoError(t, err)
	x, ok = kl.TryAcquire(session{"slack", 1}, 1)
	refused(t, x, ok)
	b, ok := kl.TryAcquire(session{"slack", 2}, 1)
	require.True(t, ok)
	assert.EqualValues(t, 2, kl.Stats().Held)
	a.Release()
	assert.True(t, b.Release())
	assert.False(t, b.Release())

	assert.Nil(t, redislane.PermitOf(semaphore.Permit{}))
	local, ok := semaphore.New(1).TryAcquire(1)
	require.True(t, ok)
	assert.Nil(t, redislane.PermitOf(local), "a local permit is not a Redis permit")
	local.Release()
}
