package bench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test or benchmark leaves a goroutine behind
// (a holder, a waiter, a worker of the gateway).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
