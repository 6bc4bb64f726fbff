package redislane_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// Scenario 4: Redis is killed and restarted empty in the middle of a run.
// With quarantine on (the default), nothing is granted for one lease after
// the lane's state is re-created, so the holders from before the restart,
// whose leases cannot be refreshed any more, end before any new holder
// starts: the oracle never exceeds the limit. Fencing tokens keep
// increasing across the restart.
func TestRedisRestartQuarantineKeepsHoldersApart(t *testing.T) {
	srv := startRedis(t)
	const (
		limit = 4
		lease = 500 * time.Millisecond
	)
	name := laneName(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var o oracle
	var sems []*redislane.Weighted
	for range 3 { // three "processes": an instance and a client each
		s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, limit, redislane.WithLease(lease))
		require.NoError(t, err)
		sems = append(sems, s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, s := range sems {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					w := 1 + rand.Int64N(2)
					p, err := s.Acquire(ctx, w)
					if err != nil {
						if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
							errs <- err
						}
						continue
					}
					start := redistest.Now()
					hold := time.Duration(10+rand.IntN(40)) * time.Millisecond
					select { // the work, cut short if the lease ends
					case <-time.After(hold):
					case <-p.Context().Done():
					}
					o.add(span{Start: start, End: endOf(p.Deadline()), W: w, Fence: p.Fence()})
					p.Release()
				}
			}()
		}
	}

	rc := newClient(t, srv.Addr)
	countGrants := func() int {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.spans)
	}
	waitFor(t, 20*time.Second, "grants before the restart", func() bool { return countGrants() >= 20 })
	// A holder across the restart: its lease must end.
	long, err := sems[0].Acquire(ctx, 1)
	require.NoError(t, err)
	longStart := redistest.Now()
	killedAt := serverMillis(t, rc)
	require.NoError(t, srv.Restart())
	select {
	case <-long.Context().Done():
	case <-time.After(10 * lease):
		t.Fatal("the lease of a holder from before the restart did not end")
	}
	cause := context.Cause(long.Context())
	assert.True(t, errors.Is(cause, redislane.ErrLeaseLost) || errors.Is(cause, redislane.ErrLeaseExpired), "cause %v", cause)
	o.add(span{Start: longStart, End: endOf(long.Deadline()), W: 1, Fence: long.Fence()})
	long.Release()
	before := countGrants()
	waitFor(t, 20*time.Second, "grants after the restart", func() bool { return countGrants() >= before+20 })
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("acquire failed: %v", err)
	}
	for _, s := range sems {
		s.Close()
	}

	spans := o.spans
	assert.LessOrEqual(t, maxInUse(spans), int64(limit), "holders from before the restart overlapped new ones")
	checkFences(t, spans)

	// The lane's state was re-created after the restart, with a quarantine
	// of one lease; every grant after the restart came after it, and its
	// fencing token (seeded from the server clock in µs) is above every
	// token from before.
	qu, err := rc.HGet(context.Background(), "{lanes:"+name+"}:meta", "qu").Result()
	require.NoError(t, err, "the lane's meta hash was not re-created")
	quMillis, err := strconv.ParseInt(qu, 10, 64)
	require.NoError(t, err)
	assert.Greater(t, quMillis, killedAt, "no quarantine after the restart")
	var maxBefore, minAfter int64 = 0, 1 << 62
	for _, s := range spans {
		if s.Fence/1000 <= killedAt {
			maxBefore = max(maxBefore, s.Fence)
		} else {
			minAfter = min(minAfter, s.Fence)
		}
	}
	assert.Less(t, maxBefore, minAfter, "fencing tokens went backwards across the restart")
	assert.GreaterOrEqual(t, minAfter/1000, quMillis, "granted during the quarantine")
}
