package lanequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// laneError returns the *LaneError in err, failing the test if there is none.
func laneError(t *testing.T, err error) *lanequeue.LaneError {
	t.Helper()
	var le *lanequeue.LaneError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) holds no *LaneError", err, err)
	}
	return le
}

// waitQueued returns once lane has n waiters.
func waitQueued(t *testing.T, q *lanequeue.Queue[string], lane string, n int) {
	t.Helper()
	testkit.Eventually(t, "the caller waits on "+lane, func() bool { return laneStats(t, q, lane).Waiters == n })
}

// TestTimeoutNamesTheBusyKeyedLane (issue 15): a caller that gives up while
// its key is busy learns that it waited on "session", for which key, while
// errors.Is still finds the context's error.
func TestTimeoutNamesTheBusyKeyedLane(t *testing.T) {
	t.Parallel()
	q := lanequeue.Default[string](4)
	t.Cleanup(q.Close)
	held, err := acquireAll(q, context.Background(), "t1", []string{"session", "global"})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := acquireAsync(ctx, q, "t1", []string{"session", "global"})
	waitQueued(t, q, "session", 1)
	cancel()
	r := receive(t, ch)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
	}
	le := laneError(t, r.err)
	if le.Lane != "session" || le.Kind != lanequeue.Keyed || le.Key != "t1" || le.RetryAfter != 0 {
		t.Fatalf("LaneError = %+v; want lane session, keyed, key t1, no retry", *le)
	}
	if got, want := r.err.Error(), `lanequeue: lane "session" busy for key "t1": context canceled`; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}
	held.Release()
	assertNothingHeld(t, q)
}

// TestTimeoutNamesTheFullGlobalLane (issue 15): a caller whose key is free
// but whose shared budget is spent learns that "global" was full; the
// deadline's error stays reachable.
func TestTimeoutNamesTheFullGlobalLane(t *testing.T) {
	t.Parallel()
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	held, err := acquireAll(q, context.Background(), "other", []string{"session", "global"})
	must(t, err)
	defer held.Release()
	// The deadline passes once the call waits on the global lane: a
	// timer's could pass before it got there, and the error would name no
	// lane (or the session lane).
	ctx := testkit.NewExpiring()
	ch := acquireAsync(ctx, q, "t1", []string{"session", "global"})
	waitQueued(t, q, "global", 1)
	ctx.Expire()
	err = receive(t, ch).err
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll = %v; want context.DeadlineExceeded", err)
	}
	le := laneError(t, err)
	if le.Lane != "global" || le.Kind != lanequeue.Global || le.Key != nil {
		t.Fatalf("LaneError = %+v; want lane global, no key", *le)
	}
	if got, want := err.Error(), `lanequeue: lane "global" full: context deadline exceeded`; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}
}

// TestLaneRefusalsAreLaneErrors: a full line, too many keys and a lane
// closed on its own name the lane and keep their sentinels.
func TestLaneRefusalsAreLaneErrors(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys(), keyedsem.WithIdleTimeout(time.Hour)))
	must(t, addGlobal(q, "global", 1, semaphore.WithMaxWaiters(1)))

	held, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	defer held.Release()
	_, err = acquireAll(q, context.Background(), "b", []string{"session"})
	if !errors.Is(err, keyedsem.ErrTooManyKeys) {
		t.Fatalf("a second key = %v; want ErrTooManyKeys", err)
	}
	if le := laneError(t, err); le.Lane != "session" || le.Key != "b" {
		t.Fatalf("LaneError = %+v; want lane session, key b", *le)
	}
	if got, want := err.Error(), `lanequeue: lane "session": keyedsem: too many keys`; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiter := acquireAsync(ctx, q, "x", []string{"global"})
	waitQueued(t, q, "global", 1)
	_, err = acquireAll(q, context.Background(), "y", []string{"global"})
	if !errors.Is(err, semaphore.ErrQueueFull) {
		t.Fatalf("a second waiter = %v; want ErrQueueFull", err)
	}
	if le := laneError(t, err); le.Lane != "global" || le.Kind != lanequeue.Global || le.Key != nil {
		t.Fatalf("LaneError = %+v; want lane global, no key", *le)
	}
	if got, want := err.Error(), `lanequeue: lane "global": lanes: wait queue full`; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}
	cancel()
	if r := receive(t, waiter); laneError(t, r.err).Lane != "global" {
		t.Fatalf("the cancelled waiter: %v", r.err)
	}
}

// TestRateLaneErrorCarriesTheNextToken (issue 15): a call whose rate
// tokens come after its deadline fails at once, naming the rate lane and
// when the tokens would be there.
func TestRateLaneErrorCarriesTheNextToken(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addRate(q, "rpm", rate.Every(10*time.Second), 1))
	rpm, err := q.Lanes("rpm")
	must(t, err)
	tk, err := q.AcquireAll(context.Background(), "a", rpm)
	must(t, err)
	tk.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	short, cancelShort := context.WithDeadline(ctx, time.Now().Add(time.Second))
	defer cancelShort()
	_, err = q.AcquireAll(short, "a", rpm)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll = %v; want context.DeadlineExceeded", err)
	}
	le := laneError(t, err)
	if le.Lane != "rpm" || le.Kind != lanequeue.Rate {
		t.Fatalf("LaneError = %+v; want lane rpm", *le)
	}
	// The token comes 10s after the first grant: a little less is left.
	if le.RetryAfter <= 5*time.Second || le.RetryAfter > 10*time.Second {
		t.Fatalf("RetryAfter = %v; want the rest of 10s", le.RetryAfter)
	}
	if got, want := err.Error(), `lanequeue: lane "rpm" out of tokens (next in `; !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, `): tokens come after the context's deadline: context deadline exceeded`) {
		t.Fatalf("Error() = %q; want %q...", got, want)
	}
}

