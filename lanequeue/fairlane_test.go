package lanequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// fairQueue is a queue with a session lane and a fair lane "fair" of 2.
func fairQueue(t *testing.T) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "fair", 2, tenantOf))
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

// A fair lane over a semaphore made without semaphore.WithFairShare, or
// with no tenant function, would serve its line first come, first served:
// Add refuses it, naming the problem, and the lane used on its own refuses
// every call, as a lane of capacity 0 is refused.
func TestNewFairLaneRefusesWhatWouldNotBeFair(t *testing.T) {
	for _, c := range []struct {
		name string
		lane lanequeue.Lane[string]
		says string
	}{
		{"a semaphore without WithFairShare", lanequeue.NewFairLane[string](semaphore.New(2), tenantOf), "WithFairShare"},
		{"a nil tenant function", lanequeue.NewFairLane[string](semaphore.New(2, semaphore.WithFairShare(nil)), nil), "tenant"},
	} {
		q := lanequeue.New[string]()
		err := q.Add("fair", c.lane)
		if !errors.Is(err, semaphore.ErrInvalidConfig) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), `"fair"`) {
			t.Errorf("%s: Add = %v; want ErrInvalidConfig naming the lane and %s", c.name, err, c.says)
		}
		if _, err := c.lane.Acquire(context.Background(), "a/1", 1); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("%s: the lane's own Acquire = %v; want ErrInvalidConfig", c.name, err)
		}
		q.Close()
	}
}
