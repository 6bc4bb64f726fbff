// Package scenario builds the queue that the exporters' tests read: lanes of
// every kind in a known state, so that each exporter's output can be checked
// figure by figure against the same hand-counted values.
package scenario

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Queue returns a queue with a keyed lane "session" (one at a time per key,
// idle keys kept an hour), a global lane "global" of capacity 3 and a rate
// lane "rate" of burst 5 refilled one an hour, taken as follows before it
// returns:
//
//   - key "b": a ticket of session+global, released (and released again:
//     a ticket's second Release frees nothing and is counted by no lane);
//   - key "d": a ticket held while a second caller of "d" waits on session,
//     then released, so that the second is granted after waiting, and
//     releases in turn;
//   - key "a": a ticket held until stop; a second caller of "a" waits on
//     session and is cancelled; a third waits on session until stop;
//   - key "z": the rate lane once.
//
// So session has 4 acquired (b, d, d's second, a), 3 released, 1 waited,
// 1 cancelled, 1 in use, 1 waiter and 3 keys (a, b, d); global 4 acquired,
// 3 released, 1 in use; rate 1 acquired and 1 used (the exporters module's own tests
// check these figures on Stats itself). stop ends the waiter, releases "a" and
// closes the queue; call it before the test ends.
func Queue(t testing.TB) (q *lanequeue.Queue[string], stop func()) {
	t.Helper()
	q = lanequeue.New[string]()
	must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(3))))
	must(t, q.Add("rate", lanequeue.NewRateLane[string](rate.NewLimiter(rate.Every(time.Hour), 5))))
	chat, err := q.Lanes("session", "global")
	must(t, err)
	rated, err := q.Lanes("rate")
	must(t, err)
	ctx := context.Background()
	session := func() lanequeue.LaneStats { return Lane(q, "session") }

	tb, err := q.AcquireAll(ctx, "b", chat)
	must(t, err)
	tb.Release()
	tb.Release()

	td, err := q.AcquireAll(ctx, "d", chat)
	must(t, err)
	second := testkit.Go(func() error {
		t2, err := q.AcquireAll(ctx, "d", chat)
		if err == nil {
			t2.Release()
		}
		return err
	})
	testkit.Eventually(t, "the second caller of d to wait on session", func() bool { return session().Waiters == 1 })
	td.Release()
	must(t, testkit.Recv(t, second, "the second caller of d"))

	ta, err := q.AcquireAll(ctx, "a", chat)
	must(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancelled := testkit.Go(func() error { _, err := q.AcquireAll(cctx, "a", chat); return err })
	testkit.Eventually(t, "the second caller of a to wait on session", func() bool { return session().Waiters == 1 })
	cancel()
	if err := testkit.Recv(t, cancelled, "the cancelled caller of a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v; want context.Canceled", err)
	}
	wctx, stopWaiting := context.WithCancel(ctx)
	waiting := testkit.Go(func() error { _, err := q.AcquireAll(wctx, "a", chat); return err })
	testkit.Eventually(t, "the third caller of a to wait on session", func() bool { return session().Waiters == 1 })

	_, err = q.AcquireAll(ctx, "z", rated)
	must(t, err)

	return q, func() {
		stopWaiting()
		if err := testkit.Recv(t, waiting, "the waiting caller of a"); !errors.Is(err, context.Canceled) {
			t.Errorf("waiting caller: %v; want context.Canceled", err)
		}
		ta.Release()
		q.Close()
	}
}

// Semaphore returns a semaphore of capacity 4 with 3 permits held (stop
// releases them), one permit acquired and released twice, and one call
// refused as too heavy: 2 acquired, 1 released, 1 double release,
// 1 rejected.
func Semaphore(t testing.TB) (s *semaphore.Weighted, stop func()) {
	t.Helper()
	s = semaphore.New(4)
	ctx := context.Background()
	p, err := s.Acquire(ctx, 3)
	must(t, err)
	one, err := s.Acquire(ctx, 1)
	must(t, err)
	one.Release()
	one.Release()
	if _, err := s.Acquire(ctx, 5); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("weight 5 of 4: %v; want ErrTooHeavy", err)
	}
	return s, func() { p.Release() }
}

// Keyed returns a keyed semaphore of per-key capacity 2 with key 7 held
// by one permit (stop releases it) and key 8 acquired and released: 2
// acquired, 1 released, 1 in use, 2 keys.
func Keyed(t testing.TB) (k *keyedsem.Keyed[int], stop func()) {
	t.Helper()
	k = keyedsem.New[int](keyedsem.WithPerKeyCapacity(2))
	ctx := context.Background()
	p, err := k.Acquire(ctx, 7)
	must(t, err)
	q, err := k.Acquire(ctx, 8)
	must(t, err)
	q.Release()
	return k, func() { p.Release(); k.Close() }
}

// Reordered returns a keyed semaphore of numbered messages (per-key
// capacity 1, keyedsem.WithSequenceOrder and WithReorderHold(time.Second)
// on a fake clock) in which message 1 of key "t" went and was released,
// then message 3 was held for 2, which never came, and went when its hold
// ran out (the fake clock moved by the hold), and was released: 2 acquired,
// 2 released, HoldsRunOut 1. stop closes it.
func Reordered(t testing.TB) (k *keyedsem.Keyed[string], stop func()) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	k = keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Second), keyedsem.WithClock(clk))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := k.Acquire(ctx, "t", semaphore.Sequence(1))
	must(t, err)
	p.Release()
	third := testkit.Go(func() error {
		p, err := k.Acquire(ctx, "t", semaphore.Sequence(3))
		if err == nil {
			p.Release()
		}
		return err
	})
	testkit.Eventually(t, "message 3 to wait for 2 with its hold armed", func() bool {
		return k.Stats().Waiters == 1 && clk.Pending() == 1
	})
	clk.Advance(time.Second)
	must(t, testkit.Recv(t, third, "message 3, once its hold ran out"))
	if n := k.Stats().HoldsRunOut; n != 1 {
		t.Fatalf("HoldsRunOut %d; want 1", n)
	}
	return k, k.Close
}

