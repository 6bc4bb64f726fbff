package fuzz_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/modelcheck"
)

// FuzzFairShare runs modelcheck.FairShareFuzz, the driver of semaphore's
// TestFairShareMatchesModel, on the fuzzer's bytes: a WithFairShare
// semaphore and model.FairSemaphore driven with the same operations,
// compared after every step.
func FuzzFairShare(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(modelcheck.FairShareFuzz))
}
