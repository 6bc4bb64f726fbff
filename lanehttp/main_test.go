package lanehttp_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

// TestMain fails the package's tests if any goroutine a test started (a
// request waiting, a server, a client connection) is still running when
// they end.
func TestMain(m *testing.M) {
	testkit.Main(m)
}
