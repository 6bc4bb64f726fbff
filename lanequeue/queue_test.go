package lanequeue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBadInputFailsAtOnce checks that input AcquireAll can judge in
// advance fails with the documented error at once, takes nothing, and does
// not wait, although the global lane is full (a valid call would block).
func TestBadInputFailsAtOnce(t *testing.T) {
	q := testQueue(t, 2)
	full, err := acquireAll(q, context.Background(), "holder", []string{"global"}, semaphore.Weight(2))
	must(t, err)
	for _, c := range []struct {
		name  string
		lanes []string
		opts  []semaphore.AcquireOption
		want  error
	}{
		{"unknown lane", []string{"session", "global", "nope"}, nil, semaphore.ErrInvalidConfig},
		{"nil list", nil, nil, semaphore.ErrInvalidConfig},
		{"empty list", []string{}, nil, semaphore.ErrInvalidConfig},
		{"lane named twice", []string{"global", "session", "global"}, nil, semaphore.ErrInvalidConfig},
		{"weight above capacity", []string{"session", "global"}, []semaphore.AcquireOption{semaphore.Weight(3)}, semaphore.ErrTooHeavy},
		{"weight above per-key capacity", []string{"session"}, []semaphore.AcquireOption{semaphore.Weight(2)}, semaphore.ErrTooHeavy},
		{"weight above burst", []string{"rate"}, []semaphore.AcquireOption{semaphore.Weight(2)}, semaphore.ErrTooHeavy},
		{"lane weight above capacity", []string{"session", "global"}, []semaphore.AcquireOption{lanequeue.LaneWeight("global", 3)}, semaphore.ErrTooHeavy},
		{"zero weight", []string{"session", "global"}, []semaphore.AcquireOption{semaphore.Weight(0)}, semaphore.ErrInvalidWeight},
		{"weight for a lane not named", []string{"session"}, []semaphore.AcquireOption{lanequeue.LaneWeight("global", 1)}, semaphore.ErrInvalidConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := receive(t, acquireAsync(context.Background(), q, "k", c.lanes, c.opts...))
			if !errors.Is(r.err, c.want) || r.t != nil {
				t.Fatalf("AcquireAll = %v, %v; want %v", r.t, r.err, c.want)
			}
			if err := check(q, c.lanes, c.opts...); !errors.Is(err, c.want) {
				t.Fatalf("Check = %v; want %v", err, c.want)
			}
			if _, ok := tryAcquireAll(q, "k", c.lanes, c.opts...); ok {
				t.Fatal("TryAcquireAll succeeded")
			}
			if st := laneStats(t, q, "session"); st.Held != 0 || st.Waiters != 0 {
				t.Fatalf("session lane %+v; want nothing held or waiting", st)
			}
			if st := laneStats(t, q, "global"); st.Held != 2 || st.Waiters != 0 {
				t.Fatalf("global lane %+v; want only the holder's 2", st)
			}
		})
	}
	full.Release()
	t.Run("closed queue", func(t *testing.T) {
		q.Close()
		r := receive(t, acquireAsync(context.Background(), q, "k", []string{"session", "global"}))
		if !errors.Is(r.err, semaphore.ErrClosed) {
			t.Fatalf("AcquireAll on a closed queue = %v; want ErrClosed", r.err)
		}
		if _, ok := tryAcquireAll(q, "k", []string{"session"}); ok {
			t.Fatal("TryAcquireAll succeeded on a closed queue")
		}
		if err := addGlobal(q, "late", 1); !errors.Is(err, semaphore.ErrClosed) {
			t.Fatalf("AddGlobalLane on a closed queue = %v; want ErrClosed", err)
		}
		assertNothingHeld(t, q)
	})
}

