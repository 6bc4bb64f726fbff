package semaphore_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestEveryCallEndsInOneCounterRace queues callers behind a holder of the
// whole capacity, then, all at once, releases it, cancels some of the
// callers, shrinks and grows the capacity and (every other round) closes
// the semaphore, while WithMaxWait runs out for others, so that grants
// race cancellations, timeouts, shrinks and Close. Once every call has
// returned it checks the books: each call counted in exactly one of
// Acquired, Cancelled, TimedOut, Rejected and Failed, as its caller saw
// it, every permit back (Available == Capacity, Held == 0) and nobody
// queued.
func TestEveryCallEndsInOneCounterRace(t *testing.T) {
	everyCallEndsInOneCounter(t, 1000)
}

// everyCallEndsInOneCounter is TestEveryCallEndsInOneCounterRace's rounds,
// with extra options for New (a barging semaphore runs them as well).
func everyCallEndsInOneCounter(t *testing.T, rounds int, extra ...semaphore.Option) {
	var tot [5]uint64 // waited, cancelled, timed out, rejected, failed
	defer func() {
		t.Logf("over all rounds: waited %d, cancelled %d, timed out %d, rejected %d, failed %d", tot[0], tot[1], tot[2], tot[3], tot[4])
		if tot[0] == 0 || tot[1] == 0 || tot[2] == 0 || tot[4] == 0 {
			t.Errorf("a path was never taken: %v", tot)
		}
	}()
	for r := 0; r < rounds; r++ {
		// Every fourth round has more holders than inline tokens, so that
		// spare tokens are granted, given back and released too.
		capacity, callers, shrunk := int64(4), 8, int64(2)
		if r%4 == 1 {
			capacity, callers, shrunk = 20, 28, 15
		}
		opts := append([]semaphore.Option{semaphore.WithMaxWaiters(callers - 1)}, extra...)
		if r%3 == 0 {
			opts = append(opts, semaphore.WithMaxWait(time.Duration(20+r%40)*time.Microsecond))
		}
		s := semaphore.New(capacity, opts...)
		hold, err := s.Acquire(context.Background(), capacity)
		if err != nil {
			t.Fatal(err)
		}
		var ok, cancelled, timedOut, other, returned atomic.Uint64
		var wg sync.WaitGroup
		cancels := make([]context.CancelFunc, callers)
		for i := 0; i < callers; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			n := int64(1 + i%4)
			if capacity > 4 {
				n = 1 + int64(i%8)/7 // mostly 1: many holders at once
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer returned.Add(1)
				p, err := s.Acquire(ctx, n)
				switch {
				case err == nil:
					ok.Add(1)
					runtime.Gosched()
					p.Release()
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				case errors.Is(err, semaphore.ErrWaitTooLong):
					timedOut.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
		testkit.Eventually(t, "every caller queued or returned", func() bool {
			return testkit.AllQueuedOrReturned(uint64(callers), func() int { return s.Stats().Waiters }, &returned)
		})
		// The storm: the grants of the release race the rest.
		testkit.Storm(t, "the storm", func() { hold.Release() }, func() { testkit.CancelEvery(cancels, 3) }, func() {
			s.SetCapacity(shrunk)
			s.SetCapacity(capacity)
			if r%2 == 0 {
				s.Close()
			}
		})
		testkit.WaitAll(t, &wg, "the callers to return")
		for _, c := range cancels {
			c()
		}
		st := s.Stats()
		tot[0], tot[1], tot[2], tot[3], tot[4] = tot[0]+st.Waited, tot[1]+st.Cancelled, tot[2]+st.TimedOut, tot[3]+st.Rejected, tot[4]+st.Failed
		calls := uint64(callers) + 1 // the holder's
		if got := st.Acquired + st.Cancelled + st.TimedOut + st.Rejected + st.Failed; got != calls {
			t.Fatalf("round %d: counters sum to %d for %d calls: %+v", r, got, calls, st)
		}
		if st.Acquired != ok.Load()+1 || st.Cancelled != cancelled.Load() || st.TimedOut != timedOut.Load() || st.Rejected+st.Failed != other.Load() {
			t.Fatalf("round %d: counters %+v; callers saw ok %d (and the holder), cancelled %d, timed out %d, other %d", r, st.Counters, ok.Load(), cancelled.Load(), timedOut.Load(), other.Load())
		}
		if st.Waited != st.Acquired-1 {
			t.Fatalf("round %d: %d grants waited; want every caller's grant, %d: %+v", r, st.Waited, st.Acquired-1, st)
		}
		if st.Released != st.Acquired || st.Available != st.Capacity || st.Held != 0 || st.Waiters != 0 || st.WaitingWeight != 0 {
			t.Fatalf("round %d: books do not balance: %+v", r, st)
		}
		if r%2 == 1 {
			// Open: the whole capacity can still be taken, at once.
			p, got := s.TryAcquire(capacity)
			if !got {
				t.Fatalf("round %d: TryAcquire(capacity) failed on an idle semaphore: %+v", r, s.Stats())
			}
			p.Release()
		}
	}
}
