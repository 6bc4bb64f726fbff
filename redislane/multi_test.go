package redislane_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// pair is one instance's handles of a Keyed and a Weighted made with one
// hash tag, on one client.
type pair struct {
	rc *redis.Client
	k  *redislane.Keyed
	g  *redislane.Weighted
}

func newPair(t *testing.T, addr, tag, name string, perKey, capacity int64, lease time.Duration) pair {
	t.Helper()
	rc := newClient(t, addr)
	opts := []redislane.Option{redislane.WithLease(lease), redislane.WithQuarantine(0), redislane.WithHashTag(tag)}
	k, err := redislane.NewKeyed(rc, name+"-k", perKey, opts...)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	g, err := redislane.NewWeighted(rc, name+"-g", capacity, opts...)
	require.NoError(t, err)
	t.Cleanup(g.Close)
	return pair{rc: rc, k: k, g: g}
}

// Bucket keys of a pair's lanes, as the package doc names them.
func (p pair) kKey(tag, key, part string) string {
	return "{lanes:" + tag + "}{" + p.k.Name() + "}:k:" + key + ":" + part
}

func (p pair) gKey(tag, part string) string {
	return "{lanes:" + tag + "}{" + p.g.Name() + "}:g:" + part
}

// zcard reads a zset's size, failing the test on an error.
func zcard(t *testing.T, rc *redis.Client, key string) int64 {
	t.Helper()
	n, err := rc.ZCard(context.Background(), key).Result()
	require.NoError(t, err)
	return n
}

// Many goroutines of three instances take a key of a Keyed and units of a
// Weighted together, beside callers that take each alone (queueing in
// Redis). A grant is always both permits or none, neither lane ever has
// more in use than its capacity, and once everything is released both
// lanes are wholly free: no refused call left a hold behind.
func TestTryAcquireAllAllOrNothingUnderContention(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	name, tag := laneName(t), laneName(t)
	const perKey, capacity = 2, 3
	// Three instances call TryAcquireAll, a fourth takes each lane alone.
	var ps []pair
	for range 3 {
		ps = append(ps, newPair(t, srv.Addr, tag, name, perKey, capacity, handoverLease))
	}
	single := newPair(t, srv.Addr, tag, name, perKey, capacity, handoverLease)
	var inK, inG, maxK, maxG atomic.Int64
	var both, waitedBoth, refused, singles atomic.Int64
	var bad atomic.Value
	use := func(c, max *atomic.Int64, n, limit int64, what string) {
		v := c.Add(n)
		for {
			m := max.Load()
			if v <= m || max.CompareAndSwap(m, v) {
				break
			}
		}
		if v > limit {
			bad.Store(fmt.Sprintf("%s: %d in use, capacity %d", what, v, limit))
		}
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := int64(1 + (i+j)%2)
				for granted := 0; granted < 15; {
					if ctx.Err() != nil {
						bad.Store("timed out: TryAcquireAll granted " + fmt.Sprint(granted) + " of 15")
						return
					}
					got, ok, err := redislane.TryAcquireAll(p.k.Request("a", 1), p.g.Request(n))
					if err != nil {
						bad.Store("TryAcquireAll: " + err.Error())
						return
					}
					if !ok {
						if got != nil {
							bad.Store("refused with permits")
						}
						refused.Add(1)
						continue
					}
					if len(got) != 2 || got[0] == nil || got[1] == nil {
						bad.Store(fmt.Sprintf("granted %v: not both permits", got))
						return
					}
					both.Add(1)
					granted++
					use(&inK, &maxK, 1, perKey, "key a")
					use(&inG, &maxG, n, capacity, "weighted")
					runtime.Gosched() // hold across others' calls
					inK.Add(-1)
					inG.Add(-n)
					got[0].Release()
					got[1].Release()
				}
			}()
		}
	}
	// Callers of AcquireAll, which wait in one lane's queue at a time, on
	// instances of their own (a waiter of an instance makes TryAcquireAll
	// refuse at once).
	for i := range 2 {
		p := newPair(t, srv.Addr, tag, name, perKey, capacity, handoverLease)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(1 + i%2)
			for range 10 {
				got, err := redislane.AcquireAll(ctx, p.g.Request(n), p.k.Request("a", 1))
				if err != nil {
					bad.Store("AcquireAll: " + err.Error())
					return
				}
				if len(got) != 2 || got[0] == nil || got[1] == nil {
					bad.Store(fmt.Sprintf("AcquireAll granted %v: not both permits", got))
					return
				}
				waitedBoth.Add(1)
				use(&inK, &maxK, 1, perKey, "key a")
				use(&inG, &maxG, n, capacity, "weighted")
				runtime.Gosched()
				inK.Add(-1)
				inG.Add(-n)
				got[0].Release()
				got[1].Release()
			}
		}()
	}
	// Single callers that wait in Redis's queues, on each lane.
	for range 2 {
		p := single
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				q, err := p.g.Acquire(ctx, 2)
				if err != nil {
					bad.Store("Weighted.Acquire: " + err.Error())
					return
				}
				singles.Add(1)
				use(&inG, &maxG, 2, capacity, "weighted")
				inG.Add(-2)
				q.Release()
			}
		}()
		go func() {
			defer wg.Done()
			for range 20 {
				q, err := p.k.Acquire(ctx, "a", semaphore.Weight(2))
				if err != nil {
					bad.Store("Keyed.Acquire: " + err.Error())
					return
				}
				singles.Add(1)
				use(&inK, &maxK, 2, perKey, "key a")
				inK.Add(-2)
				q.Release()
			}
		}()
	}
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	t.Logf("both granted %d (AcquireAll %d), refused %d, single grants %d, most in use: key %d, weighted %d",
		both.Load(), waitedBoth.Load(), refused.Load(), singles.Load(), maxK.Load(), maxG.Load())
	require.Positive(t, both.Load(), "no call took both")
	require.Positive(t, refused.Load(), "no call was refused: no contention")

	// Releases may still be on their way: wait for the holders to go.
	p := ps[0]
	waitFor(t, 5*time.Second, "every hold to be released", func() bool {
		return zcard(t, p.rc, p.kKey(tag, "a", "h")) == 0 && zcard(t, p.rc, p.gKey(tag, "h")) == 0
	})
	got, ok, err := redislane.TryAcquireAll(p.k.Request("a", perKey), p.g.Request(capacity))
	require.NoError(t, err)
	require.True(t, ok, "the lanes' whole capacity is not free after every permit was released")
	got[0].Release()
	got[1].Release()
}

