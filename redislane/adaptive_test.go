package redislane_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// A Fleet is a target that only its leader sets: the controller of package
// adaptive moves it only on the leader, from the fleet's overloads and the
// fleet's use.
var (
	_ adaptive.OverloadSharer = (*redislane.Fleet)(nil)
	_ adaptive.UseSharer      = (*redislane.Fleet)(nil)
	_ adaptive.UseSharer      = (*redislane.Budget)(nil)
)

// provider is a simulated model API with a true concurrency limit shared
// by the whole fleet: a call beyond it is refused at once (a 429); one
// within it takes work.
type provider struct {
	truth    int64
	work     time.Duration
	inflight atomic.Int64
}

func (p *provider) call() adaptive.Outcome {
	defer p.inflight.Add(-1)
	if p.inflight.Add(1) > p.truth {
		return adaptive.Overload
	}
	time.Sleep(p.work) // the provider's latency, not a synchronisation
	return adaptive.Success
}

// Three instances, each with its own controller over its Fleet and its
// own callers, against one provider: the fleet's limit, moved by the
// leader's controller alone, settles around the provider's true limit;
// never do two instances count themselves the leader; the followers'
// controllers move nothing and follow the fleet's limit.
func TestFleetControllersConverge(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	const (
		truth   = 6
		workers = 5 // per instance: a demand of 15, well above the truth
		// The leader's controller's reports to watch: once an overload
		// has found the limit, a round trip is 300/max(1, 0.1·limit)
		// reports (adaptive's probe window), 300 at a limit near 6, so
		// the run is counted in reports: about 5 probes of the limit (a
		// leader's share of the fleet at a limit of 6 is about 70
		// reports a second).
		reports = 1500
	)
	// Work long beside a hand-over (a release call, a pub/sub message and
	// a waiter's wake-up: tens of microseconds, but several milliseconds
	// under the race detector on a loaded machine), so that the calls at
	// the provider are about the permits out: a permit between two holders
	// is used by the fleet but not at the provider, which then refuses
	// nothing that the limit grants above its calls, and the leader's
	// controller, which counts every round trip of a shared target as
	// used, climbs. With 5 ms of work a loaded machine kept the provider
	// below its limit at a fleet limit of 10-20.
	p := &provider{truth: truth, work: 30 * time.Millisecond}
	fs := make([]*redislane.Fleet, 3)
	cs := make([]*adaptive.Controller, len(fs))
	for i := range fs {
		fs[i] = newFleet(t, newClient(t, srv.Addr), name, 2)
		var err error
		cs[i], err = adaptive.New(fs[i], 1, 30, adaptive.WithInitial(2))
		require.NoError(t, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(fs)*workers)
	for i, f := range fs {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					pm, err := f.Acquire(ctx, 1)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					start := time.Now()
					o := p.call()
					cs[i].Report(o, time.Since(start)) // before the release: see Report
					pm.Release()
				}
			}()
		}
	}

	// Watch until the leader's controller has decided enough round trips.
	// Leader reads each instance at its own instant: two leaders in one
	// look prove two at once only if the look took less than the fifth of
	// the leader's lease by which a leadership ends before the next one
	// can begin (see Fleet); a longer look (the test's goroutine descheduled
	// on a loaded machine) proves nothing and is not counted.
	const apart = 3 * fleetRefresh / 5
	var samples []int64
	maxLeaders := 0
	deadline := time.Now().Add(120 * time.Second)
	for {
		began := time.Now()
		ld := leaders(fs)
		if time.Since(began) < apart {
			maxLeaders = max(maxLeaders, len(ld))
		}
		if len(ld) == 1 && cs[ld[0]].Stats().Samples >= reports {
			break
		}
		if len(ld) == 1 && cs[ld[0]].Stats().Samples >= reports/2 {
			samples = append(samples, storedLimit(t, direct, name))
		}
		select {
		case err := <-errs:
			t.Fatalf("a caller's acquire failed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader's controller had too few reports in 120 s: %+v", cs[0].Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	testkit.WaitAll(t, &wg, "the instances' callers")

	require.LessOrEqual(t, maxLeaders, 1, "two instances counted themselves the leader at once")
	require.NotEmpty(t, samples)
	lo, hi, sum := samples[0], samples[0], int64(0)
	for _, v := range samples {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	mean := float64(sum) / float64(len(samples))
	t.Logf("fleet limit over the second half: min %d, max %d, mean %.2f (truth %d, %d samples)", lo, hi, mean, truth, len(samples))
	// AIMD's band at the truth is [floor(0.9*(T+1)), T+1]; a follower's
	// callers' refusals reach the leader only through the provider, so
	// the limit may overshoot by a step or two before the leader sees one.
	assert.GreaterOrEqual(t, lo, int64(truth-2), "the fleet's limit fell far below the provider's")
	assert.LessOrEqual(t, hi, int64(truth+4), "the fleet's limit rose far above the provider's")
	assert.InDelta(t, float64(truth)+0.5, mean, 1.5)

	ld := leaders(fs)
	for i, f := range fs {
		st, cst := f.Stats(), cs[i].Stats()
		moves := cst.Increases + cst.OverloadDecreases + cst.LatencyDecreases
		t.Logf("instance %d: leader %v, writes %d, dropped %d, controller windows %d moves %d limit %d", i, st.Leader, st.LimitWrites, st.LimitsDropped, cst.Windows, moves, cst.Limit)
		if st.LimitWrites == 0 {
			assert.Zero(t, moves, "instance %d never wrote the limit, yet its controller counts moves", i)
		}
		if len(ld) == 1 && i != ld[0] {
			assert.GreaterOrEqual(t, cst.Limit, int64(truth-2), "follower %d's controller does not follow the fleet's limit", i)
			assert.LessOrEqual(t, cst.Limit, int64(truth+4), "follower %d's controller does not follow the fleet's limit", i)
		}
	}
}

// roundTrip reports one round trip of c at its limit: every report o,
// held a millisecond, a second after the last on clk.
func roundTrip(clk *clock.Fake, c *adaptive.Controller, o adaptive.Outcome) {
	clk.Advance(time.Second)
	for range c.Limit() {
		c.Report(o, time.Millisecond)
	}
}

// driveTo reports round trips of o on the leader's controller c until the
// fleet's stored limit is want, waiting after each for the write (a
// leadership that lapsed on a loaded machine makes the controller take the
// fleet's limit back and try again).
func driveTo(t *testing.T, clk *clock.Fake, c *adaptive.Controller, check func() int64, o adaptive.Outcome, want int64) {
	t.Helper()
	for range 100 {
		if check() == want {
			return
		}
		roundTrip(clk, c, o)
		spinUntil(t, 10*time.Second, "the controller's value written", func() bool { return check() == c.Limit() })
	}
	t.Fatalf("the fleet's limit is %d after 100 round trips, want %d", check(), want)
}

// When the leader goes, the new leader's controller continues from the
// fleet's limit, not from its own value, stale since it followed.
func TestFleetNewLeaderContinuesFromTheFleetsLimit(t *testing.T) {
	fp := newFleetPair(t)
	a, ca, b, clk, stored := fp.a, fp.ca, fp.b, fp.clk, fp.stored
	cb, err := adaptive.New(b, 1, 100, adaptive.WithClock(clk)) // a candidate from here
	require.NoError(t, err)
	require.Equal(t, int64(10), cb.Limit())

	driveTo(t, clk, ca, stored, adaptive.Overload, 8) // 10 -> 9 -> 8
	pickedUp(t, b, 8, "b")
	require.False(t, b.Leader())
	require.Equal(t, int64(10), cb.Limit(), "b's controller decided nothing yet: its own limit is the stale one")

	term := a.Term()
	a.Close() // resigns
	waitFor(t, 10*time.Second, "b to lead", b.Leader)
	require.Greater(t, b.Term(), term)
	// The fleet holds half its limit, so that a round trip counts as used
	// (UseSharer): the leader's controller may grow it.
	held, err := b.Acquire(testCtx(t), 4)
	require.NoError(t, err)
	defer held.Release()
	pickedUp(t, b, 8, "b, having sampled the fleet's use")
	for stored() == 8 {
		roundTrip(clk, cb, adaptive.Success)
		spinUntil(t, 10*time.Second, "b's value written", func() bool { return stored() == cb.Limit() })
	}
	require.Equal(t, int64(9), stored(), "the new leader moved from its stale 10, not from the fleet's 8")
	st := cb.Stats()
	require.Equal(t, uint64(1), st.Increases)
	require.Equal(t, adaptive.ReasonGrowth, st.LastReason)
}

// AsBudget is a target that Controller.Do can take permits from, and a
// Shared one.
var _ interface {
	adaptive.Shared
	adaptive.Acquirer
} = (*redislane.Budget)(nil)

// TestBudgetRefusesOptions: a FIFO fleet budget is refused a call with a
// per-call option that sets something, before anything reaches Redis;
// the zero option, Priority(0) and Group("") set nothing and are granted.
func TestBudgetRefusesOptions(t *testing.T) {
	srv := startRedis(t)
	var cnt redistest.Calls
	rc := newClient(t, srv.Addr)
	rc.AddHook(&cnt)
	f, err := redislane.NewFleet(rc, laneName(t), 2, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer f.Close()
	b := redislane.AsBudget(f)
	ctx := testCtx(t)
	for _, o := range []semaphore.AcquireOption{semaphore.Priority(1), semaphore.Group("g"), semaphore.Sequence(1), semaphore.Weight(1)} {
		before := cnt.Evals()
		p, err := b.Acquire(ctx, 1, o)
		failed(t, p, err, redislane.ErrInvalidConfig, "Acquire(%v) on a FIFO fleet", o)
		assert.Equal(t, before, cnt.Evals(), "a refused call reached Redis")
	}
	for _, o := range []semaphore.AcquireOption{{}, semaphore.Priority(0), semaphore.Group("")} {
		p, err := b.Acquire(ctx, 1, o)
		require.NoError(t, err, "Acquire(%v) sets nothing", o)
		p.Release()
	}
}

// TestFleetLeaderHearsFollowersOverloads: an overload that a follower's
// controller counts reaches the leader's controller (through the fleet's
// count in Redis, Fleet.ShareOverload and FleetOverloads), which cuts the
// fleet's limit. Before, a follower's overload only taught its own
// controller, and the limit answered the leader's refusals alone: three
// replicas of the chat gateway met 26% 429s against 0.8% for one.
func TestFleetLeaderHearsFollowersOverloads(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	fs := make([]*redislane.Fleet, 3)
	cs := make([]*adaptive.Controller, len(fs))
	for i := range fs {
		fs[i] = newFleet(t, newClient(t, srv.Addr), name, 10)
		var err error
		cs[i], err = adaptive.New(fs[i], 1, 30, adaptive.WithInitial(10), adaptive.WithMinWindow(1000))
		require.NoError(t, err)
	}
	var lead int
	waitFor(t, 10*time.Second, "one leader", func() bool {
		ld := leaders(fs)
		if len(ld) == 1 {
			lead = ld[0]
		}
		return len(ld) == 1
	})
	follower := (lead + 1) % len(fs)
	// The leader's controller reads the fleet's count once while it
	// leads: a rise from there is the followers' (a count first read
	// while the instance followed, or before its first fleet call, is a
	// new start).
	waitFor(t, 10*time.Second, "the leader's first read of the fleet's count", func() bool { return fs[lead].FleetOverloads() >= 0 })
	cs[lead].Report(adaptive.Success, time.Millisecond)
	cs[follower].Report(adaptive.Overload, time.Millisecond)
	assert.Zero(t, cs[follower].Stats().OverloadDecreases, "a follower moves nothing itself")
	// The leader decides at its reports: it hears the follower's overload
	// within a fleet call or two of each instance.
	waitFor(t, 10*time.Second, "the leader's controller to cut for the follower's overload", func() bool {
		cs[lead].Report(adaptive.Success, time.Millisecond)
		return cs[lead].Stats().OverloadDecreases == 1
	})
	assert.Equal(t, adaptive.ReasonOverload, cs[lead].Stats().LastReason)
	assert.EqualValues(t, 9, cs[lead].Stats().Limit, "10 × 0.9")
	waitFor(t, 10*time.Second, "the fleet's limit to be 9 on every instance", func() bool {
		for _, f := range fs {
			if f.Capacity() != 9 {
				return false
			}
		}
		return true
	})
	// Heard once: more successes cut nothing more.
	for range 100 {
		cs[lead].Report(adaptive.Success, time.Millisecond)
	}
	assert.EqualValues(t, 1, cs[lead].Stats().OverloadDecreases)
}

// TestFleetLimitGrowsOnlyWhenTheFleetUsesIt: the leader's controller grows
// the fleet's limit after a round trip of successes only if the fleet held
// at least half the limit at a fleet call in it: a fleet that holds 2 of
// 10 keeps 10, whatever its successes; one that holds 6 of 10, held by
// another instance than the leader, grows it.
func TestFleetLimitGrowsOnlyWhenTheFleetUsesIt(t *testing.T) {
	fp := newFleetPair(t)
	a, ca, b, clk, stored := fp.a, fp.ca, fp.b, fp.clk, fp.stored
	light, err := b.Acquire(testCtx(t), 2)
	require.NoError(t, err)
	pickedUp(t, a, 10, "a, having sampled 2 held")
	for range 5 {
		roundTrip(clk, ca, adaptive.Success)
		pickedUp(t, a, 10, "a, after a round trip at 2 of 10 held")
	}
	require.Zero(t, ca.Stats().Increases, "the limit grew while the fleet held 2 of 10")
	require.Equal(t, int64(10), stored())

	heavy, err := b.Acquire(testCtx(t), 4)
	require.NoError(t, err)
	defer heavy.Release()
	light.Release()
	more, err := b.Acquire(testCtx(t), 2)
	require.NoError(t, err)
	defer more.Release()
	pickedUp(t, a, 10, "a, having sampled 6 held")
	roundTrip(clk, ca, adaptive.Success)
	spinUntil(t, 10*time.Second, "the grown limit written", func() bool { return stored() == 11 })
	require.Equal(t, uint64(1), ca.Stats().Increases)
}

// A peak of use sampled while an instance followed does not count for its
// first round trip as the leader: the fleet held 6 of 10 before b was
// elected and nothing since, and b's controller does not grow the limit.
func TestFleetNewLeaderForgetsTheUseItSawAsAFollower(t *testing.T) {
	fp := newFleetPair(t)
	a, b, clk := fp.a, fp.b, fp.clk
	cb, err := adaptive.New(b, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	busy, err := b.Acquire(testCtx(t), 6)
	require.NoError(t, err)
	pickedUp(t, b, 10, "b, having sampled 6 held")
	busy.Release()
	a.Close() // resigns
	waitFor(t, 10*time.Second, "b to lead", b.Leader)
	pickedUp(t, b, 10, "b, leading, having sampled 0 held")
	roundTrip(clk, cb, adaptive.Success)
	pickedUp(t, b, 10, "b, after its first round trip as the leader")
	require.Zero(t, cb.Stats().Increases, "the leader grew the limit for use it saw while it followed")
}

// fleetPair is two instances of one fleet lane of 10 on a fresh Redis: a,
// which leads, with its controller ca on the fake clock clk, and b; stored
// reads the fleet's limit in Redis.
type fleetPair struct {
	a, b   *redislane.Fleet
	ca     *adaptive.Controller
	clk    *clock.Fake
	stored func() int64
}

func newFleetPair(t *testing.T) fleetPair {
	t.Helper()
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	fp := fleetPair{clk: clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	fp.stored = func() int64 { return storedLimit(t, direct, name) }
	fp.a = newFleet(t, newClient(t, srv.Addr), name, 10)
	var err error
	fp.ca, err = adaptive.New(fp.a, 1, 100, adaptive.WithClock(fp.clk))
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "a to lead", fp.a.Leader)
	fp.b = newFleet(t, newClient(t, srv.Addr), name, 10)
	return fp
}

// TestFleetSharedOverloadsAnsweredByACut: a follower's shared overload
// that may come from work granted before the fleet's last cut was answered
// by that cut and does not reach the leader's count: neither one the
// leader's writing call reads (it landed while the old limit was in force)
// nor one shared after the write while the follower holds a permit granted
// before it (the refused work's permit is one it holds). One shared while
// it holds only permits granted after the cut counts. Before, both counted,
// and the leader cut again for one overshoot: a fleet's limit sat a step
// below the provider's (TestFleetControllersConverge's mean 5.45 at a true
// limit of 6).
func TestFleetSharedOverloadsAnsweredByACut(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	ctx := testCtx(t)
	// The leader calls Redis only when it has a proposal: its reads are
	// the test's to time.
	a := newFleet(t, newClient(t, srv.Addr), name, 10, redislane.WithLimitRefresh(time.Hour))
	a.SetCapacity(10) // a candidate
	waitFor(t, 10*time.Second, "a to lead", a.Leader)
	b := newFleet(t, newClient(t, srv.Addr), name, 10)
	waitFor(t, 10*time.Second, "b's first read of the count", func() bool { return b.FleetOverloads() >= 0 })
	base := a.FleetOverloads()
	require.GreaterOrEqual(t, base, int64(0))
	old, err := b.Acquire(ctx, 1) // granted before the cut
	require.NoError(t, err)

	b.ShareOverload()
	waitFor(t, 10*time.Second, "b's overload in Redis", func() bool { return b.FleetOverloads() == base+1 })
	a.SetCapacity(9)
	waitFor(t, 10*time.Second, "a's cut written", func() bool { return a.Capacity() == 9 })
	assert.Equal(t, base, a.FleetOverloads(), "the call that wrote the cut counted an overload it answered")

	b.ShareOverload() // holding old
	pickedUp(t, b, 9, "b, after sharing")
	assert.Equal(t, base+1, b.FleetOverloads(), "an overload shared while holding a permit granted before the cut was counted")

	old.Release()
	fresh, err := b.Acquire(ctx, 1) // granted after the cut
	require.NoError(t, err)
	defer fresh.Release()
	b.ShareOverload()
	waitFor(t, 10*time.Second, "b's overload in Redis", func() bool { return b.FleetOverloads() == base+2 })
	c0 := a.Stats().LimitReads
	a.SetCapacity(9) // a call that writes nothing
	waitFor(t, 10*time.Second, "a's next call", func() bool { return a.Stats().LimitReads > c0 })
	assert.Equal(t, base+1, a.FleetOverloads(), "the overload of work granted after the cut did not count")
}
