package redislane_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// The tests of a global fleet lane's order (issue 25): three instances of
// one lane, each on a client of its own, queue callers in Redis while a
// holder keeps the lane full; the order in which they are then served is
// the lane's. Each caller records its grant and releases at once, so the
// next one is served by that release's hand-over.

// orderFleet is three instances of one ordered lane and a direct client
// of the test's server.
type orderFleet struct {
	t      *testing.T
	name   string
	insts  []*redislane.Weighted
	direct *redis.Client

	mu    sync.Mutex
	order []string
	errs  []error
	wg    sync.WaitGroup
}

// newOrderFleet makes the three instances with make (a Weighted, or a
// Fleet's Weighted), with the order tests' lease.
func newOrderFleet(t *testing.T, capacity int64, mk func(rc *redis.Client, name string, capacity int64, opts ...redislane.Option) (*redislane.Weighted, error), opts ...redislane.Option) *orderFleet {
	t.Helper()
	srv := startRedis(t)
	f := &orderFleet{t: t, name: laneName(t), direct: newClient(t, srv.Addr)}
	opts = append([]redislane.Option{orderLease, redislane.WithQuarantine(0)}, opts...)
	for range 3 {
		s, err := mk(newClient(t, srv.Addr), f.name, capacity, opts...)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		f.insts = append(f.insts, s)
	}
	t.Cleanup(f.wg.Wait) // before the instances close (cleanups run last first)
	return f
}

func orderedWeightedOf(rc *redis.Client, name string, capacity int64, opts ...redislane.Option) (*redislane.Weighted, error) {
	return redislane.NewWeighted(rc, name, capacity, opts...)
}

func orderedFleetOf(rc *redis.Client, name string, capacity int64, opts ...redislane.Option) (*redislane.Weighted, error) {
	f, err := redislane.NewFleet(rc, name, capacity, opts...)
	if err != nil {
		return nil, err
	}
	return f.Weighted, nil
}

// orderedKinds are the two makers of an ordered lane the order tests run
// on: a Weighted, and a Fleet's Weighted.
var orderedKinds = []struct {
	name string
	mk   func(*redis.Client, string, int64, ...redislane.Option) (*redislane.Weighted, error)
}{{"Weighted", orderedWeightedOf}, {"Fleet", orderedFleetOf}}

// key returns the name of one of the lane's keys in Redis.
func (f *orderFleet) key(k string) string { return "{lanes:" + f.name + "}:g:" + k }

// queued returns how many callers are queued in Redis.
func (f *orderFleet) queued() int64 {
	return f.direct.ZCard(context.Background(), f.key("q")).Val()
}

// queue starts a caller of n permits labelled label on instance i, with
// opts, and returns once it is queued in Redis. The caller records its
// grant and releases after hold returns (nil: at once).
func (f *orderFleet) queue(ctx context.Context, i int, label string, n int64, hold func(), opts ...semaphore.AcquireOption) {
	f.t.Helper()
	before := f.queued()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		p, err := f.insts[i%3].Acquire(ctx, n, opts...)
		f.mu.Lock()
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %w", label, err))
		} else {
			f.order = append(f.order, label)
		}
		f.mu.Unlock()
		if err == nil {
			if hold != nil {
				hold()
			}
			p.Release()
		}
	}()
	testkit.Eventually(f.t, label+" to queue in Redis", func() bool { return f.queued() == before+1 })
}

// served waits for the callers and returns the order they were granted in.
func (f *orderFleet) served() []string {
	f.t.Helper()
	testkit.WaitAll(f.t, &f.wg, "every caller to be served")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, err := range f.errs {
		f.t.Error(err)
	}
	return f.order
}

// full returns a permit that keeps the lane full, from instance 0.
func (f *orderFleet) full(ctx context.Context, n int64) *redislane.Permit {
	f.t.Helper()
	p, err := f.insts[0].Acquire(ctx, n)
	require.NoError(f.t, err)
	return p
}

// A higher band goes first, across the instances, on a Weighted and on a
// Fleet: callers queued low first are served high first, and within a
// band in arrival order. (Mutant: ahead() never passing across bands,
// i.e. FIFO, serves L1 L2 H M.)
func TestFleetOrderHigherBandFirst(t *testing.T) {
	for _, tc := range orderedKinds {
		t.Run(tc.name, func(t *testing.T) {
			f := newOrderFleet(t, 1, tc.mk, redislane.WithPriorities(time.Hour))
			ctx := testCtx(t)
			holder := f.full(ctx, 1)
			f.queue(ctx, 1, "L1", 1, nil)
			f.queue(ctx, 2, "L2", 1, nil, semaphore.Priority(0))
			f.queue(ctx, 0, "H", 1, nil, semaphore.Priority(5))
			f.queue(ctx, 1, "M", 1, nil, semaphore.Priority(2))
			f.queue(ctx, 2, "L3", 1, nil, semaphore.Priority(-1))
			holder.Release()
			assert.Equal(t, []string{"H", "M", "L1", "L2", "L3"}, f.served())
		})
	}
}

