package redislane_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
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
)

// windowSum reads what a Tokens lane counts in its window now.
func windowSum(t *testing.T, rc *redis.Client, name string) int64 {
	t.Helper()
	v, err := rc.HGet(context.Background(), "{lanes:"+name+"}:t:w", "sum").Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

func newTokens(t *testing.T, addr, name string, perWindow int64, opts ...redislane.Option) *redislane.Tokens {
	t.Helper()
	opts = append([]redislane.Option{redislane.WithQuarantine(0)}, opts...)
	tk, err := redislane.NewTokens(newClient(t, addr), name, perWindow, opts...)
	require.NoError(t, err)
	t.Cleanup(tk.Close)
	return tk
}

// TestTokensSettle: an estimate is charged at once; a refund makes room
// (never more than the charge held), a debt takes it; a repeated Settle
// changes nothing more; a caller whose room comes after its deadline fails
// at once, saying when.
func TestTokensSettle(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name := laneName(t)
	a := newTokens(t, srv.Addr, name, 1000)
	b := newTokens(t, srv.Addr, name, 1000)
	ctx := testCtx(t)

	c1, err := a.Acquire(ctx, 600)
	require.NoError(t, err)
	assert.EqualValues(t, 600, windowSum(t, rc, name))
	ch, ok := b.TryAcquire(500)
	assert.False(t, ok, "b was charged past the budget: %v", ch)

	require.NoError(t, c1.Settle(ctx, 350)) // a refund of 250
	assert.EqualValues(t, 350, windowSum(t, rc, name))
	require.NoError(t, c1.Settle(ctx, 350))
	assert.EqualValues(t, 350, windowSum(t, rc, name), "a repeated Settle changes nothing more")
	c2, ok := b.TryAcquire(500)
	require.True(t, ok, "the refund made room")
	assert.EqualValues(t, 850, windowSum(t, rc, name))

	require.NoError(t, c2.Settle(ctx, 640)) // a debt of 140
	assert.EqualValues(t, 990, windowSum(t, rc, name))
	require.NoError(t, c1.Settle(ctx, 700)) // c1 used more after all: its refund undone, a debt of 100
	assert.EqualValues(t, 1340, windowSum(t, rc, name), "debts pass the budget: later callers wait them out")
	require.NoError(t, c1.Settle(ctx, 0)) // ... and then none at all
	assert.EqualValues(t, 640, windowSum(t, rc, name), "a refund never returns more than the charge holds")

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c3, err := a.Acquire(dctx, 400) // 640 + 400 > 1000 until the window (a minute) moves on
	if err == nil {
		t.Fatalf("charged past the budget at %v", c3.Time())
	}
	var le *redislane.LateError
	require.ErrorAs(t, err, &le)
	assert.ErrorIs(t, err, redislane.ErrWindowFull)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, dctx.Err(), "refused at once, not at the deadline")
	assert.Greater(t, le.RetryAfter, 30*time.Second, "the room comes when b's charge leaves the window")

	assert.ErrorIs(t, c1.Settle(ctx, -1), redislane.ErrInvalidWeight)
	_, err = a.Acquire(ctx, 1001)
	assert.ErrorIs(t, err, redislane.ErrTooHeavy)
	_, err = a.Acquire(ctx, 0)
	assert.ErrorIs(t, err, redislane.ErrInvalidWeight)
}

// TestTokensWindowMovesOn: a waiter whose room comes within its deadline
// is charged once the charges before it leave the window, on the server's
// clock: never before one window after the charge that made room.
func TestTokensWindowMovesOn(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newTokens(t, srv.Addr, name, 10, redislane.WithWindow(300*time.Millisecond))
	b := newTokens(t, srv.Addr, name, 10, redislane.WithWindow(300*time.Millisecond))
	ctx := testCtx(t)
	first, err := a.Acquire(ctx, 10)
	require.NoError(t, err)
	next, err := b.Acquire(ctx, 4)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, next.Time().Sub(first.Time()), 300*time.Millisecond, "charged before the first charge left the window")
}

