package lanequeue_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// coolQueue is a queue with a session lane and a provider lane of
// capacity 1, on a fake clock that starts at the system's time (so that
// contexts' deadlines, which are system times, compare with it).
func coolQueue(t *testing.T) (*lanequeue.Queue[string], *clock.Fake) {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "provider", 1))
	clk := clock.NewFake(time.Now())
	q.SetClock(clk)
	t.Cleanup(q.Close)
	return q, clk
}

// pending waits until clk has n timers armed, or fails after the
// package's deadline.
func pending(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() { clk.BlockUntilPending(n); close(done) }()
	testkit.Recv(t, done, "a cooldown timer")
}

// TestCooldownHoldsEveryCallerInLine: a cooldown on the provider lane
// pauses every caller, not only one; they keep their order, and go one by
// one, as the lane's capacity allows, once it reopens.
func TestCooldownHoldsEveryCallerInLine(t *testing.T) {
	q, clk := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", 30*time.Second))
	names := []string{"session", "provider"}
	a := acquireAsync(context.Background(), q, "a", names)
	pending(t, clk, 1) // a holds the provider's permit and waits out the pause
	b := acquireAsync(context.Background(), q, "b", names)
	testkit.Eventually(t, "b to queue", func() bool { return laneStats(t, q, "provider").Waiters == 1 })
	c := acquireAsync(context.Background(), q, "c", names)
	testkit.Eventually(t, "c to queue", func() bool { return laneStats(t, q, "provider").Waiters == 2 })
	select {
	case r := <-a:
		t.Fatalf("a returned during the cooldown: %v", r.err)
	default:
	}
	clk.Advance(30 * time.Second)
	ra := receive(t, a)
	must(t, ra.err)
	ra.t.Release()
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	rc := receive(t, c)
	must(t, rc.err)
	rc.t.Release()
	assertNothingHeld(t, q)
}

// TestCooldownDeadlineBeforeReopenFailsAtOnce: a caller whose deadline
// comes before the lane reopens fails without waiting and takes nothing;
// its LaneError names the lane and says when it reopens.
func TestCooldownDeadlineBeforeReopenFailsAtOnce(t *testing.T) {
	q, _ := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", 10*time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tk, err := acquireAll(q, ctx, "k", []string{"session", "provider"})
	var le *lanequeue.LaneError
	if tk != nil || !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll = (%v, %v); want a LaneError wrapping DeadlineExceeded", tk, err)
	}
	if le.Lane != "provider" || le.RetryAfter != 10*time.Minute {
		t.Fatalf("LaneError %+v; want lane provider, RetryAfter 10m", le)
	}
	if ctx.Err() != nil {
		t.Fatalf("the call waited for its context to end: %v", ctx.Err())
	}
	assertNothingHeld(t, q)
}

// TestCooldownCancelledWhileWaitingGivesBack: a caller cancelled while it
// waits out a pause gives back what it took, and the next in line gets it
// once the lane reopens.
func TestCooldownCancelledWhileWaitingGivesBack(t *testing.T) {
	q, clk := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", time.Minute))
	names := []string{"session", "provider"}
	ctx, cancel := context.WithCancel(context.Background())
	a := acquireAsync(ctx, q, "a", names)
	pending(t, clk, 1)
	b := acquireAsync(context.Background(), q, "b", names)
	testkit.Eventually(t, "b to queue", func() bool { return laneStats(t, q, "provider").Waiters == 1 })
	cancel()
	ra := receive(t, a)
	var le *lanequeue.LaneError
	if ra.t != nil || !errors.As(ra.err, &le) || !errors.Is(ra.err, context.Canceled) || le.Lane != "provider" {
		t.Fatalf("a = (%v, %v); want a provider LaneError wrapping Canceled", ra.t, ra.err)
	}
	pending(t, clk, 1) // b took the permit a gave back, and waits out the pause
	clk.Advance(time.Minute)
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	assertNothingHeld(t, q)
}

