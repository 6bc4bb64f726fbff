package fuzz_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
)

// FuzzQueue runs modelcheck.QueueFuzz, the driver of lanequeue's
// TestQueueMatchesModel, on the fuzzer's bytes: one lanequeue.Queue[string]
// and model.Queue driven with the same operations, compared after every
// step.
func FuzzQueue(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(modelcheck.QueueFuzz))
}
