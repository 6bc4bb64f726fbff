package semaphore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestEveryCallEndsInOneCounterRace mixes, on one semaphore per round,
// waiters that are cancelled, that time out, that are failed by a shrink
// or by Close, and that are granted, and checks the books once every call
// has returned: each call counted in exactly one of Acquired, Cancelled,
// TimedOut, Rejected and Failed, matching the errors the callers saw,
// every permit back (Available == Capacity, Held == 0) and nobody queued.
func TestEveryCallEndsInOneCounterRace(t *testing.T) {
	const rounds = 1000
	for r := 0; r < rounds; r++ {
		// Every fourth round has more holders than inline tokens, so that
		// spare tokens are granted, given back and released too.
		capacity, callers, shrunk := int64(4), 8, int64(2)
		if r%4 == 1 {
			capacity, callers, shrunk = 24, 32, 18
		}
		s := semaphore.New(capacity, semaphore.WithMaxWait(time.Duration(1+r%3)*time.Microsecond), semaphore.WithMaxWaiters(callers-2))
		var ok, cancelled, timedOut, other atomic.Uint64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if i%3 == 0 {
					go cancel()
				}
				n := int64(1 + i%4)
				if capacity > 4 {
					n = 1 + int64(i%8)/7 // mostly 1: many holders at once
				}
				p, err := s.Acquire(ctx, n)
				switch {
				case err == nil:
					ok.Add(1)
					p.Release()
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				case errors.Is(err, semaphore.ErrWaitTooLong):
					timedOut.Add(1)
				default:
					other.Add(1)
				}
			}(i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s.SetCapacity(shrunk)
			s.SetCapacity(capacity)
			if r%2 == 0 {
				s.Close()
			}
		}()
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		testkit.Recv(t, done, "the callers to return")
		st := s.Stats()
		calls := uint64(callers)
		if got := st.Acquired + st.Cancelled + st.TimedOut + st.Rejected + st.Failed; got != calls {
			t.Fatalf("round %d: counters sum to %d for %d calls: %+v", r, got, calls, st)
		}
		if st.Acquired != ok.Load() || st.Cancelled != cancelled.Load() || st.TimedOut != timedOut.Load() || st.Rejected+st.Failed != other.Load() {
			t.Fatalf("round %d: counters %+v; callers saw ok %d, cancelled %d, timed out %d, other %d", r, st.Counters, ok.Load(), cancelled.Load(), timedOut.Load(), other.Load())
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
