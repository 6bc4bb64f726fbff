package lanequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
)

// fairQueue is a queue with a session lane and a fair lane "fair" of 2.
func fairQueue(t *testing.T) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, q.AddKeyedLane("session"))
	must(t, q.AddFairLane("fair", 2, nil))
	t.Cleanup(q.Close)
	return q
}

// Check tells of a fair lane closed through its semaphore what AcquireAll
// fails with, as it does for the other global lanes: it returned nil.
func TestCheckOfAFairLaneClosedOnItsOwn(t *testing.T) {
	q := fairQueue(t)
	set, err := q.Lanes("session", "fair")
	must(t, err)
	s, err := q.GlobalSemaphore("fair")
	must(t, err)
	s.Close()
	_, acqErr := q.AcquireAll(context.Background(), "a", set)
	if !errors.Is(acqErr, lanequeue.ErrClosed) {
		t.Fatalf("AcquireAll on a closed fair lane = %v; want ErrClosed", acqErr)
	}
	err = q.Check(set)
	var le *lanequeue.LaneError
	if !errors.Is(err, lanequeue.ErrClosed) || !errors.As(err, &le) || le.Lane != "fair" {
		t.Fatalf("Check on a closed fair lane = %v; want ErrClosed naming lane \"fair\", as AcquireAll's %v", err, acqErr)
	}
}

// Drain waits for the permits taken straight from a fair lane's semaphore,
// as for a global lane's: the queue built both, and it returned nil at
// once, closing the queue, with such a permit out.
func TestDrainWaitsForPermitsTakenFromAFairLaneDirectly(t *testing.T) {
	q := fairQueue(t)
	s, err := q.GlobalSemaphore("fair")
	must(t, err)
	p, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire on the fair lane's semaphore failed")
	}
	if err := q.Drain(cancelled()); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `lane "fair" still holds`) {
		t.Fatalf("Drain while a direct permit is out = %v; want context.Canceled, naming lane fair", err)
	}
	drained := testkit.Go(func() error { return q.Drain(context.Background()) })
	p.Release()
	if err := testkit.Recv(t, drained, "Drain after the direct permit's release"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
}
