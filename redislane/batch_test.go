package redislane_test

// Tests of batched acquires (issue 25): the head of an instance's local
// line carries the requests of the waiters behind it in its acquire call,
// and one script grants them in line order, the prefix that fits.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// batchLease is long enough that a call held by an acquireGate while a test
// lines its waiters up is never a late reply (its margin is 4 s).
const batchLease = 20 * time.Second

// acquireGate holds each call of a script (the acquire script, unless
// told otherwise) while it is shut: it reports the call on held, with the
// number of requests it carries (for the acquire script the head's and
// those behind it, for the release script its ids), and lets it go to
// Redis when the test sends on pass.
type acquireGate struct {
	commandHook
	script string
	slow   bool        // hold a call past its context's end (a slow network), not fail it then
	late   atomic.Bool // read when a call comes: send it at once, and hold its reply instead
	shut   atomic.Bool
	held   chan int
	pass   chan struct{}
	opened chan struct{} // closed by open: slow calls go on
	once   sync.Once
}

func newAcquireGate() *acquireGate {
	return &acquireGate{script: "acquire", held: make(chan int, 16), pass: make(chan struct{}), opened: make(chan struct{})}
}

// open lets every call through from now on, the held ones too if slow.
func (g *acquireGate) open() {
	g.once.Do(func() {
		g.shut.Store(false)
		close(g.opened)
	})
}

func (g *acquireGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !g.shut.Load() || redislane.ScriptOf(cmd) != g.script {
			return next(ctx, cmd)
		}
		// evalsha, sha, numkeys, 5 keys, then the script's arguments:
		// acquire, 10 and a triple (id, weight, may hold) per request
		// behind the head; release, 8 and one more id per permit.
		argv := len(cmd.Args()) - 8
		if g.script == "acquire" {
			g.held <- 1 + (argv-10)/3
		} else {
			g.held <- 1 + argv - 8
		}
		if g.late.Load() {
			err := next(ctx, cmd)
			select {
			case <-g.pass:
			case <-g.opened:
			}
			return err
		}
		if g.slow {
			select {
			case <-g.pass:
			case <-g.opened:
			}
			return next(ctx, cmd)
		}
		select {
		case <-g.pass:
			return next(ctx, cmd)
		case <-ctx.Done():
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
	}
}