// Aging bounds a low band's wait, on the server's clock: a higher band
// that comes within the step passes a waiting low one, and one that comes
// after the low one has waited the step does not. (Mutant: ahead() across
// bands without the aging comparison serves H1 H2 L.)
func TestFleetOrderAgingBoundsALowBandsWait(t *testing.T) {
	const step = 2 * time.Second
	f := newOrderFleet(t, 1, orderedWeightedOf, redislane.WithPriorities(step))
	ctx := testCtx(t)
	holder := f.full(ctx, 1)
	f.queue(ctx, 1, "L", 1, nil)
	f.queue(ctx, 2, "H1", 1, nil, semaphore.Priority(1)) // within the step
	// L's arrival, in µs on the server's clock, is in its queue entry.
	arrival := f.oldestArrival()
	testkit.EventuallyWithin(t, 4*step, "the server's clock to pass L's arrival plus the step", func() bool {
		now, err := f.direct.Time(context.Background()).Result()
		return err == nil && now.UnixMicro() > arrival+step.Microseconds()
	})
	f.queue(ctx, 0, "H2", 1, nil, semaphore.Priority(1))
	holder.Release()
	assert.Equal(t, []string{"H1", "L", "H2"}, f.served())
}

// oldestArrival returns the earliest arrival (µs, server clock) among the
// queued callers.
func (f *orderFleet) oldestArrival() int64 {
	f.t.Helper()
	ctx := context.Background()
	ids := f.direct.ZRange(ctx, f.key("q"), 0, -1).Val()
	var arr []int64
	for _, id := range ids {
		tv := f.direct.HGet(ctx, f.key("d"), "t:"+id).Val()
		var lease, a, band, rank int64
		_, err := fmt.Sscanf(tv, "%d:%d:%d:%d", &lease, &a, &band, &rank)
		require.NoError(f.t, err, "queue entry %q", tv)
		arr = append(arr, a)
	}
	require.NotEmpty(f.t, arr)
	lo := arr[0]
	for _, a := range arr {
		lo = min(lo, a)
	}
	return lo
}

// Two groups under contention get shares by weight: with both backlogged
// (40 callers each, queued alternately across the instances), the first
// 40 grants go 3:1 to the group of weight 3, give or take one request.
// (Mutant: fair_key returning 0, i.e. FIFO, gives 20:20.)
func TestFleetOrderFairShareByWeight(t *testing.T) {
	weight := func(g string) int {
		if g == "big" {
			return 3
		}
		return 1
	}
	f := newOrderFleet(t, 1, orderedWeightedOf, redislane.WithFairShare(weight))
	ctx := testCtx(t, 60*time.Second)
	holder := f.full(ctx, 1)
	const each = 40
	for i := range each {
		f.queue(ctx, 2*i, "big", 1, nil, semaphore.Group("big"))
		f.queue(ctx, 2*i+1, "small", 1, nil, semaphore.Group("small"))
	}
	holder.Release()
	order := f.served()
	require.Len(t, order, 2*each)
	got := map[string]int{}
	for _, g := range order[:each] { // both groups wait throughout
		got[g]++
	}
	t.Logf("first %d grants: %v", each, got)
	assert.InDelta(t, 30, got["big"], 1, "grants of the group of weight 3")
	assert.InDelta(t, 10, got["small"], 1, "grants of the group of weight 1")
}

