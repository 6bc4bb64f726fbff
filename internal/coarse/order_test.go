package coarse_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/testkit"
)

// Readings taken one after another, by any goroutines, never go back
// while the clock goes from system clock reads to the timer's and back
// (the timer stops every RecheckTicks ticks to count again); once Stop
// has returned and the readers are gone, it stays where it is.
func TestReadingsOrderedAcrossGoroutinesAndModes(t *testing.T) {
	var c coarse.Clock
	c.Init(time.Now())
	var last atomic.Int64
	var bad atomic.Value
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := last.Load()
				r := c.Read()
				if r < before {
					bad.Store([2]int64{before, r})
				}
				for l := last.Load(); r > l && !last.CompareAndSwap(l, r); l = last.Load() {
				}
				runtime.Gosched()
			}
		}()
	}
	// Wait for the timer to start, stop and start again: both ways of
	// reading, and both switches, ran under the readers.
	deadline := time.Now().Add(failsafe)
	for _, want := range []bool{true, false, true} {
		for c.Ticking() != want {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("the timer never became ticking=%v under tight reads", want)
			}
			runtime.Gosched()
		}
	}
	c.Stop()
	close(stop)
	testkit.WaitAll(t, &wg, "the readers")
	if b := bad.Load(); b != nil {
		t.Fatalf("a reading went back: %v", b)
	}
	frozen := c.Read()
	for range 1000 {
		if r := c.Read(); r != frozen {
			t.Fatalf("after Stop: %d then %d", frozen, r)
		}
	}
}
