package keyedsem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
)

// TestEveryKeyedCallEndsInOneCounterRace mixes, per round, callers of two
// keys that are granted, cancelled, refused by the per-key bound, and
// failed by Close, and checks the books once every call has returned: each
// call counted in exactly one of Acquired, Cancelled, Rejected and Failed,
// as the callers saw, nothing held or queued, and with idle timeout 0 no
// entry left (every reference dropped exactly once).
func TestEveryKeyedCallEndsInOneCounterRace(t *testing.T) {
	const rounds, callers = 1000, 8
	for r := 0; r < rounds; r++ {
		idle := time.Duration(0)
		if r%4 == 3 {
			idle = time.Hour
		}
		s := keyedsem.New[int](keyedsem.WithPerKeyCapacity(2), keyedsem.WithIdleTimeout(idle), keyedsem.WithMaxWaitersPerKey(3))
		var ok, cancelled, other atomic.Uint64
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
				p, err := s.AcquireN(ctx, i%2, int64(1+i%2))
				switch {
				case err == nil:
					ok.Add(1)
					p.Release()
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					other.Add(1)
				}
			}(i)
		}
		if r%2 == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s.Close()
			}()
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		testkit.Recv(t, done, "the callers to return")
		st := s.Stats()
		if got := st.Acquired + st.Cancelled + st.TimedOut + st.Rejected + st.Failed; got != callers {
			t.Fatalf("round %d: counters sum to %d for %d calls: %+v", r, got, callers, st)
		}
		if st.Acquired != ok.Load() || st.Cancelled != cancelled.Load() || st.Rejected+st.Failed != other.Load() {
			t.Fatalf("round %d: counters %+v; callers saw ok %d, cancelled %d, other %d", r, st.Counters, ok.Load(), cancelled.Load(), other.Load())
		}
		if st.Released != st.Acquired || st.Held != 0 || st.Waiters != 0 {
			t.Fatalf("round %d: books do not balance: %+v", r, st)
		}
		if idle == 0 && st.Keys != 0 {
			t.Fatalf("round %d: %d entries left with idle timeout 0: %+v", r, st.Keys, st)
		}
		if r%2 == 1 {
			for k := 0; k < 2; k++ {
				p, got := s.TryAcquireN(k, 2)
				if !got {
					t.Fatalf("round %d: TryAcquireN(%d, 2) failed on an idle key: %+v", r, k, s.Stats())
				}
				p.Release()
			}
		}
		s.Close()
	}
}
