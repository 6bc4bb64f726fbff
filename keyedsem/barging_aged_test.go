package keyedsem_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingKeyAgedWhileWokenSetsStrict is semaphore's
// TestBargingAgedWhileWokenSetsStrict on a key: a woken waiter whose
// bound runs out while it is off the queue, and that loses the permit to
// a barger, makes the key strict when it rejoins (the mark that
// Reclaim's admission sets). It is the only waiter, and its timer will
// not fire again, so nothing else would.
func TestBargingKeyAgedWhileWokenSetsStrict(t *testing.T) {
	const key = "k"
	stolen := 0
	for i := 0; i < 300; i++ {
		clk := newFake()
		s := keyedsem.New[string](keyedsem.WithBarging(time.Second), keyedsem.WithClock(clk))
		h, ok := s.TryAcquire(key)
		if !ok {
			t.Fatal("fresh key refused")
		}
		ch := queue(t, s, testCtx(t), key, 1, 1)
		// Its bound's timer is armed after it is counted: advanced before
		// that, the clock would arm it a second later, never to fire.
		waitUntil(t, "the waiter's bound to be armed", func() bool { return clk.Pending() == 1 })
		h.Release() // nudges the waiter
		clk.Advance(time.Second)
		var p semaphore.Permit
		won := false
		deadline := time.Now().Add(hangGuard)
		for {
			if q, ok := s.TryAcquire(key); ok {
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
			s.Close()
			continue
		}
		stolen++
		waitUntil(t, "the woken waiter to rejoin", func() bool {
			return s.Stats().Waiters == 1 && !keyedsem.BargingWoken(s, key)
		})
		strict := keyedsem.BargingStrict(s, key)
		p.Release()
		r := recv(t, ch, "the waiter")
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.p.Release()
		s.Close()
		if !strict {
			t.Fatalf("iteration %d: the only waiter, aged while woken, rejoined without strict mode", i)
		}
	}
	if stolen == 0 {
		t.Skip("the barger never won")
	}
	t.Logf("stolen %d of 300", stolen)
}
