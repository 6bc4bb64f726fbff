package lanequeue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// fairQueue is a queue with a session lane and a fair lane "fair" of 2.
func fairQueue(t *testing.T) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "fair", 2, nil))
	t.Cleanup(q.Close)
	return q
}

// Check tells of a fair lane closed through its semaphore what AcquireAll
// fails with, as it does for the other global lanes: it returned nil.
func TestCheckOfAFairLaneClosedOnItsOwn(t *testing.T) {
	q := fairQueue(t)
	set, err := q.Lanes("session", "fair")
	must(t, err)
	s, err := lanequeue.GlobalSemaphore(q, "fair")
	must(t, err)
	s.Close()
	_, acqErr := q.AcquireAll(context.Background(), "a", set)
	if !errors.Is(acqErr, semaphore.ErrClosed) {
		t.Fatalf("AcquireAll on a closed fair lane = %v; want ErrClosed", acqErr)
	}
	err = q.Check(set)
	var le *lanequeue.LaneError
	if !errors.Is(err, semaphore.ErrClosed) || !errors.As(err, &le) || le.Lane != "fair" {
		t.Fatalf("Check on a closed fair lane = %v; want ErrClosed naming lane \"fair\", as AcquireAll's %v", err, acqErr)
	}
}