// Timed returns a queue with one global lane "api" of capacity 2 that
// records its wait and hold times (semaphore.WithHistograms) on a fake
// clock, so that every duration is exact:
//
//   - a ticket of weight 1 granted at once (a wait of 0) and released 3ms
//     later (a hold of 3ms, in the bucket (2ms, 5ms]);
//   - a ticket of weight 2 granted at once and released 20ms later (a hold
//     of 20ms, in (10ms, 20ms]), while a caller of weight 1 waited for it;
//     that caller is granted then (a wait of 20ms) and holds until stop.
//
// So WaitTime: 3 observations, two of 0 and one of 20ms (sum 20ms);
// HoldTime: 2, 3ms and 20ms (sum 23ms).
func Timed(t testing.TB) (q *lanequeue.Queue[string], stop func()) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	q = lanequeue.New[string]()
	must(t, q.Add("api", lanequeue.NewGlobalLane[string](semaphore.New(2, semaphore.WithHistograms(), semaphore.WithClock(clk)))))
	api, err := q.Lanes("api")
	must(t, err)
	ctx := context.Background()
	t1, err := q.AcquireAll(ctx, "x", api)
	must(t, err)
	clk.Advance(3 * time.Millisecond)
	t1.Release()
	t2, err := q.AcquireAll(ctx, "x", api, semaphore.Weight(2))
	must(t, err)
	waiter := testkit.Go(func() *lanequeue.Ticket[string] {
		t3, err := q.AcquireAll(ctx, "y", api)
		if err != nil {
			t.Error(err)
		}
		return t3
	})
	testkit.Eventually(t, "the caller of weight 1 to wait", func() bool { return Lane(q, "api").Waiters == 1 })
	clk.Advance(20 * time.Millisecond)
	t2.Release()
	t3 := testkit.Recv(t, waiter, "the waiting caller's grant")
	return q, func() {
		t3.Release()
		q.Close()
	}
}

// Lane returns the snapshot of q's lane name (the zero LaneStats if none).
func Lane(q *lanequeue.Queue[string], name string) lanequeue.LaneStats {
	for _, st := range q.Stats() {
		if st.Name == name {
			return st
		}
	}
	return lanequeue.LaneStats{}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Epoch is the time on the controllers' clock when Controllers made them.
var Epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// Controllers returns three adaptive controllers on a fake clock that
// starts at Epoch, each over a semaphore of its own, moved by hand-made
// round trips before it returns:
//
//   - "model": AIMD, floor 2, ceiling 20, from 10. A round trip of 10
//     successes held 1 s each over 1 s (fully used) grows it to 11 (at
//     Epoch+1s); the first of 11 overloads cuts it to 9 at once (11*0.9 =
//     9.9, at Epoch+2s) and ends the round trip, the other 10, of work
//     admitted before the cut, are not counted. Increases 1, overload
//     decreases 1, last reason overload, 2 round trips, 11 outcomes of
//     which 1 overload.
//   - "slow": Vegas (0.1, 0.25), floor 1, ceiling 16, from 8. A round trip
//     of 8 successes of 1 s (the baseline; nothing queued) grows it to 9
//     at Epoch+1s; one of 9 successes of 2 s (half of it queued) cuts it by
//     a quarter of the limit, to 6 (6.75) at Epoch+3s. Increases 1, latency
//     decreases 1, last reason latency, 2 round trips, 17 outcomes, no
//     overload.
//   - "idle": AIMD, floor 1, ceiling 4, from 4: no report, never moved.
func Controllers(t testing.TB) map[string]*adaptive.Controller {
	t.Helper()
	clk := clock.NewFake(Epoch)
	mk := func(capacity, floor, ceiling int64, opts ...adaptive.Option) *adaptive.Controller {
		c, err := adaptive.New(semaphore.New(capacity), floor, ceiling, append(opts, adaptive.WithClock(clk))...)
		must(t, err)
		return c
	}
	model := mk(10, 2, 20)
	slow := mk(8, 1, 16, adaptive.WithVegas(0.1, 0.25))
	idle := mk(4, 1, 4)
	round := func(c *adaptive.Controller, n int64, o adaptive.Outcome, rtt time.Duration) {
		for range n {
			c.Report(o, rtt)
		}
	}
	clk.Advance(time.Second)
	round(model, 10, adaptive.Success, time.Second)
	round(slow, 8, adaptive.Success, time.Second)
	clk.Advance(time.Second)
	round(model, 11, adaptive.Overload, time.Millisecond)
	clk.Advance(time.Second)
	round(slow, 9, adaptive.Success, 2*time.Second)
	return map[string]*adaptive.Controller{"model": model, "slow": slow, "idle": idle}
}

// Paused returns a queue with a global lane "model" of capacity 4, paused
// for a minute (Queue.Cooldown) on a fake clock that does not move, and one
// call refused for a deadline (a second) before the pause ends: the lane's
// cooldown figures are 60 s left, 0 waiters, 1 refused. The queue closes
// when the test ends.
func Paused(t testing.TB) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(4))))
	q.SetClock(clock.NewFake(time.Now())) // system time: contexts' deadlines compare with it
	must(t, q.Cooldown(context.Background(), "model", time.Minute))
	set, err := q.Lanes("model")
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := q.AcquireAll(ctx, "k", set); err == nil {
		t.Fatal("scenario: a call whose deadline comes before the pause ends was granted")
	}
	return q
}
