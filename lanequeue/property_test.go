package lanequeue_test

import (
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/lanequeue"
)

// failsafe bounds every wait of the tests for something that must happen;
// hitting it fails the test (it never makes one pass).
const failsafe = 20 * time.Second

// waitFor polls cond, yielding the processor between polls, until it holds;
// it fails the test if failsafe passes first.
func waitFor(t interface {
	Helper()
	Fatalf(string, ...any)
}, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting (failsafe %v): %s", failsafe, what)
		}
		runtime.Gosched()
	}
}

// acquireResult is what an AcquireAll run in a goroutine returned.
type acquireResult struct {
	t   *lanequeue.Ticket[string]
	err error
}

// TestQueueMatchesModel drives random mixes of lanes, keys, weights, try
// and blocking calls, cancellations, releases, bad input and Close against
// model.Queue (see modelcheck.Queue, which FuzzQueue runs too). rapid logs
// the seed of a failure so that it replays.
func TestQueueMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.Queue)
}