// TestAcquireWithDoneContextFailsFast: a context that has already ended
// fails with its error even though every lane has room.
func TestAcquireWithDoneContextFailsFast(t *testing.T) {
	q := testQueue(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := acquireAll(q, ctx, "k", []string{"session", "global", "rate"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireAll = %v; want context.Canceled", err)
	}
	assertNothingHeld(t, q)
	if _, ok := tryAcquireAll(q, "k", []string{"rate"}); !ok {
		t.Fatal("rate token spent by a call with a done context")
	}
}

// TestCloseWakesWaiters: Close wakes a caller waiting part-way through
// with ErrClosed; it gives back what it took; tickets out stay valid.
func TestCloseWakesWaiters(t *testing.T) {
	q := testQueue(t, 1)
	holder, err := acquireAll(q, context.Background(), "a", []string{"global"})
	must(t, err)
	ch := acquireAsync(context.Background(), q, "b", []string{"session", "global"})
	waitFor(t, "caller to wait on the global lane", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	q.Close()
	if r := receive(t, ch); !errors.Is(r.err, semaphore.ErrClosed) {
		t.Fatalf("waiting AcquireAll after Close = %v; want ErrClosed", r.err)
	}
	if st := laneStats(t, q, "session"); st.Held != 0 {
		t.Fatalf("session lane holds %d after the woken caller returned", st.Held)
	}
	if !holder.Release() {
		t.Fatal("Release of a ticket out at Close returned false")
	}
	assertNothingHeld(t, q)
}

// TestAddLaneErrors: empty and duplicate names, bad capacities.
func TestAddLaneErrors(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addGlobal(q, "global", 2))
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"empty AddGlobalLane", addGlobal(q, "", 1), semaphore.ErrInvalidConfig},
		{"empty AddKeyedLane", addKeyed(q, ""), semaphore.ErrInvalidConfig},
		{"empty AddRateLane", addRate(q, "", 1, 1), semaphore.ErrInvalidConfig},
		{"empty Add", q.Add("", lanequeue.NewGlobalLane[string](semaphore.New(1))), semaphore.ErrInvalidConfig},
		{"duplicate AddGlobalLane", addGlobal(q, "global", 1), semaphore.ErrInvalidConfig},
		{"duplicate AddKeyedLane", addKeyed(q, "global"), semaphore.ErrInvalidConfig},
		{"duplicate AddRateLane", addRate(q, "global", 1, 1), semaphore.ErrInvalidConfig},
		{"duplicate Add", q.Add("global", lanequeue.NewKeyedLane(keyedsem.New[string]())), semaphore.ErrInvalidConfig},
		{"zero capacity", addGlobal(q, "zero", 0), semaphore.ErrInvalidConfig},
		{"zero burst", addRate(q, "zero", 1, 0), semaphore.ErrInvalidConfig},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, c.err, c.want)
		}
	}
	if names := lanequeue.Names(q); !slices.Equal(names, []string{"global"}) {
		t.Fatalf("Names() = %v after failed adds; want [global]", names)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Add of a nil lane did not panic")
			}
		}()
		_ = q.Add("nil", nil)
	}()
}

// TestDefaultQueue: Default has a keyed "session" lane (serial per key) and
// a global "global" lane of DefaultGlobalCapacity.
func TestDefaultQueue(t *testing.T) {
	q := lanequeue.Default[string](16)
	defer q.Close()
	st := q.Stats()
	if len(st) != 2 || st[0].Name != "session" || st[0].Kind != lanequeue.Keyed || st[0].Capacity != 1 ||
		st[1].Name != "global" || st[1].Kind != lanequeue.Global || st[1].Capacity != 16 {
		t.Fatalf("Default().Stats() = %+v", st)
	}
}

// Regression (review): one budget registered under two names made a call
// naming both wait for itself forever. Add refuses it, for the queue's own
// wrappers (two wrappers of one semaphore) and for any comparable lane.
func TestOneBudgetUnderTwoNamesIsRefused(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(1)
	must(t, q.Add("a", lanequeue.NewGlobalLane[string](sem)))
	if err := q.Add("b", lanequeue.NewGlobalLane[string](sem)); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("second wrapper of one semaphore: %v, want ErrDuplicateLane", err)
	}
	ks := keyedsem.New[string]()
	must(t, q.Add("s1", lanequeue.NewKeyedLane(ks)))
	if err := q.Add("s2", lanequeue.NewKeyedLane(ks)); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("second wrapper of one keyed semaphore: %v, want ErrDuplicateLane", err)
	}
	l, ok := lanequeue.LaneOf(q, "a")
	if !ok {
		t.Fatal("lane a not found")
	}
	if err := q.Add("c", l); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("the same lane under a second name: %v, want ErrDuplicateLane", err)
	}
	if _, err := acquireAll(q, context.Background(), "k", []string{"a", "b"}); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("AcquireAll naming the refused lane: %v, want ErrUnknownLane", err)
	}
}

// TestCheckLooksInAcquireAllsOrder: while the queue drains and a lane of
// the set cools down, Check says ErrDraining, as AcquireAll does (it
// looked at the cooldown first: a new user's trial); with only the
// cooldown, its LaneError says when the lane reopens.
func TestCheckLooksInAcquireAllsOrder(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "global", 1))
	set, err := q.Lanes("session", "global")
	must(t, err)
	must(t, q.Cooldown(context.Background(), "global", time.Hour))
	var le *lanequeue.LaneError
	if err := q.Check(set); !errors.As(err, &le) || le.Lane != "global" || le.RetryAfter <= 50*time.Minute {
		t.Fatalf("Check of a cooling lane = %v; want its LaneError, RetryAfter about an hour", err)
	}
	session, err := q.Lanes("session")
	must(t, err)
	held, ok := q.TryAcquireAll("x", session) // keeps the drain from finishing
	if !ok {
		t.Fatal("the session lane refused a free key")
	}
	defer held.Release()
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_ = q.Drain(dctx) // times out with held out: the queue stays draining
	dcancel()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline) // else a cooling lane would hold it an hour
	defer cancel()
	_, acqErr := q.AcquireAll(ctx, "k", set)
	if !errors.Is(acqErr, lanequeue.ErrDraining) {
		t.Fatalf("AcquireAll while draining = %v; want ErrDraining", acqErr)
	}
	if err := q.Check(set); !errors.Is(err, lanequeue.ErrDraining) {
		t.Errorf("Check while draining and cooling = %v; want ErrDraining, as AcquireAll", err)
	}
}
