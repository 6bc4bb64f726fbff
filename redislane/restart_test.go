package redislane_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// Scenario 4: Redis is killed and restarted empty in the middle of a run.
// With quarantine on (the default), nothing is granted for one lease after
// the lane's state is re-created, so the holders from before the restart,
// whose leases cannot be refreshed any more, end before any new holder
// starts: the oracle never exceeds the limit. Fencing tokens keep
// increasing across the restart. Scenario 9 is the same run with a
// snapshot saved before the last grants: the restarted server loads it,
// and the lane, whose meta hash came back, must see the restart all the
// same (TestSnapshotRestartQuarantineOutlastsCutOffHolder shows the
// overlap deterministically).
func TestRedisRestartQuarantineKeepsHoldersApart(t *testing.T) {
	for _, fromSnapshot := range []bool{false, true} {
		t.Run(map[bool]string{false: "empty", true: "from-snapshot"}[fromSnapshot], func(t *testing.T) {
			restartMidRun(t, fromSnapshot)
		})
	}
}

func restartMidRun(t *testing.T, fromSnapshot bool) {
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
	if fromSnapshot {
		require.NoError(t, rc.Save(ctx).Err())
		saved := countGrants()
		waitFor(t, 20*time.Second, "grants after the snapshot", func() bool { return countGrants() >= saved+5 })
	}
	// A holder across the restart: its lease must end.
	long, err := sems[0].Acquire(ctx, 1)
	require.NoError(t, err)
	longStart := redistest.Now()
	killedAt := serverMillis(t, rc)
	require.NoError(t, srv.Restart())
	if fromSnapshot { // else the run only repeats the empty restart
		info, err := rc.Info(ctx, "persistence").Result()
		require.NoError(t, err)
		require.NotContains(t, info, "rdb_last_load_keys_loaded:0\r", "the restart loaded no snapshot: the test proves nothing")
		require.Contains(t, info, "rdb_last_load_keys_loaded:", "no load figure in INFO persistence (Redis 7 has it)")
	}
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

// Scenario 9: Redis restarted from its own snapshot. The lane's state comes
// back without the grants made after the snapshot, but with its meta hash,
// so the lane cannot see the loss in its state: it sees that the state was
// written by another server process (its run_id), and quarantines the lane
// as after a restart with no state. The holder granted after the snapshot
// is cut off from the new Redis (the worst case: it cannot learn that its
// lease is gone) and keeps its permit until its local deadline; the next
// grant comes after it. Without the run_id check, the next holder is
// granted at once: two valid permits on capacity 1. The restart is found
// by whichever call comes first: the next holder's acquire, or a refresh of
// its instance (whose permit on another key, granted after the snapshot
// too, is found lost).
func TestSnapshotRestartQuarantineOutlastsCutOffHolder(t *testing.T) {
	for _, byRefresh := range []bool{false, true} {
		t.Run(map[bool]string{false: "found-by-acquire", true: "found-by-refresh"}[byRefresh], func(t *testing.T) {
			srv := startRedis(t)
			direct := newClient(t, srv.Addr)
			name := laneName(t)
			// As in TestRestartQuarantineOutlastsCutOffHolder; found by a
			// refresh, the restart and the refresh that finds it must end
			// before old's lease does, so that lease has more room.
			lease := 2 * time.Second
			if byRefresh {
				lease = 4 * time.Second
			}
			px, rc, _ := proxied(t, srv.Addr, 100*time.Millisecond)
			a, err := redislane.NewKeyed(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)
			t.Cleanup(a.Close)
			b, err := redislane.NewKeyed(newClient(t, srv.Addr), name, 1, redislane.WithLease(lease), redislane.WithQuarantine(lease))
			require.NoError(t, err)
			t.Cleanup(b.Close)
			ctx := testCtx(t)

			// The lane's state, without a quarantine (a's), then the
			// snapshot: it has the meta hash and no holder.
			first, err := a.Acquire(ctx, "k")
			require.NoError(t, err)
			first.Release()
			require.NoError(t, direct.Save(ctx).Err())

			old, err := a.Acquire(ctx, "k")
			require.NoError(t, err)
			var other *redislane.Permit
			if byRefresh {
				other, err = b.Acquire(ctx, "other")
				require.NoError(t, err)
				defer other.Release()
			}
			px.black.Store(true)
			require.NoError(t, srv.Restart()) // kill -9; the new server loads the snapshot
			n, err := direct.Exists(ctx, "{lanes:"+name+"}:meta").Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "the snapshot was not loaded: the test proves nothing")
			if byRefresh {
				testkit.Within(t, 10*lease, "a refresh to find the other permit gone", other.Context().Done())
				require.ErrorIs(t, context.Cause(other.Context()), redislane.ErrLeaseLost)
			}
			require.NoError(t, old.Context().Err(), "the restart outlasted the old holder's lease: the test proves nothing")

			p, err := b.Acquire(ctx, "k")
			require.NoError(t, err)
			start := redistest.Now()
			testkit.Within(t, 10*lease, "the cut-off holder's lease to end", old.Context().Done())
			assert.ErrorIs(t, context.Cause(old.Context()), redislane.ErrLeaseExpired)
			assert.LessOrEqual(t, endOf(old.Deadline()), start,
				"a holder granted after the snapshot still held its permit when a new one was granted")
			assert.Greater(t, p.Fence(), old.Fence(), "fencing tokens went backwards across the restart")
			p.Release()
			px.black.Store(false)
			old.Release()
		})
	}
}

