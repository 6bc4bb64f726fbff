package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
)

// slowWaitQueue is a queue of a session lane, a global lane of 1 and a
// rate lane whose tokens are always there, on a fake clock, with OnSlowWait
// collecting into got.
func slowWaitQueue(t *testing.T, bound time.Duration, got *events) (*lanequeue.Queue[string], *clock.Fake) {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "global", 1))
	must(t, addRate(q, "rate", rate.Inf, 1))
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	lanequeue.SetClock(q, clk)
	t.Cleanup(q.Close)
	q.SetHooks(lanequeue.Hooks[string]{SlowWait: bound, OnSlowWait: got.on("slow-wait")})
	return q, clk
}

// A lane that grants at once after the call waited for an earlier one is
// not a slow wait: the rate lane, whose tokens were there, was reported
// with the 2s the call had waited for the global lane (the wait reported
// twice), since the rate tail read the start of the global lane's wait.
func TestSlowWaitNotReportedForALaneThatGrantedAtOnceAfterAWait(t *testing.T) {
	var got events
	q, clk := slowWaitQueue(t, time.Second, &got)
	ctx := context.Background()
	a, err := acquireAll(q, ctx, "a", []string{"global"})
	must(t, err)
	t0 := clk.Now()
	b := acquireAsync(ctx, q, "b", []string{"session", "global", "rate"})
	testkit.Eventually(t, "b in the global lane's line", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	clk.Advance(2 * time.Second)
	a.Release()
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	ev := got.take()
	if len(ev) != 1 || ev[0].Lane != "global" || ev[0].Key != "b" || ev[0].Duration != 2*time.Second || !ev[0].Since.Equal(t0) {
		t.Fatalf("slow waits %+v; want only b's 2s wait for the global lane, since t0", ev)
	}
}

// With SlowWait 0 every wait is reported, and only waits: a call that
// waited for its key and then found room on the global lane reported the
// global lane too, since after a wait every later lane went the slow way.
func TestSlowWaitZeroReportsOnlyTheLanesThatWaited(t *testing.T) {
	var got events
	q, clk := slowWaitQueue(t, 0, &got)
	ctx := context.Background()
	a, err := acquireAll(q, ctx, "k", []string{"session"})
	must(t, err)
	t0 := clk.Now()
	b := acquireAsync(ctx, q, "k", []string{"session", "global", "rate"})
	testkit.Eventually(t, "b in the key's line", func() bool { return laneStats(t, q, "session").Waiters == 1 })
	clk.Advance(3 * time.Second)
	a.Release()
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	ev := got.take()
	if len(ev) != 1 || ev[0].Lane != "session" || ev[0].Key != "k" || ev[0].Duration != 3*time.Second || !ev[0].Since.Equal(t0) {
		t.Fatalf("slow waits %+v; want only the 3s wait for the session lane, since t0", ev)
	}
}

// A call that waits for two lanes has each wait timed on its own: from
// when that lane could not grant to when it did.
func TestSlowWaitTimesEachLanesOwnWait(t *testing.T) {
	var got events
	q, clk := slowWaitQueue(t, time.Second, &got)
	ctx := context.Background()
	g, err := acquireAll(q, ctx, "other", []string{"global"})
	must(t, err)
	s, err := acquireAll(q, ctx, "k", []string{"session"})
	must(t, err)
	t0 := clk.Now()
	b := acquireAsync(ctx, q, "k", []string{"session", "global", "rate"})
	testkit.Eventually(t, "b in the key's line", func() bool { return laneStats(t, q, "session").Waiters == 1 })
	clk.Advance(2 * time.Second)
	s.Release()
	testkit.Eventually(t, "b in the global lane's line", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	clk.Advance(3 * time.Second)
	g.Release()
	rb := receive(t, b)
	must(t, rb.err)
	rb.t.Release()
	ev := got.take()
	if len(ev) != 2 ||
		ev[0].Lane != "session" || ev[0].Duration != 2*time.Second || !ev[0].Since.Equal(t0) ||
		ev[1].Lane != "global" || ev[1].Duration != 3*time.Second || !ev[1].Since.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("slow waits %+v; want session 2s since t0, then global 3s since t0+2s", ev)
	}
}
