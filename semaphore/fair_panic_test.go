package semaphore_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// A WithFairShare weight function that panics leaves the semaphore as it
// was: it is asked before the call locks or queues, so the call holds and
// counts nothing, and the panic goes on to its caller (package lanequeue
// then gives back the lanes the call took before). A waiter of another
// group is then served as usual.
func TestFairShareWeightPanicLeavesNothing(t *testing.T) {
	s := semaphore.New(1, semaphore.WithFairShare(func(g string) int {
		if g == "bad" {
			panic("no weight for " + g)
		}
		return 1
	}))
	held, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire on an idle semaphore failed")
	}
	before := s.Stats()
	recovered := func(f func()) (v any) {
		defer func() { v = recover() }()
		f()
		return nil
	}
	if v := recovered(func() { s.Acquire(context.Background(), 1, semaphore.Group("bad")) }); v != "no weight for bad" {
		t.Fatalf("AcquireTurn panicked with %v; want the weight function's panic", v)
	}
	if v := recovered(func() { s.Join(1, semaphore.Group("bad")) }); v != "no weight for bad" {
		t.Fatalf("JoinTurn panicked with %v; want the weight function's panic", v)
	}
	if after := s.Stats(); after.Held != before.Held || after.Waiters != before.Waiters || after.Counters != before.Counters {
		t.Fatalf("after the panics: %+v; want as before: %+v", after, before)
	}
	got := testkit.Go(func() error {
		p, err := s.Acquire(context.Background(), 1, semaphore.Group("good"))
		if err == nil {
			p.Release()
		}
		return err
	})
	testkit.Eventually(t, "the good waiter in line", func() bool { return s.Stats().Waiters == 1 })
	held.Release()
	if err := testkit.Recv(t, got, "AcquireTurn of the good group"); err != nil {
		t.Fatalf("AcquireTurn of the good group = %v", err)
	}
}
