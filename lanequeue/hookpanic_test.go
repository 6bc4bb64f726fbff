package lanequeue_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
)

// panics runs f and returns what it panicked with (nil if it returned).
func panics(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// drainsWithin checks that Drain returns nil within the testkit deadline:
// nothing is left that it waits for.
func drainsWithin(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a Drain still waiting at the deadline returns
	if err := testkit.Recv(t, testkit.Go(func() error { return q.Drain(ctx) }), "Drain"); err != nil {
		t.Errorf("Drain: %v", err)
	}
}

// An OnLongHold hook that panics in Release must not keep the ticket's
// permits, nor the call that Drain waits for: the release went on after
// the ticket's record was retired, so the permits stayed out for good and
// Drain hung.
func TestLongHoldHookPanicGivesPermitsBack(t *testing.T) {
	q := lanequeue.Default[string](2)
	t.Cleanup(q.Close)
	q.SetHooks(lanequeue.Hooks[string]{LongHold: -1, OnLongHold: func(lanequeue.Event[string]) { panic("hook") }})
	tk, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	if v := panics(func() { tk.Release() }); v != "hook" {
		t.Fatalf("Release panicked with %v; want the hook's panic to go on", v)
	}
	if tk.Release() {
		t.Error("a second Release returned true")
	}
	assertNothingHeld(t, q)
	drainsWithin(t, q)
}

// An OnSlowWait hook that panics once a lane has granted must not keep
// that grant nor the lanes taken before it: the hook ran before the
// permit was recorded and before any rollback.
func TestSlowWaitHookPanicGivesPermitsBack(t *testing.T) {
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	a, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	q.SetHooks(lanequeue.Hooks[string]{SlowWait: 0, OnSlowWait: func(lanequeue.Event[string]) { panic("hook") }})
	done := testkit.Go(func() any {
		return panics(func() { acquireAll(q, context.Background(), "b", []string{"session", "global"}) })
	})
	testkit.Eventually(t, "b waiting for global", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	a.Release()
	if v := testkit.Recv(t, done, "AcquireAll of b"); v != "hook" {
		t.Fatalf("AcquireAll panicked with %v; want the hook's panic to go on", v)
	}
	q.SetHooks(lanequeue.Hooks[string]{})
	assertNothingHeld(t, q)
	if ws := q.Waiters(); len(ws) != 0 {
		t.Errorf("Waiters() = %v after the panic; want none", ws)
	}
	drainsWithin(t, q)
}

// The same through a place: Wait holds the keyed lane's permit from its
// turn when the hook of its global wait panics.
func TestSlowWaitHookPanicInPlaceWaitGivesPermitsBack(t *testing.T) {
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	a, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	set, err := q.Lanes("session", "global")
	must(t, err)
	pl, err := q.Join("b", set)
	must(t, err)
	q.SetHooks(lanequeue.Hooks[string]{SlowWait: 0, OnSlowWait: func(lanequeue.Event[string]) { panic("hook") }})
	done := testkit.Go(func() any {
		return panics(func() { pl.Wait(context.Background()) })
	})
	testkit.Eventually(t, "b waiting for global", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	a.Release()
	if v := testkit.Recv(t, done, "Wait of b"); v != "hook" {
		t.Fatalf("Wait panicked with %v; want the hook's panic to go on", v)
	}
	q.SetHooks(lanequeue.Hooks[string]{})
	assertNothingHeld(t, q)
	drainsWithin(t, q)
}
