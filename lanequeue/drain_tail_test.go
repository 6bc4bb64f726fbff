package lanequeue_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// gate is an Observer that holds a Release between the end of its ticket's
// call and the return of its permits (observers run in between) until
// opened: it keeps a Release on its way for as long as a test needs.
type gate struct {
	in   chan struct{} // closed when Observe is called
	open chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{in: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) Observe(error, time.Duration) {
	g.once.Do(func() { close(g.in) })
	<-g.open
}

// foreignLane is a global lane of another package, as far as lanequeue
// can tell: Drain cannot know from its Stats which permits are the queue's.
type foreignLane struct{ s *semaphore.Weighted }

func (l foreignLane) Kind() lanequeue.Kind { return lanequeue.Global }
func (l foreignLane) MaxWeight() int64     { return l.s.Stats().Capacity }
func (l foreignLane) Acquire(ctx context.Context, _ string, n int64) (semaphore.Permit, error) {
	return l.s.Acquire(ctx, n)
}
func (l foreignLane) TryAcquire(_ string, n int64) (semaphore.Permit, bool) { return l.s.TryAcquire(n) }
func (l foreignLane) Stats() lanequeue.LaneStats {
	st := l.s.Stats()
	return lanequeue.LaneStats{Kind: lanequeue.Global, Capacity: st.Capacity, Held: st.Held, Waiters: st.Waiters, Closed: st.Closed}
}
func (l foreignLane) Close() { l.s.Close() }

// cancelled is a context that has ended: a Drain given it looks once.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// finishHeld takes lanes for "a", observed on lane by a gate, and ends the
// ticket with Finish in a goroutine that the gate holds after the ticket's
// call has ended and before its permits are back.
func finishHeld(t *testing.T, q *lanequeue.Queue[string], lane string, lanes ...string) (*gate, <-chan error) {
	t.Helper()
	g := newGate()
	must(t, q.ObserveLane(lane, g))
	tk, err := acquireAll(q, context.Background(), "a", lanes)
	must(t, err)
	done := testkit.Go(func() error { tk.Finish(nil); return nil })
	testkit.Recv(t, g.in, "the gate's Observe")
	return g, done
}

// TestDrainWaitsForAReleaseOnItsWay: the Release of a ticket of keyed and
// global lanes counts its call out only once its permits are back; a Drain
// while the Release is on its way (held in an Observer) does not return
// nil while the session and global lanes hold the ticket's permits.
func TestDrainWaitsForAReleaseOnItsWay(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	g, finished := finishHeld(t, q, "global", "session", "global", "rate")
	err := q.Drain(cancelled())
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "still out: 1") {
		t.Fatalf("Drain while a Release gives permits back = %v; want context.Canceled, the ticket still out", err)
	}
	if q.Stats()[0].Closed {
		t.Fatal("Drain closed the queue while a Release was on its way")
	}
	close(g.open)
	testkit.Recv(t, finished, "Finish")
	if err := testkit.Recv(t, testkit.Go(func() error { return q.Drain(context.Background()) }), "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainWaitsForAReleaseOnItsWayInALaneOfAnotherPackage: a ticket with
// a lane whose Stats Drain cannot read as the queue's ends its call only
// once its permits are back (an atomic add, as before). Counting it out
// under the lock, as for this package's lanes, lets the Drain with the
// ended context return nil while the foreign lane holds the permit.
func TestDrainWaitsForAReleaseOnItsWayInALaneOfAnotherPackage(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	foreign := foreignLane{semaphore.New(1)}
	must(t, q.Add("foreign", foreign))
	g, finished := finishHeld(t, q, "foreign", "foreign")
	err := q.Drain(cancelled())
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "calls, places or tickets still out: 1:") {
		t.Fatalf("Drain while a Release gives a foreign permit back = %v; want context.Canceled, 1 out", err)
	}
	close(g.open)
	testkit.Recv(t, finished, "Finish")
	if err := testkit.Recv(t, testkit.Go(func() error { return q.Drain(context.Background()) }), "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	if held := foreign.s.Stats().Held; held != 0 {
		t.Fatalf("the foreign lane holds %d after Drain", held)
	}
	assertNothingHeld(t, q)
}

// TestDrainDoesNotWaitForOthersOnASharedSemaphore: a lane's semaphore
// (NewGlobalLane's) may be held by code that uses it directly; Drain waits
// for the queue's tickets there (they end after their permits) but not
// for the others' permits.
func TestDrainDoesNotWaitForOthersOnASharedSemaphore(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	shared := semaphore.New(2)
	must(t, q.Add("shared", lanequeue.NewGlobalLane[string](shared)))
	other, ok := shared.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire on the shared semaphore failed")
	}
	defer other.Release()
	g, finished := finishHeld(t, q, "shared", "session", "shared")
	if err := q.Drain(cancelled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain while a ticket's Release gives a shared permit back = %v; want context.Canceled", err)
	}
	close(g.open)
	testkit.Recv(t, finished, "Finish")
	if err := q.Drain(cancelled()); err != nil {
		t.Fatalf("Drain with another's permit out on the shared semaphore = %v; want nil", err)
	}
	if held := shared.Stats().Held; held != 1 {
		t.Fatalf("the shared semaphore holds %d after Drain; want the other's 1", held)
	}
}

// TestDrainReleaseRace: tickets of this package's lanes and of a foreign
// one are released (by Release and by Finish with observers) while two
// Drains run. When a Drain returns, no lane holds anything: a Release
// counted out under its stripe's lock has its permits back, and so has one
// that counts out after them.
func TestDrainReleaseRace(t *testing.T) {
	t.Parallel()
	for round := range 1000 {
		q := testQueue(t, 8)
		foreign := foreignLane{semaphore.New(8)}
		must(t, q.Add("foreign", foreign))
		must(t, q.ObserveLane("global", yielder{}))
		sets := [][]string{{"session", "global"}, {"session", "global", "foreign"}, {"global", "rate"}}
		var wg sync.WaitGroup
		var returned atomic.Bool
		for i := range 6 {
			lanes := sets[i%len(sets)]
			if lanes[len(lanes)-1] == "rate" {
				lanes = lanes[:1] // the rate lane's one token serves one ticket only
			}
			tk, err := acquireAll(q, context.Background(), string(rune('a'+i)), lanes)
			must(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.Gosched()
				if i%2 == 0 {
					tk.Finish(nil)
				} else {
					tk.Release()
				}
			}()
		}
		drains := make([]<-chan error, 2)
		for i := range drains {
			drains[i] = testkit.Go(func() error {
				err := q.Drain(context.Background())
				returned.Store(true)
				for _, st := range q.Stats() {
					if st.Held != 0 {
						t.Errorf("round %d: lane %q holds %d when Drain returns", round, st.Name, st.Held)
					}
				}
				return err
			})
		}
		for _, d := range drains {
			if err := testkit.Recv(t, d, "Drain"); err != nil {
				t.Fatalf("round %d: Drain = %v", round, err)
			}
		}
		testkit.WaitAll(t, &wg, "the releases")
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}

// yielder is an Observer that lets other goroutines run, so that a Drain
// meets Releases between their count and their permits.
type yielder struct{}

func (yielder) Observe(error, time.Duration) { runtime.Gosched() }