// A refusal because one lane is busy takes nothing from the other, in
// either order of the requests.
func TestTryAcquireAllRefusalLeavesTheOtherUntouched(t *testing.T) {
	srv := startRedis(t)
	name, tag := laneName(t), laneName(t)
	p := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)
	q := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)

	// The Weighted is busy; it comes second, then first.
	h, ok := q.g.TryAcquire(1)
	require.True(t, ok)
	got, ok, err := redislane.TryAcquireAll(p.k.Request("a", 1), p.g.Request(1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted with the Weighted held")
	got, ok, err = redislane.TryAcquireAll(p.g.Request(1), p.k.Request("a", 1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted with the Weighted held")
	assert.Zero(t, zcard(t, p.rc, p.kKey(tag, "a", "h")), "a refused call left a hold on the key")
	assert.Zero(t, zcard(t, p.rc, p.kKey(tag, "a", "q")), "a refused call queued on the key")
	kp, ok := q.k.TryAcquire("a")
	require.True(t, ok, "the key is not free after refused calls")
	h.Release()

	// The key is busy; it comes second, then first.
	got, ok, err = redislane.TryAcquireAll(p.g.Request(1), p.k.Request("a", 1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted with the key held")
	got, ok, err = redislane.TryAcquireAll(p.k.Request("a", 1), p.g.Request(1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted with the key held")
	waitFor(t, 5*time.Second, "the Weighted's holder to go", func() bool { return zcard(t, p.rc, p.gKey(tag, "h")) == 0 })
	gp, ok := q.g.TryAcquire(1)
	require.True(t, ok, "the Weighted is not free after refused calls")
	gp.Release()
	kp.Release()

	// Both free: both granted, with fences above the earlier ones.
	waitFor(t, 5*time.Second, "the key's holder to go", func() bool { return zcard(t, p.rc, p.kKey(tag, "a", "h")) == 0 })
	got, ok, err = redislane.TryAcquireAll(p.k.Request("a", 1), p.g.Request(1))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Greater(t, got[0].Fence(), kp.Fence())
	assert.Greater(t, got[1].Fence(), gp.Fence())
	releaseAll(got)
}

// releaseAll releases permits.
func releaseAll(ps []*redislane.Permit) { permits(ps).Release() }

// permits releases them all, for refused and failed.
type permits []*redislane.Permit

func (ps permits) Release() bool {
	for _, p := range ps {
		p.Release()
	}
	return len(ps) > 0
}

// A waiter queued in Redis on one lane is not overtaken: with room for the
// request but not for the waiter ahead of it, nothing is granted, and the
// waiter gets the units when they are released.
func TestTryAcquireAllDoesNotOvertakeAQueuedWaiter(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	name, tag := laneName(t), laneName(t)
	a := newPair(t, srv.Addr, tag, name, 1, 2, handoverLease)
	b := newPair(t, srv.Addr, tag, name, 1, 2, handoverLease)
	c := newPair(t, srv.Addr, tag, name, 1, 2, handoverLease)

	h, ok := a.g.TryAcquire(1)
	require.True(t, ok)
	waited := make(chan error, 1)
	go func() {
		p, err := b.g.Acquire(ctx, 2)
		if err == nil {
			p.Release()
		}
		waited <- err
	}()
	waitFor(t, 5*time.Second, "the waiter to queue in Redis", func() bool { return zcard(t, c.rc, c.gKey(tag, "q")) == 1 })

	got, ok, err := redislane.TryAcquireAll(c.k.Request("a", 1), c.g.Request(1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted ahead of a waiter queued in Redis")
	assert.Zero(t, zcard(t, c.rc, c.kKey(tag, "a", "h")), "a refused call left a hold on the key")

	h.Release()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the queued waiter was never granted")
	}
}

// A lane closed by a cooldown grants nothing to TryAcquireAll, and the
// other lane keeps nothing of the call.
func TestTryAcquireAllRespectsACooldown(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	name, tag := laneName(t), laneName(t)
	p := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)
	_, err := p.g.Cooldown(ctx, time.Minute)
	require.NoError(t, err)
	got, ok, err := redislane.TryAcquireAll(p.k.Request("a", 1), p.g.Request(1))
	require.NoError(t, err)
	refused(t, permits(got), ok, "granted on a lane in its cooldown")
	assert.Zero(t, zcard(t, p.rc, p.kKey(tag, "a", "h")), "a refused call left a hold on the key")
}

// Requests that cannot go in one call are refused at once, with a clear
// error.
func TestTryAcquireAllRefusesWhatCannotGoTogether(t *testing.T) {
	srv := startRedis(t)
	name, tag := laneName(t), laneName(t)
	p := newPair(t, srv.Addr, tag, name, 1, 2, testLease)
	q := newPair(t, srv.Addr, tag, name, 1, 2, testLease) // another client

	seq, err := redislane.NewKeyed(p.rc, name+"-seq", 1, redislane.WithSequenceOrder(), redislane.WithHashTag(tag))
	require.NoError(t, err)
	defer seq.Close()
	quota, err := redislane.NewWeighted(p.rc, name+"-quota", 10, redislane.WithQuota(2), redislane.WithHashTag(tag))
	require.NoError(t, err)
	defer quota.Close()
	// Two values of one lane (one name on one client) are one bucket in
	// Redis: both requests would be checked against the same room.
	twin := func() *redislane.Weighted {
		w, err := redislane.NewWeighted(p.rc, name+"-twin", 3, redislane.WithHashTag(tag))
		require.NoError(t, err)
		t.Cleanup(w.Close)
		return w
	}
	ktwin := func() *redislane.Keyed {
		k, err := redislane.NewKeyed(p.rc, name+"-ktwin", 2, redislane.WithHashTag(tag))
		require.NoError(t, err)
		t.Cleanup(k.Close)
		return k
	}
	g1, g2, k1, k2 := twin(), twin(), ktwin(), ktwin()

	for _, c := range []struct {
		what   string
		reqs   []redislane.Request
		target error
	}{
		{"no request", nil, redislane.ErrInvalidConfig},
		{"a zero Request", []redislane.Request{p.g.Request(1), {}}, redislane.ErrInvalidConfig},
		{"one bucket twice", []redislane.Request{p.k.Request("a", 1), p.g.Request(1), p.k.Request("a", 1)}, redislane.ErrInvalidConfig},
		{"one lane twice, through two values of it", []redislane.Request{g1.Request(2), g2.Request(2)}, redislane.ErrInvalidConfig},
		{"one key twice, through two values of its lane", []redislane.Request{k1.Request("a", 2), k2.Request("a", 2)}, redislane.ErrInvalidConfig},
		{"two clients", []redislane.Request{p.k.Request("a", 1), q.g.Request(1)}, redislane.ErrInvalidConfig},
		{"a sequenced Keyed", []redislane.Request{p.g.Request(1), seq.Request("a", 1)}, redislane.ErrInvalidConfig},
		{"a Weighted WithQuota", []redislane.Request{p.k.Request("a", 1), quota.Request(1)}, redislane.ErrInvalidConfig},
		{"weight 0", []redislane.Request{p.k.Request("a", 1), p.g.Request(0)}, redislane.ErrInvalidWeight},
		{"too heavy", []redislane.Request{p.k.Request("a", 2), p.g.Request(1)}, redislane.ErrTooHeavy},
	} {
		got, ok, err := redislane.TryAcquireAll(c.reqs...)
		assert.ErrorIs(t, err, c.target, c.what)
		refused(t, permits(got), ok, c.what)
	}
	// Two keys of one Keyed go together.
	got, ok, err := redislane.TryAcquireAll(p.k.Request("a", 1), p.k.Request("b", 1), p.g.Request(2))
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, got, 3)
	assert.NotEqual(t, got[0].Fence(), got[1].Fence())
	releaseAll(got)

	for _, bad := range []string{"", "a{b", "a}"} {
		_, err := redislane.NewWeighted(p.rc, name+"-bad", 1, redislane.WithHashTag(bad))
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "tag %q", bad)
	}
	_, err = redislane.NewTokens(p.rc, name+"-tokens", 10, redislane.WithHashTag(tag))
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "a Tokens lane WithHashTag")
}

// On a Cluster, lanes made with one hash tag are taken together although
// their names hash to different slots; lanes with different tags are
// refused without a call.
func TestClusterTryAcquireAll(t *testing.T) {
	rc := clusterClient(t, startClusterOf(t, 3)[0]) // three masters
	ctx := testCtx(t)
	name := laneName(t)
	slot := func(key string) int64 {
		s, err := rc.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		return s
	}
	kName, gName := name+"-k", name+"-g"
	for i := 0; slot("{lanes:"+kName+"}") == slot("{lanes:"+gName+"}"); i++ {
		gName = fmt.Sprintf("%s-g%d", name, i)
	}
	opts := func(o ...redislane.Option) []redislane.Option {
		return append([]redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0)}, o...)
	}
	k, err := redislane.NewKeyed(rc, kName, 1, opts(redislane.WithHashTag("shop"))...)
	require.NoError(t, err)
	defer k.Close()
	g, err := redislane.NewWeighted(rc, gName, 1, opts(redislane.WithHashTag("shop"))...)
	require.NoError(t, err)
	defer g.Close()
	got, ok, err := redislane.TryAcquireAll(k.Request("a", 1), g.Request(1))
	require.NoError(t, err)
	require.True(t, ok, "lanes with one tag were not granted on a Cluster")
	got2, ok, err := redislane.TryAcquireAll(g.Request(1), k.Request("b", 1))
	require.NoError(t, err)
	refused(t, permits(got2), ok, "granted with the Weighted held")
	releaseAll(got)

	k2, err := redislane.NewKeyed(rc, kName, 1, opts()...)
	require.NoError(t, err)
	defer k2.Close()
	g2, err := redislane.NewWeighted(rc, gName, 1, opts()...)
	require.NoError(t, err)
	defer g2.Close()
	got, ok, err = redislane.TryAcquireAll(k2.Request("a", 1), g2.Request(1))
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
	refused(t, permits(got), ok, "lanes of different slots granted")
	got, ok, err = redislane.TryAcquireAll(k.Request("a", 1), g2.Request(1))
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
	refused(t, permits(got), ok, "lanes of different tags granted")
}

// AcquireAll waits for each busy lane in its queue, holding nothing else:
// when the lane it waited on is granted and the other refuses, it gives
// that permit back and waits on the other; it returns both once both are
// free, and a cancelled call leaves nothing held or queued.
func TestAcquireAllWaitsOnTheLaneThatRefusesHoldingNothingElse(t *testing.T) {
	srv := startRedis(t)
	ctx := testCtx(t)
	name, tag := laneName(t), laneName(t)
	p := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)
	other := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)

	hk, ok := other.k.TryAcquire("a")
	require.True(t, ok)
	hg, ok := other.g.TryAcquire(1)
	require.True(t, ok)
	type result struct {
		ps  []*redislane.Permit
		err error
	}
	done := make(chan result, 1)
	go func() {
		ps, err := redislane.AcquireAll(ctx, p.k.Request("a", 1), p.g.Request(1))
		done <- result{ps, err}
	}()
	// The key refuses first: the call waits in its queue, not the Weighted's.
	waitFor(t, 5*time.Second, "the call to queue on the key", func() bool { return zcard(t, p.rc, p.kKey(tag, "a", "q")) == 1 })
	assert.Zero(t, zcard(t, p.rc, p.gKey(tag, "q")), "queued on the Weighted while waiting on the key")
	assert.EqualValues(t, 1, zcard(t, p.rc, p.gKey(tag, "h")), "holds the Weighted while waiting on the key")

	// The key is handed to the call; the Weighted refuses: the key goes
	// back and the call waits on the Weighted.
	hk.Release()
	waitFor(t, 5*time.Second, "the call to queue on the Weighted, the key given back", func() bool {
		return zcard(t, p.rc, p.gKey(tag, "q")) == 1 && zcard(t, p.rc, p.kKey(tag, "a", "h")) == 0
	})
	assert.Zero(t, zcard(t, p.rc, p.kKey(tag, "a", "q")), "queued on the key while waiting on the Weighted")

	// A competitor queues on the Weighted behind the call and holds what it
	// gets until the call returns: the call keeps the Weighted it waited
	// for, rather than give it back (to the competitor) and wait again.
	third := newPair(t, srv.Addr, tag, name, 1, 1, handoverLease)
	hold := make(chan struct{})
	compDone := make(chan error, 1)
	go func() {
		q, err := third.g.Acquire(ctx, 1)
		if err == nil {
			<-hold
			q.Release()
		}
		compDone <- err
	}()
	waitFor(t, 5*time.Second, "the competitor to queue", func() bool { return zcard(t, p.rc, p.gKey(tag, "q")) == 2 })

	hg.Release()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("AcquireAll was never granted")
	}
	require.NoError(t, r.err)
	require.Len(t, r.ps, 2)
	require.NotNil(t, r.ps[0])
	require.NotNil(t, r.ps[1])
	assert.EqualValues(t, 1, zcard(t, p.rc, p.kKey(tag, "a", "h")))
	assert.EqualValues(t, 1, zcard(t, p.rc, p.gKey(tag, "h")))
	releaseAll(r.ps)
	close(hold)
	require.NoError(t, <-compDone)

	// Cancelled while it waits: an error, nothing held or queued.
	waitFor(t, 5*time.Second, "the permits' release", func() bool {
		return zcard(t, p.rc, p.gKey(tag, "h")) == 0 && zcard(t, p.rc, p.kKey(tag, "a", "h")) == 0
	})
	hg, ok = other.g.TryAcquire(1)
	require.True(t, ok)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		ps, err := redislane.AcquireAll(cctx, p.k.Request("a", 1), p.g.Request(1))
		done <- result{ps, err}
	}()
	waitFor(t, 5*time.Second, "the call to queue on the Weighted", func() bool { return zcard(t, p.rc, p.gKey(tag, "q")) == 1 })
	cancel()
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("AcquireAll did not return after its context ended")
	}
	failed(t, permits(r.ps), r.err, context.Canceled)
	waitFor(t, 5*time.Second, "the cancelled call to leave nothing behind", func() bool {
		return zcard(t, p.rc, p.gKey(tag, "q")) == 0 && zcard(t, p.rc, p.kKey(tag, "a", "h")) == 0
	})
	hg.Release()
}

