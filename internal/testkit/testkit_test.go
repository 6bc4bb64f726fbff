package testkit_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestGoRecvEventually(t *testing.T) {
	ch := testkit.Go(func() int { return 7 })
	if got := testkit.Recv(t, ch, "the result"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	n := 0
	testkit.Eventually(t, "n to reach 3", func() bool { n++; return n == 3 })
	done := make(chan struct{})
	close(done)
	testkit.Recv(t, done, "a closed channel")
}
