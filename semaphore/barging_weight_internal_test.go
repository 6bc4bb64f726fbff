package semaphore

import (
	"context"
	"errors"
	"github.com/sessionlane/lanes/internal/waitq"
	"runtime"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
)

// TestWaitingWeightBoundAfterARejoin: under WithBarging, a woken waiter
// that loses its permits to a barger is counted back in as it rejoins,
// whatever the bound (it was admitted once), so the waiting weight may
// pass WithMaxWaitingWeight while newcomers queued meanwhile wait too. A
// newcomer must then still be refused. Before, the bound's check
// subtracted the waiting weight from the bound, which wrapped round, and
// every newcomer was let in: the bound limited nothing any more (found by
// review; reached by the barging race of a release, a barger and a
// newcomer, which this test drives through the rejoin's own admission
// instead).
func TestWaitingWeightBoundAfterARejoin(t *testing.T) {
	s := New(1, WithBarging(time.Hour), WithMaxWaitingWeight(1))
	p, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("fresh semaphore refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	// C queues: the waiting weight is at the bound.
	c := make(chan error, 1)
	go func() {
		q, err := s.Acquire(ctx, 1)
		if err == nil {
			q.Release()
		}
		c <- err
	}()
	spinUntil(t, "C to queue", func() bool { return s.Stats().Waiters == 1 })
	// A, woken before C queued, lost its permits and rejoins: counted
	// back in, past the bound.
	s.mu.Lock()
	_, queued, _, err := (*owner)(s).Reclaim(ctx, 1, false)
	s.mu.Unlock()
	if !queued || err != nil {
		t.Fatalf("the rejoin was not counted back in: queued %v, err %v", queued, err)
	}
	defer func() { // A leaves: its count goes
		s.mu.Lock()
		(*owner)(s).Dequeued(&waitq.Waiter{N: 1})
		s.mu.Unlock()
	}()
	d := make(chan error, 1)
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	go func() {
		q, err := s.Acquire(dctx, 1)
		if err == nil {
			q.Release()
		}
		d <- err
	}()
	for {
		select {
		case err := <-d:
			if !errors.Is(err, ErrQueueFull) {
				t.Fatalf("a newcomer with the waiting weight past its bound got %v; want ErrQueueFull", err)
			}
		default:
			if s.Stats().Waiters == 3 {
				dcancel()
				<-d
				t.Fatal("a newcomer was queued with the waiting weight past its bound (2 of 1)")
			}
			runtime.Gosched()
			continue
		}
		break
	}
	p.Release()
	if err := <-c; err != nil {
		t.Fatalf("C: %v", err)
	}
}

// spinUntil spins until cond holds, and fails the test, naming what it
// waited for, if it does not by testkit.Deadline.
func spinUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testkit.Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", testkit.Deadline, what)
		}
		runtime.Gosched()
	}
}
