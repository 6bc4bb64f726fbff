package lanequeue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// splitTenant is a tenant function as a program may write it for keys
// "thread/tenant": it panics on a key without a "/".
func splitTenant(k string) string { return strings.SplitN(k, "/", 2)[1] }

// A tenant function that panics must leave the call holding nothing: it
// ran after the keyed lane was taken, whose permit was never given back,
// so Holders listed the call as waiting and Drain never ended.
func TestTenantPanicGivesPermitsBack(t *testing.T) {
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "global", 1, splitTenant))
	t.Cleanup(q.Close)
	lanes := []string{"session", "global"}
	a, err := acquireAll(q, context.Background(), "t1/a", lanes)
	must(t, err)
	// The global lane is full: "odd" has to wait, and its tenant is asked.
	if v := panics(func() { acquireAll(q, context.Background(), "odd", lanes) }); v == nil {
		t.Fatal("AcquireAll of key \"odd\" returned; want the tenant function's panic to go on")
	}
	a.Release()
	assertNothingHeld(t, q)
	drainsWithin(t, q)
}

// The same through a place: its Wait holds the keyed lane's permit from
// its turn when the tenant function panics.
func TestTenantPanicInPlaceWaitGivesPermitsBack(t *testing.T) {
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "global", 1, splitTenant))
	t.Cleanup(q.Close)
	set, err := q.Lanes("session", "global")
	must(t, err)
	a, err := q.AcquireAll(context.Background(), "t1/a", set)
	must(t, err)
	pl, err := q.Join("odd", set)
	must(t, err)
	if v := panics(func() { pl.Wait(context.Background()) }); v == nil {
		t.Fatal("Wait of key \"odd\" returned; want the tenant function's panic to go on")
	}
	a.Release()
	assertNothingHeld(t, q)
	drainsWithin(t, q)
}

// A semaphore.WithFairShare weight function that panics goes the same
// way, on a fair lane and on a global lane built with the option.
func TestFairShareWeightPanicGivesPermitsBack(t *testing.T) {
	weight := semaphore.WithFairShare(func(g string) int {
		if g != "t1" {
			panic("no weight for tenant " + g)
		}
		return 1
	})
	for _, c := range []struct {
		name string
		add  func(q *lanequeue.Queue[string]) error
	}{
		{"AddFairLane", func(q *lanequeue.Queue[string]) error { return addFair(q, "global", 1, splitTenant, weight) }},
		{"AddGlobalLane", func(q *lanequeue.Queue[string]) error { return addGlobal(q, "global", 1, weight) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := lanequeue.New[string]()
			must(t, addKeyed(q, "session"))
			must(t, c.add(q))
			t.Cleanup(q.Close)
			lanes := []string{"session", "global"}
			a, err := acquireAll(q, context.Background(), "t1/a", lanes)
			must(t, err)
			if v := panics(func() { acquireAll(q, context.Background(), "t2/b", lanes, semaphore.Group("t2")) }); v == nil {
				t.Fatal("AcquireAll returned; want the weight function's panic to go on")
			}
			a.Release()
			assertNothingHeld(t, q)
			drainsWithin(t, q)
		})
	}
}

// panicLane is a lane of another package whose Acquire and TryAcquire
// panic: code the queue calls while it holds the lanes before it.
type panicLane struct{ kind lanequeue.Kind }

func (l panicLane) Kind() lanequeue.Kind { return l.kind }
func (l panicLane) MaxWeight() int64     { return 1 }
func (l panicLane) Acquire(context.Context, string, int64) (semaphore.Permit, error) {
	panic("lane Acquire")
}
func (l panicLane) TryAcquire(string, int64) (semaphore.Permit, bool) { panic("lane TryAcquire") }
func (l panicLane) Stats() lanequeue.LaneStats                        { return lanequeue.LaneStats{Kind: l.kind} }
func (l panicLane) Close()                                            {}

// A lane of another package that panics leaves the call holding nothing,
// in AcquireAll and TryAcquireAll alike, and a rate lane of the call gets
// its token back: the panic left the lanes before it held and the call
// counted in for Drain.
func TestForeignLanePanicGivesPermitsBack(t *testing.T) {
	for _, kind := range []lanequeue.Kind{lanequeue.Global, lanequeue.Rate} {
		for _, try := range []bool{false, true} {
			name := kind.String() + "/AcquireAll"
			if try {
				name = kind.String() + "/TryAcquireAll"
			}
			t.Run(name, func(t *testing.T) {
				q := testQueue(t, 2) // its rate lane has 1 token, never refilled
				must(t, q.Add("other", panicLane{kind: kind}))
				lanes := []string{"session", "global", "rate", "other"}
				want := "lane Acquire"
				call := func() { acquireAll(q, context.Background(), "a", lanes) }
				if try {
					want = "lane TryAcquire"
					call = func() { tryAcquireAll(q, "a", lanes) }
				}
				if v := panics(call); v != want {
					t.Fatalf("panicked with %v; want the lane's %q to go on", v, want)
				}
				assertNothingHeld(t, q)
				if tk, ok := tryAcquireAll(q, "a", []string{"rate"}); !ok {
					t.Error("the rate lane's token was not given back")
				} else {
					tk.Release()
				}
				drainsWithin(t, q)
			})
		}
	}
}

// A place's Wait through a lane that panics: the same, with the keyed
// permit of the place's turn given back.
func TestForeignLanePanicInPlaceWaitGivesPermitsBack(t *testing.T) {
	q := testQueue(t, 2)
	must(t, q.Add("other", panicLane{kind: lanequeue.Global}))
	set, err := q.Lanes("session", "global", "other")
	must(t, err)
	pl, err := q.Join("a", set)
	must(t, err)
	if v := panics(func() { pl.Wait(context.Background()) }); v != "lane Acquire" {
		t.Fatalf("Wait panicked with %v; want the lane's to go on", v)
	}
	assertNothingHeld(t, q)
	drainsWithin(t, q)
}
