package keyedsem_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// TestEveryKeyedCallEndsInOneCounterRace queues callers of two keys behind
// holders of both keys' capacity (one more than WithMaxWaitersPerKey lets
// in), then, all at once, releases the holders, cancels some callers and
// (every other round) closes the semaphore, so that grants race
// cancellations and Close. Once every call has returned it checks the
// books: each call counted in exactly one of Acquired, Cancelled, Rejected
// and Failed, as its caller saw it, nothing held or queued, and with idle
// timeout 0 no entry left (every reference dropped exactly once).
func TestEveryKeyedCallEndsInOneCounterRace(t *testing.T) {
	everyKeyedCallEndsInOneCounter(t, 1000)
}

// everyKeyedCallEndsInOneCounter is TestEveryKeyedCallEndsInOneCounterRace's
// rounds, with extra options for New (a barging semaphore runs them too).
func everyKeyedCallEndsInOneCounter(t *testing.T, rounds int, extra ...keyedsem.Option) {
	const callers = 8
	var tot [4]uint64 // waited, cancelled, rejected, failed
	defer func() {
		t.Logf("over all rounds: waited %d, cancelled %d, rejected %d, failed %d", tot[0], tot[1], tot[2], tot[3])
		if tot[0] == 0 || tot[1] == 0 || tot[2] == 0 || tot[3] == 0 {
			t.Errorf("a path was never taken: %v", tot)
		}
	}()
	for r := 0; r < rounds; r++ {
		idle := time.Duration(0)
		if r%4 == 3 {
			idle = time.Hour
		}
		s := keyedsem.New[int](append([]keyedsem.Option{keyedsem.WithPerKeyCapacity(2), keyedsem.WithIdleTimeout(idle), keyedsem.WithMaxWaitersPerKey(callers/2 - 1)}, extra...)...)
		var holds [2]semaphore.Permit
		for k := range holds {
			p, err := s.Acquire(context.Background(), k, semaphore.Weight(2))
			if err != nil {
				t.Fatal(err)
			}
			holds[k] = p
		}
		var ok, cancelled, other, returned atomic.Uint64
		var wg sync.WaitGroup
		cancels := make([]context.CancelFunc, callers)
		for i := 0; i < callers; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				defer returned.Add(1)
				p, err := s.Acquire(ctx, i%2, semaphore.Weight(int64(1+i/2%2)))
				switch {
				case err == nil:
					ok.Add(1)
					runtime.Gosched()
					p.Release()
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					other.Add(1)
				}
			}(i)
		}
		testkit.Eventually(t, "every caller queued or returned", func() bool {
			return testkit.AllQueuedOrReturned(uint64(callers), func() int { return s.Stats().Waiters }, &returned)
		})
		testkit.Storm(t, "the storm", func() {
			for _, p := range holds {
				p.Release()
			}
		}, func() { testkit.CancelEvery(cancels, 3) }, func() {
			if r%2 == 0 {
				s.Close()
			}
		})
		testkit.WaitAll(t, &wg, "the callers to return")
		for _, c := range cancels {
			c()
		}
		st := s.Stats()
		tot[0], tot[1], tot[2], tot[3] = tot[0]+st.Waited, tot[1]+st.Cancelled, tot[2]+st.Rejected, tot[3]+st.Failed
		calls := uint64(callers) + 2 // and the holders'
		if got := st.Acquired + st.Cancelled + st.TimedOut + st.Rejected + st.Failed; got != calls {
			t.Fatalf("round %d: counters sum to %d for %d calls: %+v", r, got, calls, st)
		}
		if st.Acquired != ok.Load()+2 || st.Cancelled != cancelled.Load() || st.Rejected+st.Failed != other.Load() {
			t.Fatalf("round %d: counters %+v; callers saw ok %d (and the holders), cancelled %d, other %d", r, st.Counters, ok.Load(), cancelled.Load(), other.Load())
		}
		if st.Waited != st.Acquired-2 {
			t.Fatalf("round %d: %d grants waited; want every caller's grant, %d: %+v", r, st.Waited, st.Acquired-2, st.Counters)
		}
		if st.Released != st.Acquired || st.Held != 0 || st.Waiters != 0 {
			t.Fatalf("round %d: books do not balance: %+v", r, st)
		}
		if idle == 0 && st.Keys != 0 {
			t.Fatalf("round %d: %d entries left with idle timeout 0: %+v", r, st.Keys, st)
		}
		if r%2 == 1 {
			for k := 0; k < 2; k++ {
				p, got := s.TryAcquire(k, semaphore.Weight(2))
				if !got {
					t.Fatalf("round %d: TryAcquire(%d, 2) failed on an idle key: %+v", r, k, s.Stats())
				}
				p.Release()
			}
		}
		s.Close()
	}
}