// The lane's virtual time outlives a script call: a group that comes
// while another has been served for a while starts at the lane's current
// virtual time, not at 0, and so gets no credit for the time it was not
// waiting. Group a's backlog of 8 is served up to a4 (held, one hand-over
// at a time on capacity 1), so the virtual time is a4's tag (3, a1's
// being 0); then b
// queues 4 and the grants alternate. (Mutant: fv not saved by the script
// that serves, so each call reads 0: b's tags restart at 0 and it is
// served b1 b2 b3 b4 before a5.)
func TestFleetOrderFairShareKeepsVirtualTime(t *testing.T) {
	for _, tc := range orderedKinds {
		t.Run(tc.name, func(t *testing.T) {
			f := newOrderFleet(t, 1, tc.mk, redislane.WithFairShare(nil))
			ctx := testCtx(t)
			holder := f.full(ctx, 1)
			gate := make(chan struct{})
			hold := func() {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			for i := range 8 {
				label := fmt.Sprintf("a%d", i+1)
				var h func()
				if label == "a4" {
					h = hold
				}
				f.queue(ctx, i, label, 1, h, semaphore.Group("a"))
			}
			holder.Release()
			testkit.Eventually(t, "a1 to a4 to be served, a4 holding", func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(f.order) == 4
			})
			require.EqualValues(t, 4, f.queued(), "a5 to a8 queued")
			for i := range 4 {
				f.queue(ctx, i, fmt.Sprintf("b%d", i+1), 1, nil, semaphore.Group("b"))
			}
			close(gate)
			assert.Equal(t, []string{"a1", "a2", "a3", "a4", "b1", "a5", "b2", "a6", "b3", "a7", "b4", "a8"}, f.served())
		})
	}
}

// Composed: bands first, then groups within a band, then FIFO within a
// group; a group is charged in its calls' band only, so a's L at band 0
// does not put A1 behind B1. (Mutants: without the bands the order is A1
// B1 L A2 A3 or FIFO; without the groups A1 A2 A3 B1 L; with a group's
// record spanning bands, as before, B1 A1 A2 A3 L.)
func TestFleetOrderPrioritiesWithFairShare(t *testing.T) {
	f := newOrderFleet(t, 1, orderedFleetOf, redislane.WithPriorities(time.Hour), redislane.WithFairShare(nil))
	ctx := testCtx(t)
	holder := f.full(ctx, 1)
	f.queue(ctx, 0, "L", 1, nil, semaphore.Group("a"))
	f.queue(ctx, 1, "A1", 1, nil, semaphore.Group("a"), semaphore.Priority(1))
	f.queue(ctx, 2, "A2", 1, nil, semaphore.Group("a"), semaphore.Priority(1))
	f.queue(ctx, 0, "A3", 1, nil, semaphore.Group("a"), semaphore.Priority(1))
	f.queue(ctx, 1, "B1", 1, nil, semaphore.Group("b"), semaphore.Priority(1))
	holder.Release()
	assert.Equal(t, []string{"A1", "B1", "A2", "A3", "L"}, f.served())
}

// A tenant's backlog at a low priority does not put its calls at a high
// one behind the other tenants' on a fleet lane either (the semaphore's
// TestComposedLowBandBacklogDoesNotChargeAHighBand; a review found the
// fleet's script still charging across the bands).
func TestFleetOrderLowBandBacklogDoesNotChargeAHighBand(t *testing.T) {
	f := newOrderFleet(t, 1, orderedWeightedOf, redislane.WithPriorities(time.Hour), redislane.WithFairShare(nil))
	ctx := testCtx(t)
	holder := f.full(ctx, 1)
	for i := range 3 {
		f.queue(ctx, i, fmt.Sprintf("small-cron%d", i), 1, nil, semaphore.Group("small"))
	}
	for i := range 3 {
		f.queue(ctx, i, fmt.Sprintf("big-user%d", i), 1, nil, semaphore.Group("big"), semaphore.Priority(1))
	}
	f.queue(ctx, 0, "small-user", 1, nil, semaphore.Group("small"), semaphore.Priority(1))
	holder.Release()
	assert.Equal(t, []string{"big-user0", "small-user", "big-user1", "big-user2", "small-cron0", "small-cron1", "small-cron2"}, f.served())
}

// A heavy head is not overtaken within its group, nor by another group's
// later caller: with 2 of 4 units free, a caller of 4 at the head holds
// back the callers of 1 behind it, and a release that frees more (but not
// 4) grants nobody. (Mutant: pump passing over a head that does not fit
// grants g-light at the first release.)
func TestFleetOrderHeavyHeadNotOvertaken(t *testing.T) {
	f := newOrderFleet(t, 4, orderedWeightedOf, redislane.WithPriorities(time.Hour), redislane.WithFairShare(nil))
	ctx := testCtx(t)
	big := f.full(ctx, 2)
	small := f.full(ctx, 1)
	f.queue(ctx, 1, "g-heavy", 4, nil, semaphore.Group("g"))
	f.queue(ctx, 2, "g-light", 1, nil, semaphore.Group("g"))
	f.queue(ctx, 0, "h-light", 1, nil, semaphore.Group("h"))
	require.True(t, small.Release()) // 2 free: the head needs 4
	assert.EqualValues(t, 3, f.queued(), "a caller passed the heavy head")
	assert.EqualValues(t, 1, f.direct.ZCard(ctx, f.key("h")).Val(), "holders in Redis")
	big.Release()
	order := f.served()
	require.Len(t, order, 3)
	assert.Equal(t, "g-heavy", order[0], "served: %v", order)
}

