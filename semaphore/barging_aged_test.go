package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingAgedWhileWokenSetsStrict: a woken waiter whose bound runs
// out while it is off the queue, and that loses the permit to a barger,
// makes the semaphore strict when it rejoins: it is the only waiter, and
// its timer will not fire again, so nothing else would (the rejoin's
// agedOff in waitq.BargeWait; found by review: no other test fails
// without it).
func TestBargingAgedWhileWokenSetsStrict(t *testing.T) {
	stolen := 0
	for i := 0; i < 300; i++ {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		s := semaphore.New(1, semaphore.WithBarging(time.Second), semaphore.WithClock(clk))
		h, ok := s.TryAcquire(1)
		if !ok {
			t.Fatal("fresh semaphore refused")
		}
		ch := acquireAsync(context.Background(), s, 1)
		waitFor(t, "the waiter to queue", func() bool { return s.Stats().Waiters == 1 })
		// Its bound's timer is armed after it is counted: advanced before
		// that, the clock would arm it a second later, never to fire.
		waitFor(t, "the waiter's bound to be armed", func() bool { return clk.Pending() == 1 })
		h.Release() // nudges the waiter
		clk.Advance(time.Second)
		var p semaphore.Permit
		won := false
		deadline := time.Now().Add(testkit.Deadline)
		for {
			if q, ok := s.TryAcquire(1); ok {
				p = q
				break
			}
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatal(r.err)
				}
				r.p.Release()
				won = true
			default:
				if time.Now().After(deadline) {
					t.Fatalf("iteration %d: neither the barger nor the waiter got the permit", i)
				}
				continue
			}
			break
		}
		if won {
			continue
		}
		stolen++
		waitFor(t, "the woken waiter to rejoin", func() bool {
			return s.Stats().Waiters == 1 && !semaphore.BargingWoken(s)
		})
		if !semaphore.BargingStrict(s) {
			p.Release()
			r := recv(t, ch)
			if r.err == nil {
				r.p.Release()
			}
			t.Fatalf("iteration %d: the only waiter, aged while woken, rejoined without strict mode", i)
		}
		p.Release()
		r := recv(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.p.Release()
	}
	if stolen == 0 {
		t.Skip("the barger never won")
	}
	t.Logf("stolen %d of 300", stolen)
}