// TestCooldownTryAndCheck: TryAcquireAll takes nothing and Check says why
// while a lane cools down; both are as before once it reopens. A lane
// not in the set is not paused.
func TestCooldownTryAndCheck(t *testing.T) {
	q, clk := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", time.Second))
	both, err := q.Lanes("session", "provider")
	must(t, err)
	if tk, ok := q.TryAcquireAll("k", both); ok {
		tk.Release()
		t.Fatal("TryAcquireAll granted during the cooldown")
	}
	var le *lanequeue.LaneError
	if err := q.Check(both); !errors.As(err, &le) || le.Lane != "provider" || le.RetryAfter != time.Second {
		t.Fatalf("Check = %v; want a provider LaneError with RetryAfter 1s", err)
	}
	session, err := q.Lanes("session")
	must(t, err)
	tk, ok := q.TryAcquireAll("k", session)
	if !ok {
		t.Fatal("a set without the cooling lane was refused")
	}
	tk.Release()
	clk.Advance(time.Second)
	must(t, q.Check(both))
	tk, ok = q.TryAcquireAll("k", both)
	if !ok {
		t.Fatal("TryAcquireAll refused once the lane reopened")
	}
	tk.Release()
	assertNothingHeld(t, q)
}

// TestCooldownExtendsNeverShortens: a later Cooldown extends the pause,
// an earlier one leaves it; an unknown lane is an error.
func TestCooldownExtendsNeverShortens(t *testing.T) {
	q, _ := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", time.Minute))
	must(t, q.Cooldown(context.Background(), "provider", time.Second))
	both, err := q.Lanes("session", "provider")
	must(t, err)
	var le *lanequeue.LaneError
	if err := q.Check(both); !errors.As(err, &le) || le.RetryAfter != time.Minute {
		t.Fatalf("Check = %v; want RetryAfter 1m (the earlier Cooldown must not shorten it)", err)
	}
	must(t, q.Cooldown(context.Background(), "provider", 2*time.Minute))
	if err := q.Check(both); !errors.As(err, &le) || le.RetryAfter != 2*time.Minute {
		t.Fatalf("Check = %v; want RetryAfter 2m", err)
	}
	if err := q.Cooldown(context.Background(), "nope", time.Second); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Cooldown of an unknown lane = %v; want ErrUnknownLane", err)
	}
}

// TestCooldownEdges: a pause of any length, up to math.MaxInt64 ("for
// good"), pauses; a pause of 0 or less is none; a caller whose deadline is
// far off (past the year 2262, where nanoseconds since 1970 overflow)
// waits out a short pause rather than fail at once.
func TestCooldownEdges(t *testing.T) {
	q, clk := coolQueue(t)
	both, err := q.Lanes("session", "provider")
	must(t, err)
	must(t, q.Cooldown(context.Background(), "provider", 0))
	must(t, q.Cooldown(context.Background(), "provider", -time.Hour))
	must(t, q.Check(both))
	must(t, q.Cooldown(context.Background(), "provider", 10*time.Second))
	far := testkit.NewExpiring()
	far.At = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	defer far.Expire()
	r := acquireAsync(far, q, "k", []string{"session", "provider"})
	pending(t, clk, 1) // it waits out the pause
	clk.Advance(10 * time.Second)
	got := receive(t, r)
	must(t, got.err)
	got.t.Release()
	must(t, q.Cooldown(context.Background(), "provider", math.MaxInt64))
	var le *lanequeue.LaneError
	if err := q.Check(both); !errors.As(err, &le) || le.RetryAfter <= 0 {
		t.Fatalf("Check after Cooldown(MaxInt64) = %v; want the lane paused", err)
	}
}

// TestCooldownOnAClockBefore1970: the pause's end is computed without
// overflow on a test's clock that reads before 1970, so it ends.
func TestCooldownOnAClockBefore1970(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	clk := clock.NewFake(time.Unix(-1000, 0))
	q.SetClock(clk)
	must(t, addGlobal(q, "provider", 1))
	set, err := q.Lanes("provider")
	must(t, err)
	must(t, q.Cooldown(context.Background(), "provider", time.Second))
	var le *lanequeue.LaneError
	if err := q.Check(set); !errors.As(err, &le) || le.RetryAfter != time.Second {
		t.Fatalf("Check = %v; want a pause of 1s", err)
	}
	clk.Advance(time.Second)
	must(t, q.Check(set))
}

