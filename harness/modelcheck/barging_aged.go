package modelcheck

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// AgedLane is one lane made WithBarging(time.Second) on a fake clock, for
// AgedWhileWokenSetsStrict: a semaphore of capacity 1, or one key of a
// keyed semaphore of per-key capacity 1, with its package's test hooks.
type AgedLane struct {
	SUT           BargingSUT
	Strict, Woken func() bool // the lane's strict and woken flags
}

// AgedWhileWokenSetsStrict checks, over 300 lanes that newLane makes on
// clk, that a woken waiter whose bound runs out while it is off the queue,
// and that loses the permit to a barger, makes the lane strict when it
// rejoins: it is the only waiter and its timer will not fire again, so
// nothing else would (waitq.BargeWait's agedOff, and the mark of the
// rejoin's admission). It skips if the barger never wins the race.
func AgedWhileWokenSetsStrict(t *testing.T, newLane func(clk *clock.Fake) AgedLane) {
	t.Helper()
	stolen := 0
	for i := 0; i < 300; i++ {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		l := newLane(clk)
		h, ok := l.SUT.TryAcquire(1)
		if !ok {
			t.Fatal("a fresh lane refused TryAcquire")
		}
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
		ch := make(chan BargeResult, 1)
		go func() {
			p, err := l.SUT.Acquire(ctx, 1)
			ch <- BargeResult{p, err}
		}()
		spin("the waiter to queue", func() bool { return l.SUT.Waiters() == 1 }, t.Fatalf)
		// Its bound's timer is armed after it is counted: advanced before
		// that, the clock would arm it a second later, never to fire.
		spin("the waiter's bound to be armed", func() bool { return clk.Pending() == 1 }, t.Fatalf)
		h.Release() // nudges the waiter
		clk.Advance(time.Second)
		var p semaphore.Permit
		won := false
		deadline := time.Now().Add(testkit.Deadline)
		for !won {
			if q, ok := l.SUT.TryAcquire(1); ok {
				p = q
				break
			}
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Fatalf("iteration %d: the waiter: %v", i, r.Err)
				}
				r.P.Release()
				won = true
			default:
				if time.Now().After(deadline) {
					t.Fatalf("iteration %d: neither the barger nor the waiter got the permit", i)
				}
			}
		}
		if won {
			cancel()
			l.SUT.Close()
			continue
		}
		stolen++
		spin("the woken waiter to rejoin", func() bool { return l.SUT.Waiters() == 1 && !l.Woken() }, t.Fatalf)
		strict := l.Strict()
		p.Release()
		var r BargeResult
		select {
		case r = <-ch:
		case <-time.After(testkit.Deadline):
			t.Fatalf("iteration %d: the waiter got nothing after the barger released", i)
		}
		cancel()
		if r.Err != nil {
			t.Fatalf("iteration %d: the waiter: %v", i, r.Err)
		}
		r.P.Release()
		l.SUT.Close()
		if !strict {
			t.Fatalf("iteration %d: the only waiter, aged while woken, rejoined without strict mode", i)
		}
	}
	if stolen == 0 {
		t.Skip("the barger never won")
	}
	t.Logf("stolen %d of 300", stolen)
}

// BargeResult is an acquire's outcome.
type BargeResult struct {
	P   semaphore.Permit
	Err error
}
