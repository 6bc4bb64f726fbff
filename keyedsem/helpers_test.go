package keyedsem_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

var bg = context.Background()

// waitForWaiters spins until s has exactly n waiters.
func waitForWaiters[K comparable](s *keyedsem.Keyed[K], n int) {
	deadline := time.Now().Add(hangGuard)
	for s.Stats().Waiters != n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("waited %v for %d waiters; there are %d", hangGuard, n, s.Stats().Waiters))
		}
		runtime.Gosched()
	}
}

type result struct {
	p   semaphore.Permit
	err error
}

// goAcquire starts Acquire in a goroutine and returns where its result
// will come.
func goAcquire[K comparable](s *keyedsem.Keyed[K], ctx context.Context, key K, n int64) <-chan result {
	c := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, key, semaphore.Weight(n))
		c <- result{p, err}
	}()
	return c
}

// queue starts an acquire and waits until it is queued (s had want-1
// waiters before).
func queue[K comparable](t *testing.T, s *keyedsem.Keyed[K], ctx context.Context, key K, n int64, want int) <-chan result {
	t.Helper()
	c := goAcquire(s, ctx, key, n)
	waitForWaiters(s, want)
	return c
}

func newFake() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

// idleModes are the two entry lifetimes a race test runs under: idle
// timeout 0 (the entry is removed on the last release and made again by the
// next acquire) and the default (the entry stays).
var idleModes = []struct {
	name string
	opts []keyedsem.Option
}{
	{"idle0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
	{"default", nil},
}

// testCtx returns a context that ends at testkit.Deadline, for an acquire
// that should not wait: one that does fails the test there instead of
// hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	t.Cleanup(cancel)
	return ctx
}