// Cancelling a waiter keeps the order of the others and loses no units:
// the cancelled caller's entry leaves the queue at once, the others are
// served in the lane's order, and at the end every unit is back (Redis
// holds nothing, and the whole capacity is granted at once). (Mutant: the
// entry of a waiter whose context ended left in the queue: its phantom
// grant holds the units for a lease and W4 misses its deadline.)
func TestFleetOrderCancelKeepsOrderAndUnits(t *testing.T) {
	f := newOrderFleet(t, 2, orderedWeightedOf, redislane.WithPriorities(time.Hour), redislane.WithFairShare(nil))
	ctx := testCtx(t)
	holder := f.full(ctx, 2)
	cctx, cancel := context.WithCancel(ctx)
	f.queue(ctx, 1, "W1", 2, nil, semaphore.Priority(2))
	f.queue(ctx, 2, "W2", 1, nil, semaphore.Priority(1), semaphore.Group("a"))
	f.queue(cctx, 0, "W3", 2, nil, semaphore.Priority(1), semaphore.Group("b"))
	f.queue(testCtx(t, 5*time.Second), 1, "W4", 2, nil)
	cancel()
	testkit.Eventually(t, "the cancelled waiter to leave the Redis queue", func() bool { return f.queued() == 3 })
	holder.Release()
	testkit.WaitAll(t, &f.wg, "every caller to be served")
	f.mu.Lock()
	require.Len(t, f.errs, 1, "errors: %v", f.errs)
	assert.True(t, errors.Is(f.errs[0], context.Canceled), "W3: %v", f.errs[0])
	assert.Equal(t, []string{"W1", "W2", "W4"}, f.order)
	f.mu.Unlock()

	// available + held == capacity: nothing held anywhere, and all of it
	// granted at once.
	assert.Zero(t, f.direct.ZCard(ctx, f.key("h")).Val(), "holders left in Redis")
	held, _ := strconv.Atoi(f.direct.HGet(ctx, f.key("d"), "held").Val())
	assert.Zero(t, held, "held units in Redis")
	for _, s := range f.insts {
		assert.Zero(t, s.Stats().Held, "held on an instance")
	}
	p, ok := f.insts[2].TryAcquire(2)
	require.True(t, ok, "the whole capacity is free")
	p.Release()
}

// Through a lanequeue.Queue per instance, a call's semaphore.Priority and
// Group reach a fleet lane made by AsLane (the chat gateway's agents lane,
// fleet-wide): the same order as the lane's own Acquire.
func TestFleetOrderThroughAQueue(t *testing.T) {
	f := newOrderFleet(t, 1, orderedWeightedOf, redislane.WithPriorities(time.Hour), redislane.WithFairShare(nil))
	ctx := testCtx(t)
	var (
		qs   []*lanequeue.Queue[string]
		sets []lanequeue.LaneSet[string]
	)
	for _, s := range f.insts {
		q := lanequeue.New[string]()
		require.NoError(t, q.Add("agents", redislane.AsLane[string](s)))
		set, err := q.Lanes("agents")
		require.NoError(t, err)
		qs, sets = append(qs, q), append(sets, set)
	}
	holder := f.full(ctx, 1)
	run := func(i int, label string, opts ...semaphore.AcquireOption) {
		before := f.queued()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			tk, err := qs[i].AcquireAll(ctx, "k", sets[i], opts...)
			f.mu.Lock()
			if err != nil {
				f.errs = append(f.errs, fmt.Errorf("%s: %w", label, err))
			} else {
				f.order = append(f.order, label)
			}
			f.mu.Unlock()
			if err == nil {
				tk.Release()
			}
		}()
		testkit.Eventually(t, label+" to queue in Redis", func() bool { return f.queued() == before+1 })
	}
	run(0, "cron", semaphore.Priority(0), semaphore.Group("t1"), semaphore.Sequence(3))
	run(1, "t1-user", semaphore.Priority(1), semaphore.Group("t1"))
	run(2, "t1-user2", semaphore.Priority(1), semaphore.Group("t1"))
	run(0, "t2-user", semaphore.Priority(1), semaphore.Group("t2"))
	holder.Release()
	// Band 1 first, t1's cron at band 0 charging t1 there only: t1-user and
	// t2-user take turns in band 1, then t1-user2, then the cron.
	assert.Equal(t, []string{"t1-user", "t2-user", "t1-user2", "cron"}, f.served())
	// The queue's lanes are the instances: closing the queues closes them
	// (t.Cleanup closes them again, which does nothing).
	for _, q := range qs {
		q.Close()
	}
}