// TestTokensCooldown: a cooldown set by one instance closes the lane to
// the others' charges; a caller whose deadline comes first fails at once.
func TestTokensCooldown(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newTokens(t, srv.Addr, name, 100)
	b := newTokens(t, srv.Addr, name, 100)
	ctx := testCtx(t)
	_, err := a.Cooldown(ctx, time.Minute)
	require.NoError(t, err)
	_, ok := b.TryAcquire(1)
	assert.False(t, ok, "charged during the cooldown")
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = b.Acquire(dctx, 1)
	var le *redislane.LateError
	require.ErrorAs(t, err, &le)
	assert.ErrorIs(t, err, redislane.ErrCoolingDown)
	assert.NoError(t, dctx.Err(), "refused at once, not at the deadline")
	assert.Greater(t, le.RetryAfter, 30*time.Second)
}

// TestTokensCooldownFailsWaitersBehindTheHead: a caller waiting behind
// the caller of its instance that asks Redis fails at once when the
// instance learns of a cooldown that ends after its deadline.
func TestTokensCooldownFailsWaitersBehindTheHead(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newTokens(t, srv.Addr, name, 10)
	b := newTokens(t, srv.Addr, name, 10)
	ctx := testCtx(t)
	_, err := a.Acquire(ctx, 10) // the window is full for a minute
	require.NoError(t, err)
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Minute) // past the room
	defer hcancel()
	head := testkit.Go(func() error { _, err := b.Acquire(hctx, 1); return err })
	waitFor(t, 10*time.Second, "b's head to wait", func() bool { return b.Stats().Waiters == 1 })
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	behind := testkit.Go(func() error { _, err := b.Acquire(fctx, 1); return err })
	waitFor(t, 10*time.Second, "a caller behind b's head", func() bool { return b.Stats().Waiters == 2 })

	_, err = a.Cooldown(ctx, 90*time.Second) // past the follower's deadline, and the head's room
	require.NoError(t, err)
	select {
	case err := <-behind:
		var le *redislane.LateError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, redislane.ErrCoolingDown)
		assert.NoError(t, fctx.Err(), "refused at once, not at the deadline")
	case <-time.After(15 * time.Second):
		t.Fatal("the caller behind b's head did not fail before its deadline")
	}
	hcancel()
	select {
	case err := <-head:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("b's head did not return after its context ended")
	}
}

// TestTokensConfig: a bad window is refused; instances that disagree on
// the window or the budget do not share a lane silently.
func TestTokensConfig(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	for _, w := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, -time.Second} { // 0 is refused, not the default
		_, err := redislane.NewTokens(rc, "x", 10, redislane.WithWindow(w))
		assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "window %v", w)
	}
	_, err := redislane.NewTokens(rc, "x", 0)
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
	// A charge is not held, so a bound on holding it would be ignored.
	_, err = redislane.NewTokens(rc, "x", 10, redislane.WithMaxHold(time.Minute))
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig, "WithMaxHold on a Tokens lane")
	name := laneName(t)
	ctx := testCtx(t)
	a := newTokens(t, srv.Addr, name, 10)
	_, err = a.Acquire(ctx, 1)
	require.NoError(t, err)
	for _, other := range []*redislane.Tokens{
		newTokens(t, srv.Addr, name, 10, redislane.WithWindow(time.Second)),
		newTokens(t, srv.Addr, name, 11),
	} {
		_, err = other.Acquire(ctx, 1)
		assert.ErrorIs(t, err, redislane.ErrCapacityMismatch)
	}
	w, err := redislane.NewWeighted(rc, name, 10, redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Acquire(ctx, 1)
	assert.ErrorIs(t, err, redislane.ErrCapacityMismatch, "a Weighted on a Tokens lane's name")
}

// providerCall is what the fake provider counts of one call: when its
// request and its tokens were charged (the server's clock), and how many
// tokens it used.
type providerCall struct {
	req, tok     time.Time
	est, actual  int64
	replica, seq int
}

// fakeProvider is the fake provider of the fleet tests: an in-test counter.
type fakeProvider struct {
	mu    sync.Mutex
	calls []providerCall
}

func (p *fakeProvider) add(c providerCall) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

