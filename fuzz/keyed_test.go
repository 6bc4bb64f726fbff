package fuzz_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
)

// FuzzKeyed runs modelcheck.KeyedFuzz, the driver of keyedsem's
// TestKeyedMatchesModel, on the fuzzer's bytes: one
// keyedsem.Keyed[string] and model.Keyed driven with the same
// operations on a handful of keys, compared after every step. Without the
// package's Has hook, the clocks move on by 1ns after every step so that
// entries never tie.
func FuzzKeyed(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(modelcheck.KeyedFuzz))
}