// A Fleet takes part as a Weighted does; a lane whose capacity in Redis
// is not the instance's is an error, not a silent false.
func TestTryAcquireAllWithAFleetAndAMismatch(t *testing.T) {
	srv := startRedis(t)
	name, tag := laneName(t), laneName(t)
	p := newPair(t, srv.Addr, tag, name, 1, 2, handoverLease)
	opts := []redislane.Option{redislane.WithLease(handoverLease), redislane.WithQuarantine(0), redislane.WithHashTag(tag)}
	f, err := redislane.NewFleet(p.rc, name+"-fleet", 2, opts...)
	require.NoError(t, err)
	defer f.Close()
	got, ok, err := redislane.TryAcquireAll(p.k.Request("a", 1), f.Request(2))
	require.NoError(t, err)
	require.True(t, ok)
	got2, ok, err := redislane.TryAcquireAll(p.k.Request("b", 1), f.Request(1))
	require.NoError(t, err)
	refused(t, permits(got2), ok, "granted above the fleet's limit")
	releaseAll(got)

	// The Weighted exists with capacity 2; this instance says 3.
	g3, err := redislane.NewWeighted(p.rc, p.g.Name(), 3, opts...)
	require.NoError(t, err)
	defer g3.Close()
	got, ok, err = redislane.TryAcquireAll(p.g.Request(1), p.k.Request("a", 1))
	require.NoError(t, err)
	require.True(t, ok)
	releaseAll(got)
	got, ok, err = redislane.TryAcquireAll(p.k.Request("a", 1), g3.Request(1))
	assert.ErrorIs(t, err, redislane.ErrCapacityMismatch)
	refused(t, permits(got), ok, "granted on a lane of another capacity")
}

