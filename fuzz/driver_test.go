package fuzz_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

// TestMain fails the run if an input leaves a goroutine behind: every
// waiter a target starts must have been woken and have returned.
func TestMain(m *testing.M) {
	testkit.Main(m)
}