// Many callers placed in one gap of the queue (each behind the last of
// its band, ahead of the low tail) exhaust the room between two positions
// and make the script renumber the queue; the order survives it.
// (Mutant: renumber doing nothing places a caller at a position taken
// by its neighbour, out of order.)
func TestFleetOrderManyJoinsInOneGap(t *testing.T) {
	f := newOrderFleet(t, 1, orderedWeightedOf, redislane.WithPriorities(time.Hour))
	ctx := testCtx(t, 60*time.Second)
	holder := f.full(ctx, 1)
	f.queue(ctx, 0, "top", 1, nil, semaphore.Priority(9))
	f.queue(ctx, 1, "tail", 1, nil)
	want := []string{"top"}
	for i := range 70 { // a gap of 2^20 at 2^21 halves some 50 times
		label := fmt.Sprintf("m%02d", i)
		f.queue(ctx, i, label, 1, nil, semaphore.Priority(5))
		want = append(want, label)
	}
	holder.Release()
	assert.Equal(t, append(want, "tail"), f.served())
}

// The order options are refused where they cannot order (a Keyed, a
// Tokens lane, a Weighted with quota) or out of range, and per-call
// options a lane does not order by are refused by its Acquire, before
// anything reaches Redis.
func TestFleetOrderBadInput(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rc.Close()
	prio, fair := redislane.WithPriorities(time.Second), redislane.WithFairShare(nil)
	for _, o := range []redislane.Option{prio, fair} {
		_, err := redislane.NewKeyed(rc, "k", 1, o)
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "Keyed")
		_, err = redislane.NewTokens(rc, "t", 10, o)
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "Tokens")
		_, err = redislane.NewWeighted(rc, "q", 4, o, redislane.WithQuota(2))
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "WithQuota")
	}
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond - 1} {
		_, err := redislane.NewWeighted(rc, "w", 4, redislane.WithPriorities(d))
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "WithPriorities(%v)", d)
	}

	ctx := testCtx(t)
	calls := []struct {
		opts []redislane.Option
		call []semaphore.AcquireOption
	}{
		{nil, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{nil, []semaphore.AcquireOption{semaphore.Group("g")}},
		{[]redislane.Option{prio}, []semaphore.AcquireOption{semaphore.Group("g")}},
		{[]redislane.Option{prio}, []semaphore.AcquireOption{semaphore.Priority(1_000_001)}},
		{[]redislane.Option{fair}, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{[]redislane.Option{prio, fair}, []semaphore.AcquireOption{semaphore.Sequence(1)}},
		{[]redislane.Option{prio, fair}, []semaphore.AcquireOption{semaphore.Weight(2)}},
		{[]redislane.Option{redislane.WithFairShare(func(string) int { return 1001 })}, nil},
		{[]redislane.Option{redislane.WithFairShare(func(string) int { return 0 })}, []semaphore.AcquireOption{semaphore.Group("g")}},
	}
	for i, c := range calls {
		// The client's server does not exist: a call that reached it
		// would fail with a connection error, not ErrInvalidConfig.
		s, err := redislane.NewWeighted(rc, fmt.Sprintf("w%d", i), 4, c.opts...)
		require.NoError(t, err)
		p, err := s.Acquire(ctx, 1, c.call...)
		failed(t, p, err, redislane.ErrInvalidConfig, "call %d", i)
		s.Close()
	}
}

// Every instance of a lane must use the same order: a FIFO instance, or
// one with another step or without fair share, on an ordered lane fails
// with ErrCapacityMismatch, never mixed.
func TestFleetOrderMismatchIsRefused(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	ctx := testCtx(t)
	mk := func(opts ...redislane.Option) *redislane.Weighted {
		opts = append([]redislane.Option{redislane.WithLease(testLease), redislane.WithQuarantine(0)}, opts...)
		s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 2, opts...)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	p, err := mk(redislane.WithPriorities(time.Second), redislane.WithFairShare(nil)).Acquire(ctx, 1)
	require.NoError(t, err)
	defer p.Release()
	for i, opts := range [][]redislane.Option{
		nil,
		{redislane.WithPriorities(2 * time.Second), redislane.WithFairShare(nil)},
		{redislane.WithPriorities(time.Second)},
		{redislane.WithFairShare(nil)},
	} {
		q, err := mk(opts...).Acquire(ctx, 1)
		failed(t, q, err, redislane.ErrCapacityMismatch, "instance %d joined an ordered lane", i)
	}
}
