package fuzz_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if an input leaves a goroutine behind: every
// waiter a target starts must have been woken and have returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
