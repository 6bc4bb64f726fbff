package redislane_test

import (
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

// TestHistogramsWaitAndHold: a lane made WithHistograms times its grants'
// waits and holds as package semaphore does: every grant in WaitTime (one
// that did not wait at 0, one that waited for a release above it), every
// first release in HoldTime, and no Redis call more than the same lane
// makes without them.
func TestHistogramsWaitAndHold(t *testing.T) {
	srv := startRedis(t)
	var cnt redistest.Calls
	rc := newClient(t, srv.Addr)
	rc.AddHook(&cnt)
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(handoverLease), redislane.WithQuarantine(0), redislane.WithHistograms())
	require.NoError(t, err)
	defer s.Close()
	ctx := testCtx(t)

	// Warm the scripts up (the first use of each loads it), then count.
	w, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	w.Release()
	before := cnt.Commands()
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	p.Release()
	assert.EqualValues(t, 2, cnt.Commands()-before, "an uncontended acquire and release with histograms: one call each")

	held, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, 1)
		if err == nil {
			p.Release()
		}
		return err
	})
	// Queued in Redis, not only counted: a waiter is counted before its
	// first call, which a release made then would let in at once, as no
	// wait (CI saw Waited 0 so).
	direct := newClient(t, srv.Addr)
	waitFor(t, handoverLease, "the second caller to queue in Redis", func() bool {
		return s.Stats().Waiters == 1 && direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	held.Release()
	require.NoError(t, testkit.Recv(t, got, "the waiter, granted at the release"))
	tp, ok := s.TryAcquire(1)
	require.True(t, ok)
	tp.Release()

	st := s.Stats()
	require.True(t, st.Enabled, "Timings.Enabled")
	assert.EqualValues(t, 5, st.Acquired)
	assert.EqualValues(t, 1, st.Waited)
	assert.Equal(t, st.Acquired, st.WaitTime.Count, "every grant is in WaitTime")
	assert.Equal(t, st.Acquired-st.Waited, st.WaitTime.Counts[0], "the grants that did not wait, at 0, and the one that waited above")
	assert.Positive(t, st.WaitTime.Sum, "the wait for a release")
	assert.Equal(t, st.Released, st.HoldTime.Count, "every first release is in HoldTime")
	assert.EqualValues(t, 5, st.HoldTime.Count)
	var sum uint64
	for _, n := range st.WaitTime.Counts {
		sum += n
	}
	assert.Equal(t, st.WaitTime.Count, sum, "WaitTime's buckets add up to its count")

	// The lane as a queue's lane carries them, and says that its
	// capacity is the fleet's.
	ls := redislane.AsLane[string](s).Stats()
	assert.True(t, ls.Fleet, "LaneStats.Fleet of a Redis lane")
	assert.True(t, ls.Enabled)
	assert.Equal(t, st.WaitTime.Count, ls.WaitTime.Count)
	assert.Equal(t, st.HoldTime.Count, ls.HoldTime.Count)
}

// TestHistogramsUnderLoad: under contention, on a keyed lane whose lines
// batch their grants (a head's call grants the waiters behind it too),
// WaitTime still counts every grant once and HoldTime every release once.
func TestHistogramsUnderLoad(t *testing.T) {
	srv := startRedis(t)
	k, err := redislane.NewKeyed(newClient(t, srv.Addr), laneName(t), 2, redislane.WithLease(handoverLease), redislane.WithQuarantine(0), redislane.WithHistograms())
	require.NoError(t, err)
	defer k.Close()
	ctx := testCtx(t)
	const callers, each = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			for range each {
				p, err := k.Acquire(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				p.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := k.Stats()
	t.Logf("acquired %d, waited %d, batched %d", st.Acquired, st.Waited, st.Batched)
	require.True(t, st.Enabled)
	assert.EqualValues(t, callers*each, st.Acquired)
	assert.Equal(t, st.Acquired, st.WaitTime.Count, "every grant once in WaitTime")
	assert.Equal(t, st.Released, st.HoldTime.Count, "every release once in HoldTime")
	assert.GreaterOrEqual(t, st.WaitTime.Counts[0], st.Acquired-st.Waited, "the grants that did not wait are at 0")
	if st.Waited > 0 {
		assert.Positive(t, st.WaitTime.Sum, "%d grants waited", st.Waited)
	}
}

// TestHistogramsOff: without WithHistograms a lane keeps none (Enabled is
// false, nothing counted), and a queue's lane reports none.
func TestHistogramsOff(t *testing.T) {
	srv := startRedis(t)
	s, err := redislane.NewWeighted(newClient(t, srv.Addr), laneName(t), 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	p.Release()
	st := s.Stats()
	assert.False(t, st.Enabled)
	assert.Zero(t, st.WaitTime.Count)
	assert.Zero(t, st.HoldTime.Count)
	assert.False(t, redislane.AsLane[int](s).Stats().Enabled)
}

// TestHistogramsRefusedByTokens: a Tokens lane gives nothing back and keeps
// no times: WithHistograms is refused, not ignored.
func TestHistogramsRefusedByTokens(t *testing.T) {
	srv := startRedis(t)
	_, err := redislane.NewTokens(newClient(t, srv.Addr), laneName(t), 10, redislane.WithHistograms())
	require.ErrorIs(t, err, redislane.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "WithHistograms")
}

// TestExportFleetMark: every lane of this package, as a queue's lane,
// says that its capacity is a fleet's (LaneStats.Fleet), so that an
// exporter reports it once over the instances: global, keyed and rate.
func TestExportFleetMark(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	w, err := redislane.NewWeighted(rc, laneName(t), 4, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	k, err := redislane.NewKeyed(rc, laneName(t), 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	tk, err := redislane.NewTokens(rc, laneName(t), 10)
	require.NoError(t, err)
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("model", redislane.AsLane[string](w)))
	require.NoError(t, q.Add("tenant", redislane.AsKeyedLane(k, func(s string) string { return s })))
	require.NoError(t, q.Add("tokens", redislane.AsRateLane[string](tk)))
	for _, ls := range q.Stats() {
		assert.True(t, ls.Fleet, "lane %s (%v): LaneStats.Fleet", ls.Name, ls.Kind)
	}
}

// TestExportReorderHoldsRunOut: a sequenced Keyed's grants on a hold that
// ran out reach its LaneStats as a queue's keyed lane, for the exporters.
func TestExportReorderHoldsRunOut(t *testing.T) {
	srv := startRedis(t)
	k := newSeqKeyed(t, srv.Addr, laneName(t), redislane.WithReorderHold(50*time.Millisecond))
	ctx := testCtx(t, 10*time.Second)
	p, err := k.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	p.Release()
	p, err = k.Acquire(ctx, "t", semaphore.Sequence(3)) // 2 never comes
	require.NoError(t, err, "message 3 never went: its hold did not run out")
	p.Release()
	require.EqualValues(t, 1, k.Stats().HoldsRunOut)
	assert.EqualValues(t, 1, redislane.AsKeyedLane(k, func(s string) string { return s }).Stats().HoldsRunOut)
}