// maxInWindow returns the most of weight(c) over calls whose at(c) falls
// in any window [s, s+w).
func maxInWindow(calls []providerCall, w time.Duration, at func(providerCall) time.Time, weight func(providerCall) int64) int64 {
	cs := append([]providerCall(nil), calls...)
	sort.Slice(cs, func(i, j int) bool { return at(cs[i]).Before(at(cs[j])) })
	var best, sum int64
	j := 0
	for i := range cs {
		sum += weight(cs[i])
		for !at(cs[j]).After(at(cs[i]).Add(-w)) { // keep the calls in (at(i)-w, at(i)]
			sum -= weight(cs[j])
			j++
		}
		best = max(best, sum)
	}
	return best
}

// fleetRun runs workers[r] callers on replica r (its requests and tokens
// lanes) until ctx ends, each calling the fake provider with an estimate
// of est and a use drawn from [est-over, est+under], settled after the
// call; it returns what the provider counted.
func fleetRun(t *testing.T, ctx context.Context, reqs, toks []*redislane.Tokens, workers []int, est, over, under int64) []providerCall {
	t.Helper()
	var prov fakeProvider
	var done []<-chan error
	for r := range reqs {
		for g := 0; g < workers[r]; g++ {
			rng := rand.New(rand.NewPCG(uint64(r), uint64(g)))
			done = append(done, testkit.Go(func() error {
				for i := 0; ; i++ {
					tc, err := toks[r].Acquire(ctx, est)
					if err != nil {
						return ignoreEnd(ctx, err)
					}
					rq, err := reqs[r].Acquire(ctx, 1)
					if err != nil {
						_ = tc.Settle(context.Background(), 0) // never sent
						return ignoreEnd(ctx, err)
					}
					actual := est - over + rng.Int64N(over+under+1)
					prov.add(providerCall{req: rq.Time(), tok: tc.Time(), est: est, actual: actual, replica: r, seq: i})
					if err := tc.Settle(context.Background(), actual); err != nil {
						return err
					}
				}
			}))
		}
	}
	for _, ch := range done {
		select {
		case err := <-ch:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a caller of the fleet did not return after its context ended")
		}
	}
	return prov.calls
}

