package fuzz_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
)

// FuzzSemaphore runs modelcheck.SemaphoreFuzz, the driver of semaphore's
// TestSemaphoreMatchesModel, on the fuzzer's bytes: one semaphore.Weighted
// and model.Semaphore driven with the same operations, compared after
// every step, under the order of service the input draws (FIFO,
// WithPriorities, WithFairShare). An input too short for the draws it
// leads to is skipped.
func FuzzSemaphore(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(modelcheck.SemaphoreFuzz))
}
