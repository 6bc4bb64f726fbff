package lanequeue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A fair lane made with priorities too (semaphore composes them now, and
// NewFairLane takes a semaphore made with both) must give the semaphore the
// call's priority: a/2 at priority 5 goes ahead of a/1 at 0, of the same
// tenant, which came a moment before it.
func TestFairLaneWithPrioritiesTakesTheCallsPriority(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "global", 1, tenantOf, semaphore.WithPriorities(time.Minute), semaphore.WithClock(clk)))
	chat := []string{"session", "global"}
	running, err := acquireAll(q, context.Background(), "a/0", chat)
	must(t, err)
	out := make(chan message, 4)
	sendAll(t, q, out, "a/1", "a/1", chat, "global", 1)
	sendAll(t, q, out, "a/2", "a/2", chat, "global", 2, semaphore.Priority(5))
	if got, want := fmt.Sprint(served(t, running, out, 2)), "[a/2 a/1]"; got != want {
		t.Fatalf("served %s; want %s (the fair lane dropped the call's priority)", got, want)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}