// panicClock is a clock whose timers panic: code of the program.
type panicClock struct{ *clock.Fake }

func (panicClock) NewTimer(time.Duration) clock.Timer { panic("clock broke") }

// TestCooldownClockPanicHoldsNothing: a clock that panics while a call
// waits out a pause leaves the call holding nothing; the panic goes on.
func TestCooldownClockPanicHoldsNothing(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	q.SetClock(panicClock{clock.NewFake(time.Now())})
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "provider", 1))
	must(t, q.Cooldown(context.Background(), "provider", time.Minute))
	func() {
		defer func() {
			if r := recover(); r != "clock broke" {
				t.Fatalf("recovered %v; want the clock's panic", r)
			}
		}()
		acquireAll(q, context.Background(), "k", []string{"session", "provider"})
	}()
	assertNothingHeld(t, q)
}

// coolingLane is a global lane that also pauses "a fleet" (records it), as
// redislane's lanes do, and whose refusals say when it can grant again.
type coolingLane struct {
	lanequeue.Lane[string]
	mu     sync.Mutex
	paused []time.Duration
	err    error
}

func (l *coolingLane) Cooldown(_ context.Context, d time.Duration) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paused = append(l.paused, d)
	return d, l.err
}

// A lane with a Cooldown method of its own (a fleet's) is told of the
// queue's cooldown, after the local pause; its failure is returned, and
// the local pause stands.
func TestCooldownTellsAFleetLane(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	l := &coolingLane{Lane: lanequeue.NewGlobalLane[string](semaphore.New(1))}
	must(t, q.Add("provider", l))
	must(t, q.Cooldown(context.Background(), "provider", 30*time.Second))
	must(t, q.Cooldown(context.Background(), "provider", 0)) // pauses nothing, tells nobody
	l.err = errors.New("redis down")
	err := q.Cooldown(context.Background(), "provider", time.Minute)
	if !errors.Is(err, l.err) {
		t.Fatalf("Cooldown = %v, want the fleet lane's error", err)
	}
	if want := []time.Duration{30 * time.Second, time.Minute}; !slices.Equal(l.paused, want) {
		t.Fatalf("the fleet lane was told %v, want %v", l.paused, want)
	}
	set, err := q.Lanes("provider")
	must(t, err)
	var le *lanequeue.LaneError
	if err := q.Check(set); !errors.As(err, &le) || le.RetryAfter <= 30*time.Second {
		t.Fatalf("Check = %v: the local pause must stand after the fleet's failure", err)
	}
}

// TestCooldownWaiterListed: a call that waits out a cooldown holds its
// keyed and global lanes, and is listed so: Holders shows them held by a
// waiting call, Waiters shows it waiting for the cooling lane (at
// Position 0: it holds the lane, in no line) and nothing else, whether it
// waited for an earlier lane first or not.
func TestCooldownWaiterListed(t *testing.T) {
	for _, waitedBefore := range []bool{false, true} {
		q, clk := coolQueue(t)
		names := []string{"session", "provider"}
		var first *lanequeue.Ticket[string]
		var r <-chan acquireResult
		if waitedBefore {
			// The call waits for its key first, then for the cooldown.
			var err error
			first, err = acquireAll(q, context.Background(), "k", []string{"session"})
			must(t, err)
			r = acquireAsync(context.Background(), q, "k", names)
			testkit.Eventually(t, "the call to wait for its key", func() bool { return laneStats(t, q, "session").Waiters == 1 })
			must(t, q.Cooldown(context.Background(), "provider", 5*time.Second))
			first.Release()
		} else {
			must(t, q.Cooldown(context.Background(), "provider", 5*time.Second))
			r = acquireAsync(context.Background(), q, "k", names)
		}
		pending(t, clk, 1) // the call holds both lanes and waits out the pause
		hs := q.Holders()
		var held []string
		for _, h := range hs {
			if h.Key != "k" || !h.Waiting || h.Weight != 1 {
				t.Errorf("waited before %v: holder %+v; want key k, weight 1, Waiting", waitedBefore, h)
			}
			held = append(held, h.Lane)
		}
		slices.Sort(held)
		if !slices.Equal(held, []string{"provider", "session"}) {
			t.Errorf("waited before %v: Holders lists %v; want provider and session (Stats: provider held %d)", waitedBefore, held, laneStats(t, q, "provider").Held)
		}
		ws := q.Waiters()
		if len(ws) != 1 || ws[0].Lane != "provider" || ws[0].Key != "k" || ws[0].Weight != 1 || ws[0].Position != 0 || ws[0].Holding != 2 {
			t.Errorf("waited before %v: Waiters = %+v; want one on provider for k, weight 1, Position 0, Holding 2", waitedBefore, ws)
		}
		clk.Advance(5 * time.Second)
		res := receive(t, r)
		must(t, res.err)
		if ws := q.Waiters(); len(ws) != 0 {
			t.Errorf("waited before %v: Waiters after the grant = %+v; want none", waitedBefore, ws)
		}
		res.t.Release()
		assertNothingHeld(t, q)
	}
}

