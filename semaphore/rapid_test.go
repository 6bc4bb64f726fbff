package semaphore_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
)

// TestSemaphoreMatchesModel checks random sequences of operations against
// the sequential model (see modelcheck.Semaphore, which FuzzSemaphore runs
// too), in each run under one of the orders of service (FIFO,
// WithPriorities, WithFairShare): the same grants, to the same waiters,
// in the model's order, the same failures, and the same Stats after
// every step. A failure prints the
// steps and the seed; -rapid.seed replays it, and -rapid.checks=1000
// -rapid.steps=100 searches longer.
func TestSemaphoreMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.Semaphore)
}