// TestLaneErrorText pins the wording of each case.
func TestLaneErrorText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    lanequeue.LaneError
		want string
	}{
		{lanequeue.LaneError{Lane: "session", Kind: lanequeue.Keyed, Key: 42, Err: context.DeadlineExceeded},
			`lanequeue: lane "session" busy for key 42: context deadline exceeded`},
		{lanequeue.LaneError{Lane: "session", Kind: lanequeue.Keyed, Key: struct{ A, B string }{"x", "y"}, Err: context.Canceled},
			`lanequeue: lane "session" busy for key {x y}: context canceled`},
		{lanequeue.LaneError{Lane: "g", Kind: lanequeue.Global, Err: context.Canceled},
			`lanequeue: lane "g" full: context canceled`},
		{lanequeue.LaneError{Lane: "r", Kind: lanequeue.Rate, RetryAfter: 1500 * time.Millisecond, Err: context.Canceled},
			`lanequeue: lane "r" out of tokens (next in 1.5s): context canceled`},
		{lanequeue.LaneError{Lane: "g", Kind: lanequeue.Global, RetryAfter: time.Second, Err: semaphore.ErrQueueFull},
			`lanequeue: lane "g" (retry after 1s): lanes: wait queue full`},
		{lanequeue.LaneError{Lane: "g", Kind: lanequeue.Global, Err: semaphore.ErrWaitTooLong},
			`lanequeue: lane "g": lanes: waited too long`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q; want %q", got, c.want)
		}
		if !errors.Is(&c.e, c.e.Err) {
			t.Errorf("%q does not match its cause", c.want)
		}
	}
}

// TestPlaceWaitNamesTheLane: a place whose wait ends names the lane it
// waited on: here the global lane, once its key's turn had come.
func TestPlaceWaitNamesTheLane(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 1)
	set, err := q.Lanes("session", "global")
	must(t, err)
	held, err := acquireAll(q, context.Background(), "other", []string{"global"})
	must(t, err)
	pl, err := q.Join("k", set)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := testkit.Go(func() error { _, err := pl.Wait(ctx); return err })
	waitQueued(t, q, "global", 1)
	cancel()
	err = testkit.Recv(t, done, "the cancelled Wait")
	if le := laneError(t, err); le.Lane != "global" || le.Key != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v; want the global lane's LaneError, matching context.Canceled", err)
	}
	held.Release()
	assertNothingHeld(t, q)
}

// TestLaneErrorAllocations: a refusal costs the LaneError and, on a keyed
// lane, its key in an interface; nothing more.
func TestLaneErrorAllocations(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithMaxWaitersPerKey(1)))
	must(t, addGlobal(q, "global", 1, semaphore.WithMaxWaiters(1)))
	held, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	defer held.Release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w1 := acquireAsync(ctx, q, "a", []string{"session"})
	w2 := acquireAsync(ctx, q, "b", []string{"global"})
	waitQueued(t, q, "session", 1)
	waitQueued(t, q, "global", 1)
	for _, c := range []struct {
		key, lane string
		max       float64
	}{{"a", "session", 2}, {"c", "global", 1}} {
		set, err := q.Lanes(c.lane)
		must(t, err)
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := q.AcquireAll(context.Background(), c.key, set); !errors.Is(err, semaphore.ErrQueueFull) {
				t.Fatalf("AcquireAll = %v; want ErrQueueFull", err)
			}
		})
		if allocs > c.max {
			t.Errorf("a refusal on %s: %.1f allocs; want at most %.0f", c.lane, allocs, c.max)
		}
	}
	cancel()
	receive(t, w1)
	receive(t, w2)
}

// A context found ended only once every lane has granted fails the call
// with ctx.Err() itself, not a LaneError: every lane granted, none is to
// blame (the LaneError doc said every end of ctx during the call named a
// lane). The lane "across" ends the context while it grants; the blind
// lane after it grants without looking, so the end is seen at the last look.
func TestContextEndedAfterEveryGrantIsBare(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	across := &blindLane{kind: lanequeue.Keyed}
	must(t, q.Add("across", across))
	must(t, q.Add("blind", &blindLane{kind: lanequeue.Global}))
	must(t, addKeyed(q, "a-session"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	across.cancel = cancel
	tk, err := acquireAll(q, ctx, "k", []string{"across", "blind", "a-session"})
	if err != context.Canceled {
		tk.Release()
		t.Fatalf("AcquireAll = %v; want context.Canceled itself", err)
	}
	var le *lanequeue.LaneError
	if errors.As(err, &le) {
		t.Errorf("AcquireAll = %#v; want no LaneError", le)
	}
	assertNothingHeld(t, q)
}
