package semaphore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine a test started (a
// waiter, a holder) is still running when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