// ignoreEnd drops the error of a caller whose context ended (the run is
// over), and of one refused at once because its room came after the end.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// TestFleetTokensNeverPassTheBudget: three replicas, each on its own
// client, share a budget of N requests and T tokens per window. Counted
// at the fake provider, by the server's time of each charge: no window
// holds more than N requests, nor more than T tokens plus the
// under-estimates of the calls in flight (one caller per replica: at
// most three). Beside it, the same load under a per-replica budget of N/3
// and T/3 (the usual fix for a fleet without a shared budget), with a
// skewed load: one replica busy, the others idle. The shared budget lets
// that replica use the whole budget; the split one caps it at a third.
func TestFleetTokensNeverPassTheBudget(t *testing.T) {
	srv := startRedis(t)
	const (
		N     = 30
		T     = 2400
		est   = 100
		over  = 50 // actual down to est-over: a refund
		under = 20 // actual up to est+under: a debt
		win   = time.Second
	)
	rname, tname := laneName(t), laneName(t)
	var reqs, toks []*redislane.Tokens
	for range 3 {
		reqs = append(reqs, newTokens(t, srv.Addr, rname, N, redislane.WithWindow(win)))
		toks = append(toks, newTokens(t, srv.Addr, tname, T, redislane.WithWindow(win)))
	}
	// Real time, on the server's clock, with a deadline: 2.5 windows.
	ctx, cancel := context.WithTimeout(testCtx(t), 5*win/2)
	defer cancel()
	calls := fleetRun(t, ctx, reqs, toks, []int{1, 1, 1}, est, over, under)
	maxReq := maxInWindow(calls, win, func(c providerCall) time.Time { return c.req }, func(providerCall) int64 { return 1 })
	maxTok := maxInWindow(calls, win, func(c providerCall) time.Time { return c.tok }, func(c providerCall) int64 { return c.actual })
	maxEst := maxInWindow(calls, win, func(c providerCall) time.Time { return c.tok }, func(c providerCall) int64 { return c.est })
	t.Logf("shared budget, 3 replicas: %d calls in %v; most in any window: %d requests (budget %d), %d tokens used (budget %d; their estimates: %d, refunds made room)",
		len(calls), 5*win/2, maxReq, N, maxTok, T, maxEst)
	assert.LessOrEqual(t, maxReq, int64(N), "requests in one window passed the fleet's budget")
	assert.LessOrEqual(t, maxTok, int64(T+3*under), "tokens in one window passed the budget by more than the under-estimates in flight")
	require.NotEmpty(t, calls)

	// Skewed: replica 0 busy (3 callers), the others idle; shared, then
	// split in thirds (each replica its own lanes).
	skew := []int{3, 0, 0}
	var hreqs, htoks, sreqs, stoks []*redislane.Tokens
	rname, tname = laneName(t), laneName(t) // fresh windows
	for r := range 3 {
		hreqs = append(hreqs, newTokens(t, srv.Addr, rname, N, redislane.WithWindow(win)))
		htoks = append(htoks, newTokens(t, srv.Addr, tname, T, redislane.WithWindow(win)))
		sreqs = append(sreqs, newTokens(t, srv.Addr, rname+"-r"+strconv.Itoa(r), N/3, redislane.WithWindow(win)))
		stoks = append(stoks, newTokens(t, srv.Addr, tname+"-r"+strconv.Itoa(r), T/3, redislane.WithWindow(win)))
	}
	ctx2, cancel2 := context.WithTimeout(testCtx(t), 3*win/2)
	defer cancel2()
	shared := fleetRun(t, ctx2, hreqs, htoks, skew, est, over, under)

	ctx3, cancel3 := context.WithTimeout(testCtx(t), 3*win/2)
	defer cancel3()
	split := fleetRun(t, ctx3, sreqs, stoks, skew, est, over, under)
	t.Logf("skewed load (one replica busy), %v: shared budget %d calls, per-replica N/3 budget %d calls", 3*win/2, len(shared), len(split))
	// The split budget under an even load, for the note: as the shared one.
	var ereqs, etoks []*redislane.Tokens
	for r := range 3 {
		ereqs = append(ereqs, newTokens(t, srv.Addr, rname+"-e"+strconv.Itoa(r), N/3, redislane.WithWindow(win)))
		etoks = append(etoks, newTokens(t, srv.Addr, tname+"-e"+strconv.Itoa(r), T/3, redislane.WithWindow(win)))
	}
	ctx4, cancel4 := context.WithTimeout(testCtx(t), 3*win/2)
	defer cancel4()
	even := fleetRun(t, ctx4, ereqs, etoks, []int{1, 1, 1}, est, over, under)
	t.Logf("even load (one caller per replica), %v: per-replica N/3 budget %d calls", 3*win/2, len(even))
	assert.LessOrEqual(t, len(even), 2*N, "the per-replica budgets passed their own bound")
	// In 1.5 windows a budget of n per window admits at most 2n: the
	// split one at most 2N/3 for the busy replica. The shared one admits
	// N at once, and more when the first charges leave.
	assert.LessOrEqual(t, len(split), 2*N/3, "the per-replica budget passed its own bound")
	assert.Greater(t, len(shared), 2*N/3, "the shared budget let the busy replica use no more than a third")
}

// TestTokensThroughAQueue: a Tokens lane in a lanequeue.Queue is a rate
// lane shared by the fleet: a call whose room comes after its deadline
// fails at once with a LaneError whose cause is the LateError.
func TestTokensThroughAQueue(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	other := newTokens(t, srv.Addr, name, 2)
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("rpm", redislane.AsRateLane[string](newTokens(t, srv.Addr, name, 2))))
	set, err := q.Lanes("rpm")
	require.NoError(t, err)
	ctx := testCtx(t)
	_, err = other.Acquire(ctx, 1) // another replica's request
	require.NoError(t, err)
	tk, err := q.AcquireAll(ctx, "k", set)
	require.NoError(t, err)
	tk.Release()

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tk, err = q.AcquireAll(dctx, "k", set)
	if err == nil {
		tk.Release()
		t.Fatal("a third request in the window of a budget of 2")
	}
	var le *lanequeue.LaneError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "rpm", le.Lane)
	var late *redislane.LateError
	require.ErrorAs(t, err, &late)
	assert.ErrorIs(t, err, redislane.ErrWindowFull)
	assert.NoError(t, dctx.Err(), "refused at once, not at the deadline")
	assert.Greater(t, late.RetryAfter, 30*time.Second)
}