// BenchmarkTryAcquireAll: one caller takes a key of a Keyed and a Weighted
// together and releases both. Reports the Redis calls per op: one call
// for the grant of both, one release call per permit.
func BenchmarkTryAcquireAll(b *testing.B) {
	srv := startRedis(b)
	var cnt redistest.Calls
	rc := newClient(b, srv.Addr)
	rc.AddHook(&cnt)
	opts := []redislane.Option{redislane.WithLease(2 * time.Second), redislane.WithQuarantine(0), redislane.WithHashTag("bench")}
	k, err := redislane.NewKeyed(rc, laneName(b), 1, opts...)
	require.NoError(b, err)
	defer k.Close()
	g, err := redislane.NewWeighted(rc, laneName(b), 10, opts...)
	require.NoError(b, err)
	defer g.Close()
	run := func() {
		ps, ok, err := redislane.TryAcquireAll(k.Request("a", 1), g.Request(1))
		if err != nil || !ok {
			b.Fatalf("not granted: %v", err)
		}
		releaseAll(ps)
	}
	for range 100 {
		run() // warms the scripts and the pool
	}
	calls := cnt.Commands()
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	b.ReportMetric(float64(cnt.Commands()-calls)/float64(b.N), "calls/op")
}

// A Weighted and a Keyed of one name share a meta record, which holds one
// kind: a TryAcquireAll that asks for both is a mismatch, whichever comes
// first (the second request on the record was not checked, and both were
// granted on a lane Redis holds as a Weighted).
func TestTryAcquireAllSameRecordOtherKind(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	opts := []redislane.Option{redislane.WithQuarantine(0)}
	w, err := redislane.NewWeighted(rc, name, 2, opts...)
	require.NoError(t, err)
	defer w.Close()
	k, err := redislane.NewKeyed(rc, name, 2, opts...)
	require.NoError(t, err)
	defer k.Close()
	for _, c := range []struct {
		what string
		reqs []redislane.Request
	}{
		{"Weighted, then a Keyed of its name", []redislane.Request{w.Request(1), k.Request("a", 1)}},
		{"Keyed, then a Weighted of its name", []redislane.Request{k.Request("a", 1), w.Request(1)}},
	} {
		got, ok, err := redislane.TryAcquireAll(c.reqs...)
		assert.ErrorIs(t, err, redislane.ErrCapacityMismatch, c.what)
		refused(t, permits(got), ok, c.what)
	}
	// Two keys of one Keyed share the record, of one kind and capacity.
	k2, err := redislane.NewKeyed(rc, name+"-k", 2, opts...)
	require.NoError(t, err)
	defer k2.Close()
	got, ok, err := redislane.TryAcquireAll(k2.Request("a", 1), k2.Request("b", 2))
	require.NoError(t, err)
	require.True(t, ok, "two keys of one Keyed")
	releaseAll(got)
}