// TestCooldownExtendedKeepsTheWaitersSince: a cooldown extended while a
// call waits it out leaves the call's listing as it was: Since is when the
// call began to wait for the cooling lane, not the extension's time.
func TestCooldownExtendedKeepsTheWaitersSince(t *testing.T) {
	q, clk := coolQueue(t)
	must(t, q.Cooldown(context.Background(), "provider", 5*time.Second))
	r := acquireAsync(context.Background(), q, "k", []string{"session", "provider"})
	pending(t, clk, 1)
	ws := q.Waiters()
	if len(ws) != 1 {
		t.Fatalf("Waiters = %+v; want the one call", ws)
	}
	since := ws[0].Since
	clk.Advance(time.Second)
	must(t, q.Cooldown(context.Background(), "provider", 10*time.Second)) // until 11s from the start
	clk.Advance(4 * time.Second)                                          // the first pause's end: the call looks again
	pending(t, clk, 1)
	testkit.Eventually(t, "the call to wait out the extension", func() bool {
		ws := q.Waiters()
		return len(ws) == 1 && clk.Pending() == 1
	})
	if ws := q.Waiters(); len(ws) != 1 || !ws[0].Since.Equal(since) {
		t.Fatalf("after the extension Waiters = %+v; want Since %v, as it was", ws, since)
	}
	clk.Advance(6 * time.Second)
	res := receive(t, r)
	must(t, res.err)
	res.t.Release()
	assertNothingHeld(t, q)
}

// TestCooldownWaitReportedToTheHooks: a call that waits out a cooldown is
// reported to OnSlowWait as a wait for the cooling lane, timed from its
// start, whether it is granted or cancelled. Before, neither was reported:
// hooks fed to a dashboard showed no wait during a provider's 429 storm
// (a new user's trial found it).
func TestCooldownWaitReportedToTheHooks(t *testing.T) {
	q, clk := coolQueue(t)
	lanequeue.SetClock(q, clk) // the hooks' times too
	var mu sync.Mutex
	var got []lanequeue.Event[string]
	q.SetHooks(lanequeue.Hooks[string]{SlowWait: time.Second, OnSlowWait: func(e lanequeue.Event[string]) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}})
	must(t, q.Cooldown(context.Background(), "provider", 30*time.Second))
	names := []string{"session", "provider"}
	ctx, cancel := context.WithCancel(context.Background())
	a := acquireAsync(ctx, q, "a", names)
	pending(t, clk, 1) // a waits out the pause
	clk.Advance(10 * time.Second)
	cancel()
	if ra := receive(t, a); !errors.Is(ra.err, context.Canceled) {
		t.Fatalf("a = (%v, %v); want Canceled", ra.t, ra.err)
	}
	b := acquireAsync(context.Background(), q, "b", names)
	pending(t, clk, 1) // b waits out the rest
	clk.Advance(20 * time.Second)
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d slow waits reported, want 2 (a cancelled, b granted): %+v", len(got), got)
	}
	for i, want := range []struct {
		key string
		d   time.Duration
		err error
	}{{"a", 10 * time.Second, context.Canceled}, {"b", 20 * time.Second, nil}} {
		e := got[i]
		if e.Lane != "provider" || e.Key != want.key || e.Duration != want.d || !errors.Is(e.Err, want.err) || (want.err == nil) != (e.Err == nil) || !e.Cooldown {
			t.Errorf("wait %d: %+v; want lane provider, key %s, %v, err %v, Cooldown", i, e, want.key, want.d, want.err)
		}
	}
	assertNothingHeld(t, q)
}