// TestTicketSettleReachesTheFleet: a queue's Ticket.Settle settles the
// fleet's charge of a token lane made by AsRateLane (a refund the other
// replicas can use at once), and a call that a later lane refuses gives
// the fleet its estimate back. Before, AsRateLane dropped the charge:
// Settle refused the lane, and the refused call's estimate stayed charged
// for the window.
func TestTicketSettleReachesTheFleet(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	name, full := laneName(t), laneName(t)+"-full"
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("tpm", redislane.AsRateLane[string](newTokens(t, srv.Addr, name, 1000))))
	// Lanes are taken by kind, then name: "tpm" before "upstream".
	require.NoError(t, q.Add("upstream", redislane.AsRateLane[string](newTokens(t, srv.Addr, full, 1))))
	tpm, err := q.Lanes("tpm")
	require.NoError(t, err)
	ctx := testCtx(t)

	tk, err := q.AcquireAll(ctx, "k", tpm, lanequeue.LaneWeight("tpm", 600))
	require.NoError(t, err)
	assert.EqualValues(t, 600, windowSum(t, rc, name))
	require.NoError(t, tk.Settle("tpm", 150))
	assert.EqualValues(t, 150, windowSum(t, rc, name), "the refund reached the fleet's window")
	require.NoError(t, tk.Settle("tpm", 700))
	assert.EqualValues(t, 700, windowSum(t, rc, name), "the debt reached the fleet's window")
	tk.Release()
	assert.ErrorIs(t, tk.Settle("tpm", 1), redislane.ErrClosed, "a released ticket settles nothing")

	// The second lane's one request a window is spent, so a call for
	// both is charged on tpm and then refused on upstream.
	both, err := q.Lanes("tpm", "upstream")
	require.NoError(t, err)
	first, err := q.AcquireAll(ctx, "k", both, lanequeue.LaneWeight("tpm", 100))
	require.NoError(t, err)
	first.Release()
	assert.EqualValues(t, 800, windowSum(t, rc, name))
	if tk, ok := q.TryAcquireAll("k", both, lanequeue.LaneWeight("tpm", 200)); ok {
		tk.Release()
		t.Fatal("a second request in a window of one")
	}
	assert.EqualValues(t, 800, windowSum(t, rc, name), "the refused call's estimate was given back")
}

// TestTokensQuarantineSaysSo: a caller whose deadline comes before a new
// lane's quarantine ends fails at once with a LateError whose Err is
// ErrQuarantined, not ErrWindowFull: nothing was charged, the window is
// empty (a new user's trial read "window's budget spent" there). A caller
// short of room in the window after the quarantine still gets
// ErrWindowFull.
func TestTokensQuarantineSaysSo(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	tk, err := redislane.NewTokens(newClient(t, srv.Addr), name, 10, redislane.WithWindow(10*time.Second))
	require.NoError(t, err)
	defer tk.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	_, err = tk.Acquire(ctx, 1)
	var le *redislane.LateError
	require.ErrorAs(t, err, &le)
	assert.ErrorIs(t, err, redislane.ErrQuarantined)
	assert.NotErrorIs(t, err, redislane.ErrWindowFull)
	assert.Greater(t, le.RetryAfter, 2*time.Second, "the quarantine's end, a window after the lane's state was made")

	open := newTokens(t, srv.Addr, laneName(t), 10, redislane.WithWindow(10*time.Second))
	_, err = open.Acquire(ctx, 10)
	require.NoError(t, err)
	_, err = open.Acquire(ctx, 1)
	assert.ErrorIs(t, err, redislane.ErrWindowFull)
	assert.NotErrorIs(t, err, redislane.ErrQuarantined)
}
