package semaphore_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
)

// TestPrioritySemaphoreMatchesModel is TestSemaphoreMatchesModel with
// WithPriorities in every case (the shared driver has it in a third of
// them, and FuzzSemaphore too): the grants go to the waiters of the
// highest effective priority, priority plus steps waited on the fake
// clock, FIFO among equals, as the model's Priorities order says; a head that does not
// fit is not overtaken; refused Turns take nothing; and after every step
// Available + Held == Capacity, Stats equal the model's, and every waiter
// returns once, when and how the model says.
func TestPrioritySemaphoreMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.PrioritySemaphore)
}

// TestComposedSemaphoreMatchesModel is TestSemaphoreMatchesModel with
// WithPriorities and WithFairShare together in every case: bands with
// aging, start-time fair queuing by group within a band, as the model's
// PrioritiesFairShare order says (no waiter passed by a later one that
// does not overtake it by that rule, checked after every step), with the
// same grants, refusals, Stats and invariants as every other order.
func TestComposedSemaphoreMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.ComposedSemaphore)
}
