package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// Eight callers of four groups (one of them "", one of weight 3) take
// weights 1 and 2 of capacity 3, 2000 calls in all, a third of them with a
// context that another goroutine cancels at a random moment (before the
// wait, during it, or racing its grant): every call ends once, as a grant
// or its context's error, never more than the capacity is held, and at
// the end nothing is held or waits and the counters add up.
func TestFairShareManyGroupsRace(t *testing.T) {
	weight := func(g string) int {
		if g == "heavy" {
			return 3
		}
		return 1
	}
	s := semaphore.New(3, semaphore.WithFairShare(weight))
	groups := []string{"", "a", "b", "heavy"}
	const workers, rounds = 8, 1000
	var held, granted, cancelled atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := groups[w%len(groups)]
			for i := range rounds / workers * 2 {
				n := int64(1 + (i+w)%2)
				ctx, cancel := context.WithCancel(context.Background())
				if i%3 == 0 {
					go cancel()
				}
				p, err := s.Acquire(ctx, n, semaphore.Group(group))
				cancel()
				switch {
				case err == nil:
					if h := held.Add(n); h > 3 {
						errs <- fmt.Errorf("%d permits held at once with capacity 3", h)
						return
					}
					granted.Add(1)
					held.Add(-n)
					p.Release()
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					errs <- fmt.Errorf("group %q: %v", group, err)
					return
				}
			}
		}()
	}
	testkit.WaitAll(t, &wg, "the callers")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Held != 0 || st.Waiters != 0 || st.Available != 3 || st.Acquired != st.Released ||
		st.Acquired != uint64(granted.Load()) || st.Cancelled != uint64(cancelled.Load()) ||
		granted.Load()+cancelled.Load() != workers*(rounds/workers*2) {
		t.Fatalf("after the rounds: %+v; %d granted and %d cancelled of %d calls", st, granted.Load(), cancelled.Load(), workers*(rounds/workers*2))
	}
}