// Scenario 9, a fleet lane: the snapshot has the term and the leader key
// of x, which then resigns; y leads in a later term and writes its limit.
// Redis restarts from the snapshot, which brings back x's term, x's
// leadership (for the rest of its lease) and the limit before y's. The
// lane finds the restart (the run_id), and gives it a term above every
// term before it: y's Term never goes back, the closed x never leads
// again, and the lane takes the limit y last read. Without the check, y
// sees x's term, and x, closed, leads until its restored lease runs out.
func TestFleetTermNeverGoesBackAfterSnapshotRestart(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	leaderKey := "{lanes:" + name + "}:leader"
	ctx := testCtx(t)
	// x's restored lease (three intervals from its last renewal before the
	// snapshot) must outlast the restart and y's next call (within one
	// interval of it), so that the restored leadership is there to be seen.
	const interval = time.Second
	x := newFleet(t, newClient(t, srv.Addr), name, 5, redislane.WithLimitRefresh(interval))
	y := newFleet(t, newClient(t, srv.Addr), name, 5, redislane.WithLimitRefresh(interval))

	controller{x}.set(5) // x stands for election; y does not yet
	waitFor(t, 10*time.Second, "x to lead", x.Leader)
	// The snapshot right after a renewal of x's: its leader key then names
	// x for nearly three intervals.
	reads := x.Stats().LimitReads
	waitFor(t, 10*time.Second, "a renewal of x's", func() bool { return x.Stats().LimitReads > reads })
	require.NoError(t, direct.Save(ctx).Err())
	xval, err := direct.Get(ctx, leaderKey).Result()
	require.NoError(t, err, "no leader key in the snapshot")
	xid := strings.Fields(xval)[0]
	x.Close() // resigns

	controller{y}.set(7) // y stands: it takes the leadership x left (the value is dropped)
	waitFor(t, 10*time.Second, "y to lead", y.Leader)
	controller{y}.setInForce(t, 7)
	t2 := y.Term()
	require.Greater(t, t2, x.Term())

	require.NoError(t, srv.Restart()) // kill -9; the new server loads the snapshot
	waitFor(t, 10*time.Second, "y to lead in a term after the restart", func() bool {
		term := y.Term()
		if term < t2 {
			t.Fatalf("y's term went back from %d to %d after the restart", t2, term)
		}
		return y.Leader() && term > t2
	})
	val, err := direct.Get(ctx, leaderKey).Result()
	require.NoError(t, err)
	assert.NotEqual(t, xid, strings.Fields(val)[0], "the closed instance leads")
	assert.EqualValues(t, 7, storedLimit(t, direct, name), "the limit y last read was lost")
	assert.EqualValues(t, 7, y.Capacity())
	stored, err := direct.HGet(ctx, "{lanes:"+name+"}:meta", "term").Int64()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, stored, y.Term(), "the stored term is below one an instance saw")
}