// batchLane returns an instance of lane name, of capacity capacity, whose
// acquire calls go through g, with its script loaded (so that each call is
// one EVALSHA).
func batchLane(t *testing.T, addr, name string, capacity int64, g *acquireGate) *redislane.Weighted {
	t.Helper()
	rc := newClient(t, addr)
	rc.AddHook(g)
	s, err := redislane.NewWeighted(rc, name, capacity, redislane.WithLease(batchLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	warm(t, s)
	return s
}

// got is the outcome of one waiter of a test.
type got struct {
	i   int
	p   *redislane.Permit
	err error
}

// lineUp starts a waiter of weight n on s with ctx, and waits until it
// stands in the local line (s has want waiters), so that the waiters of a
// test line up in the order they were started. onGrant, if not nil, is
// called with the permit before the waiter reports it.
func lineUp(t *testing.T, s *redislane.Weighted, ctx context.Context, i int, n int64, want int, out chan<- got, onGrant ...func(*redislane.Permit)) {
	t.Helper()
	go func() {
		p, err := s.Acquire(ctx, n)
		if err == nil {
			for _, f := range onGrant {
				f(p)
			}
		}
		out <- got{i: i, p: p, err: err}
	}()
	waitFor(t, testkit.Deadline, "the waiter to line up", func() bool { return s.Stats().Waiters == want })
}

// bucketHeld reads the weight held in Redis in the one bucket of Weighted
// lane name, as the scripts count it.
func bucketHeld(t *testing.T, rc *redis.Client, name string) int64 {
	t.Helper()
	n, err := rc.HGet(context.Background(), "{lanes:"+name+"}:g:d", "held").Int64()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return n
}

// One call of the head grants the waiters behind it, in line order, as far
// as the capacity goes and no further: a checker counting the holders never
// sees more than the capacity, and the fencing tokens (increasing in grant
// order) increase in line order. Deliberate bug it caught: the script's
// batch without its check that a request fits (every waiter carried was
// granted: 8 holders of capacity 5).
func TestBatchGrantsInLineOrderWithinCapacity(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	const capacity, waiters = 5, 9
	s := batchLane(t, srv.Addr, name, capacity, g)
	ctx := testCtx(t)

	// The checker: the waiters count themselves in when Acquire returns,
	// the test counts them out before it releases.
	var holders, most atomic.Int64
	in := func(p *redislane.Permit) {
		n := holders.Add(p.Weight())
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	}
	out := make(chan got, waiters)
	g.shut.Store(true)
	lineUp(t, s, ctx, 0, 1, 1, out, in)
	require.Equal(t, 1, testkit.Recv(t, g.held, "the first waiter's call"), "a lone waiter's call carries its request only")
	for i := 1; i < waiters; i++ {
		lineUp(t, s, ctx, i, 1, i+1, out, in)
	}
	g.shut.Store(false)
	g.pass <- struct{}{}

	// The first is granted alone; the next (now first) carries the others
	// as far as their weight fits (4 of 7): it and three behind it are
	// granted in one call, the sixth finds the lane full and queues.
	fences := make([]int64, waiters)
	var held []*redislane.Permit
	take := func(r got) {
		t.Helper()
		require.NoError(t, r.err, "waiter %d", r.i)
		fences[r.i] = r.p.Fence()
		held = append(held, r.p)
	}
	for range capacity {
		take(testkit.Recv(t, out, "a grant"))
	}
	waitFor(t, testkit.Deadline, "the sixth waiter to queue in Redis", func() bool {
		return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	assert.EqualValues(t, capacity, bucketHeld(t, direct, name), "weight held in Redis")
	assert.EqualValues(t, 3, s.Stats().Batched, "grants made in the call of another waiter")
	for i := range capacity {
		assert.NotZero(t, fences[i], "waiter %d of the first %d in line was not granted", i, capacity)
	}

	// Each release hands one unit on: every waiter is served.
	for left := waiters - capacity; len(held) > 0; {
		p := held[0]
		held = held[1:]
		holders.Add(-p.Weight())
		p.Release()
		if left > 0 {
			take(testkit.Recv(t, out, "the next grant"))
			left--
		}
	}
	assert.LessOrEqual(t, most.Load(), int64(capacity), "holders at once")
	for i := 1; i < waiters; i++ {
		assert.Less(t, fences[i-1], fences[i], "waiter %d was granted before waiter %d, ahead of it in line", i, i-1)
	}
	assert.Zero(t, bucketHeld(t, direct, name))
}

// A batch in which a waiter does not fit ends there: a lighter waiter
// behind it, which would fit, is not granted before it. Another instance
// holds 2 of 5. Deliberate bug it caught: the script's batch going on past
// a request that does not fit (the waiter of weight 1 behind the one of
// weight 2 was granted: 5 held in Redis).
func TestBatchGrantsOnlyThePrefixThatFits(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	s := batchLane(t, srv.Addr, name, 5, g)
	other := newSem(t, srv.Addr, name, 5, redislane.WithLease(batchLease))
	ctx := testCtx(t)
	po, err := other.Acquire(ctx, 2)
	require.NoError(t, err)

	out := make(chan got, 4)
	g.shut.Store(true)
	lineUp(t, s, ctx, 0, 1, 1, out)
	testkit.Recv(t, g.held, "the first waiter's call")
	lineUp(t, s, ctx, 1, 1, 2, out)
	lineUp(t, s, ctx, 2, 2, 3, out)
	lineUp(t, s, ctx, 3, 1, 4, out)
	g.pass <- struct{}{} // the first: 3 of 5 held
	require.Equal(t, 3, testkit.Recv(t, g.held, "the second waiter's call"), "the call of the second carries the two behind it")
	g.shut.Store(false)
	g.pass <- struct{}{} // the second fits (4 of 5), the third (2) does not, the fourth (1) would

	first := testkit.Recv(t, out, "the first grant")
	second := testkit.Recv(t, out, "the second grant")
	require.NoError(t, first.err)
	require.NoError(t, second.err)
	// Both came from calls that are over: Redis holds what they granted.
	assert.EqualValues(t, 4, bucketHeld(t, direct, name), "weight held in Redis: the fourth waiter was granted before the third")
	assert.ElementsMatch(t, []int{0, 1}, []int{first.i, second.i})
	waitFor(t, testkit.Deadline, "the third waiter to queue in Redis", func() bool {
		return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	assert.Equal(t, 2, s.Stats().Waiters)

	// The other instance's release hands 2 to the third, and then the
	// fourth fits too: the third is granted first.
	po.Release()
	third := testkit.Recv(t, out, "the next grant")
	fourth := testkit.Recv(t, out, "the next grant")
	require.NoError(t, third.err)
	require.NoError(t, fourth.err)
	if third.i > fourth.i {
		third, fourth = fourth, third
	}
	assert.Equal(t, []int{2, 3}, []int{third.i, fourth.i})
	assert.Less(t, third.p.Fence(), fourth.p.Fence(), "the fourth waiter was granted before the third")
	for _, p := range []*redislane.Permit{first.p, second.p, third.p, fourth.p} {
		p.Release()
	}
	assert.Zero(t, bucketHeld(t, direct, name))
}

// A waiter whose context ends while the call of the head carries its
// request returns at once, and what the call grants it is given back:
// once the head's Acquire has returned, Redis holds only the head's and
// the first's weight, and after their release the whole capacity is free.
// Deliberate bug it caught: settle without its give-back for a waiter that
// left (Redis held 3 of 3 after the head returned; TryAcquire(3) failed).
func TestBatchWaiterCancelledInFlightLosesNothing(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	const capacity = 3
	s := batchLane(t, srv.Addr, name, capacity, g)
	ctx := testCtx(t)

	out := make(chan got, 3)
	g.shut.Store(true)
	lineUp(t, s, ctx, 0, 1, 1, out)
	testkit.Recv(t, g.held, "the first waiter's call")
	lineUp(t, s, ctx, 1, 1, 2, out)
	short, cancel := context.WithCancel(ctx)
	defer cancel()
	lineUp(t, s, short, 2, 1, 3, out)
	g.pass <- struct{}{}
	first := testkit.Recv(t, out, "the first grant")
	require.NoError(t, first.err)
	require.Equal(t, 2, testkit.Recv(t, g.held, "the second waiter's call"), "the call carries the third waiter")

	cancel()
	left := testkit.Recv(t, out, "the cancelled waiter to return")
	assert.Equal(t, 2, left.i)
	failed(t, left.p, left.err, context.Canceled)
	g.shut.Store(false)
	g.pass <- struct{}{}
	second := testkit.Recv(t, out, "the second grant")
	require.NoError(t, second.err)
	assert.EqualValues(t, 2, bucketHeld(t, direct, name), "weight held in Redis once the call returned")

	first.p.Release()
	second.p.Release()
	p, ok := s.TryAcquire(capacity)
	require.True(t, ok, "the whole capacity is free: the cancelled waiter's grant came back")
	p.Release()
	assert.Zero(t, s.Stats().Waiters)
	assert.Zero(t, s.Stats().Held)
}

// Close while the call of a head carries the requests of the waiters
// behind it: every waiter returns ErrClosed, Close returns once the call
// is done, and every unit the call granted is given back: Redis holds only
// the permit granted before Close (which Close ends, and leaves to run
// out). Deliberate bug it caught: settle without its give-back for a
// waiter that left (4 of 4 held after Close).
func TestBatchInFlightAtClose(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	g.slow = true // Close cannot return before the test lets the call go
	defer g.open()
	const capacity = 4
	s := batchLane(t, srv.Addr, name, capacity, g)
	ctx := testCtx(t)

	out := make(chan got, 4)
	g.shut.Store(true)
	lineUp(t, s, ctx, 0, 1, 1, out)
	testkit.Recv(t, g.held, "the first waiter's call")
	lineUp(t, s, ctx, 1, 1, 2, out)
	lineUp(t, s, ctx, 2, 1, 3, out)
	lineUp(t, s, context.Background(), 3, 1, 4, out) // a context that never ends
	g.pass <- struct{}{}
	first := testkit.Recv(t, out, "the first grant")
	require.NoError(t, first.err)
	require.Equal(t, 3, testkit.Recv(t, g.held, "the second waiter's call"), "the call carries the two behind it")

	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	for range 3 {
		r := testkit.Recv(t, out, "a waiter to be sent away by Close")
		failed(t, r.p, r.err, redislane.ErrClosed, "waiter %d", r.i)
	}
	select {
	case <-closed:
		t.Fatal("Close returned with a call of the lane in flight")
	default:
	}
	g.shut.Store(false)
	g.pass <- struct{}{}
	testkit.Recv(t, closed, "Close to return")
	assert.ErrorIs(t, context.Cause(first.p.Context()), redislane.ErrClosed)
	assert.EqualValues(t, 1, bucketHeld(t, direct, name), "weight held in Redis after Close: only the permit from before")
	assert.EqualValues(t, 1, direct.ZCard(ctx, "{lanes:"+name+"}:g:h").Val())
	first.p.Release()
}

// Releases made while a release call of the instance is in flight go to
// Redis together, in the next call: here 4 permits released while the call
// of a fifth is held. Each Release returns within its bound (a fifth of
// the lease, at most 250 ms) all the same, and every unit comes back.
// Deliberate bug it caught: releaseLoop taking one release per call (calls
// of 1, 1 and 1 ids, not 1 and 4).
func TestReleasesMadeTogetherGoInOneCall(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	g.script, g.slow = "release", true
	const capacity = 5
	s := batchLane(t, srv.Addr, name, capacity, g)
	ctx := testCtx(t)
	ps := make([]*redislane.Permit, capacity)
	for i := range ps {
		p, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		ps[i] = p
	}

	g.shut.Store(true)
	first := testkit.Go(func() error { ps[0].Release(); return nil }) // its call is held
	require.Equal(t, 1, testkit.Recv(t, g.held, "the first release call"))
	defer g.open() // if the test fails with calls held
	var rest []<-chan error
	for _, p := range ps[1:] {
		rest = append(rest, testkit.Go(func() error { p.Release(); return nil }))
	}
	for _, r := range rest { // each within its bound, its call waiting behind the held one
		testkit.Recv(t, r, "a Release to return")
	}
	g.pass <- struct{}{} // too late: its deadline has passed, and it fails
	testkit.Recv(t, first, "the first Release to return")

	// Then the first is tried once more, and one call carries the four
	// others, in either order.
	var calls []int
	for range 2 {
		calls = append(calls, testkit.Recv(t, g.held, "a release call"))
		g.pass <- struct{}{}
	}
	assert.ElementsMatch(t, []int{1, capacity - 1}, calls, "ids carried by the release calls after the first")
	g.open()
	waitFor(t, testkit.Deadline, "every unit back in Redis", func() bool { return bucketHeld(t, direct, name) == 0 })
	assert.Zero(t, direct.ZCard(ctx, "{lanes:"+name+"}:g:h").Val())
	p, ok := s.TryAcquire(capacity)
	require.True(t, ok)
	p.Release()
}

// A batch whose reply comes back later than the margin grants nothing to
// the waiters it carried, as for the first waiter: they ask again with the
// same ids, and Redis returns the same grants with fresh leases, so their
// permits run from a call sent after the late reply came, and Redis holds
// one entry each. Deliberate bug it caught: settle handing out the grants
// of a late reply (the second waiter's permit had the deadline of the
// late call, before the reply even came back).
func TestBatchLateReplyGrantsNothing(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	g := newAcquireGate()
	defer g.open()
	const lease = 500 * time.Millisecond // margin 100 ms
	rc := newClient(t, srv.Addr)
	rc.AddHook(g)
	s, err := redislane.NewWeighted(rc, name, 3, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)
	ctx := testCtx(t)

	out := make(chan got, 3)
	g.shut.Store(true)
	lineUp(t, s, ctx, 0, 1, 1, out)
	testkit.Recv(t, g.held, "the first waiter's call")
	lineUp(t, s, ctx, 1, 1, 2, out)
	lineUp(t, s, ctx, 2, 1, 3, out)
	g.late.Store(true) // the next call goes to Redis, its reply is held
	g.pass <- struct{}{}
	first := testkit.Recv(t, out, "the first grant")
	require.NoError(t, first.err)
	require.Equal(t, 2, testkit.Recv(t, g.held, "the second waiter's call, carrying the third"))
	time.Sleep(lease/5 + 50*time.Millisecond) // the reply ages past the margin
	g.shut.Store(false)
	g.late.Store(false)
	replied := time.Now()
	g.pass <- struct{}{}

	for range 2 {
		r := testkit.Recv(t, out, "a grant asked again")
		require.NoError(t, r.err, "waiter %d", r.i)
		assert.True(t, r.p.Deadline().After(replied.Add(lease-lease/5)),
			"waiter %d: its permit runs from a call sent before the late reply came (deadline %v before it)", r.i, replied.Add(lease-lease/5).Sub(r.p.Deadline()))
		defer r.p.Release()
	}
	assert.GreaterOrEqual(t, s.Stats().LateReplies, uint64(2), "late grants: the second waiter's and the third's")
	assert.EqualValues(t, 3, direct.ZCard(ctx, "{lanes:"+name+"}:g:h").Val(), "holders in Redis")
	assert.EqualValues(t, 3, bucketHeld(t, direct, name))
	first.p.Release()
}
