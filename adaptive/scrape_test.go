package adaptive_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// stillClock never moves: every overload is of work admitted at the last
// cut, so none is passed over as older than it.
type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time                         { return c.t }
func (c stillClock) NewTimer(time.Duration) semaphore.Timer { panic("stillClock: no timers") }

// TestOverloadDuringAScrapeCuts: an overload reported while Stats (a
// scrape) holds the controller's lock cuts the limit before the scrape
// returns. The report's TryLock fails and leaves the decision to the
// holder; Stats and Limit held the lock without deciding, so the cut
// waited for a later report, up to a round trip of them (a new user's
// trial: 10 of 10 runs left the limit at 20).
func TestOverloadDuringAScrapeCuts(t *testing.T) {
	for i := range 3000 {
		sem := semaphore.New(20)
		ctl, err := adaptive.New(sem, 1, 20)
		if err != nil {
			t.Fatal(err)
		}
		var stop, started atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the scraper
			defer wg.Done()
			for !stop.Load() {
				_ = ctl.Stats()
				_ = ctl.Limit()
				started.Store(true)
			}
		}()
		testkit.Eventually(t, "the scraper's first Stats", started.Load)
		ctl.Report(adaptive.Overload, time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if st := ctl.Stats(); st.OverloadDecreases != 1 || sem.Stats().Capacity != 18 {
			t.Fatalf("trial %d: one fresh overload, then no report: limit %d, capacity %d, decreases %d; want 18, 18, 1",
				i, st.Limit, sem.Stats().Capacity, st.OverloadDecreases)
		}
	}
}

// TestOverloadsNeverPassSamples: Stats.Overloads is a part of
// Stats.Samples (the exporters report Samples-Overloads as successes, an
// unsigned difference) also while overloads are reported from many
// goroutines. A decision read the samples, then the overloads, and an
// overload that counted itself in between (before its sample) was in the
// second and not the first (a new user's trial: promlanes exported about
// 1.8e19 successes).
func TestOverloadsNeverPassSamples(t *testing.T) {
	sem := semaphore.New(1)
	ctl, err := adaptive.New(sem, 1, 1, adaptive.WithClock(stillClock{time.Unix(1e9, 0)}))
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var bad atomic.Pointer[adaptive.Stats]
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if st := ctl.Stats(); st.Overloads > st.Samples {
				bad.CompareAndSwap(nil, &st)
				return
			}
		}
	}()
	var reporters sync.WaitGroup
	for range 8 {
		reporters.Add(1)
		go func() {
			defer reporters.Done()
			for range 50000 {
				if bad.Load() != nil {
					return
				}
				ctl.Report(adaptive.Overload, 0)
			}
		}()
	}
	reporters.Wait()
	stop.Store(true)
	wg.Wait()
	st := ctl.Stats()
	if b := bad.Load(); b != nil || st.Overloads > st.Samples {
		if b == nil {
			b = &st
		}
		t.Fatalf("Overloads %d > Samples %d", b.Overloads, b.Samples)
	}
}