// TestCooldownNilContextPanics: a nil context is a programming error, as
// for every call of the package that takes one; Cooldown returned nil for
// it, and a fleet lane's pause would have used it.
func TestCooldownNilContextPanics(t *testing.T) {
	q, _ := coolQueue(t)
	defer func() {
		if r := recover(); r != "lanequeue: nil Context" {
			t.Fatalf("recovered %v; want the nil Context panic", r)
		}
	}()
	//lint:ignore SA1012 a nil context is the point of the test
	_ = q.Cooldown(nil, "provider", time.Second)
	t.Fatal("Cooldown(nil, ...) returned")
}

// TestCooldownWaitEndedByCloseNotReported: a call waiting out a cooldown
// that the queue's Close sends away is no lane's refusal (Event: a closed
// queue's refusal is not reported), so OnReject does not get it; the
// first version of the cooldown's report gave it to OnReject (a review
// found it).
func TestCooldownWaitEndedByCloseNotReported(t *testing.T) {
	q, clk := coolQueue(t)
	var mu sync.Mutex
	var got []lanequeue.Event[string]
	record := func(e lanequeue.Event[string]) {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}
	q.SetHooks(lanequeue.Hooks[string]{OnReject: record, OnSlowWait: record})
	must(t, q.Cooldown(context.Background(), "provider", 30*time.Second))
	a := acquireAsync(context.Background(), q, "a", []string{"session", "provider"})
	pending(t, clk, 1) // a waits out the pause
	q.Close()
	if ra := receive(t, a); !errors.Is(ra.err, semaphore.ErrClosed) {
		t.Fatalf("a = (%v, %v); want ErrClosed", ra.t, ra.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("hooks got %+v; want nothing for a wait that Close ended", got)
	}
}

// TestCooldownInStats: a lane's Stats say how long its pause has left,
// how many callers wait it out now, and how many calls it refused for a
// deadline that came first (at once, or while waiting). Before, a pause
// showed in no figure: an exporter's dashboard showed no waiter and no
// refusal during a provider's 429 storm (a new user's trial found it).
func TestCooldownInStats(t *testing.T) {
	q, clk := coolQueue(t)
	provider := func() lanequeue.LaneStats {
		t.Helper()
		for _, st := range q.Stats() {
			if st.Name == "provider" {
				return st
			}
		}
		t.Fatal("no provider lane in Stats")
		return lanequeue.LaneStats{}
	}
	if st := provider(); st.CooldownLeft != 0 || st.CooldownWaiters != 0 || st.CooldownRefused != 0 {
		t.Fatalf("before any pause: %+v", st)
	}
	must(t, q.Cooldown(context.Background(), "provider", time.Minute))
	names := []string{"session", "provider"}
	// Refused at once: its deadline (a system time, the fake clock starts
	// at the system's) comes before the pause ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := acquireAll(q, ctx, "r", names); err == nil {
		t.Fatal("a call whose deadline comes first was granted")
	}
	a := acquireAsync(context.Background(), q, "a", names)
	pending(t, clk, 1) // a waits out the pause
	clk.Advance(20 * time.Second)
	st := provider()
	if st.CooldownLeft != 40*time.Second || st.CooldownWaiters != 1 || st.CooldownRefused != 1 {
		t.Fatalf("during the pause: Cooldown %v, CooldownWaiters %d, CooldownRefused %d; want 40s, 1, 1", st.CooldownLeft, st.CooldownWaiters, st.CooldownRefused)
	}
	clk.Advance(40 * time.Second)
	ra := receive(t, a)
	must(t, ra.err)
	ra.t.Release()
	if st := provider(); st.CooldownLeft != 0 || st.CooldownWaiters != 0 || st.CooldownRefused != 1 {
		t.Fatalf("after the pause: Cooldown %v, CooldownWaiters %d, CooldownRefused %d; want 0, 0, 1", st.CooldownLeft, st.CooldownWaiters, st.CooldownRefused)
	}
	assertNothingHeld(t, q)
}
