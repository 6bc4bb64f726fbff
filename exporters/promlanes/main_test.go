package promlanes_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

// TestMain fails the package's tests if a goroutine a test started (a
// waiter of the scenario) is still running when they end.
func TestMain(m *testing.M) {
	testkit.Main(m)
}
