package lanequeue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// drainAsync runs Drain in a goroutine and waits until it is draining.
func drainAsync(t *testing.T, q *lanequeue.Queue[string], ctx context.Context) <-chan error {
	t.Helper()
	ch := testkit.Go(func() error { return q.Drain(ctx) })
	testkit.Eventually(t, "the queue drains", q.Draining)
	return ch
}

// notYet fails if ch has a value: Drain returned while work was out.
func notYet(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Drain returned %v while %s", err, what)
	default:
	}
}

// TestDrainRefusesNewWorkWaitsForTicketsThenCloses (issue 15): Drain
// refuses every new call with ErrDraining at once, returns only once the
// ticket out is released, and leaves the queue closed and empty.
func TestDrainRefusesNewWorkWaitsForTicketsThenCloses(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	set, err := q.Lanes("session", "global")
	must(t, err)
	held, err := q.AcquireAll(context.Background(), "a", set)
	must(t, err)
	drained := drainAsync(t, q, context.Background())

	if _, err := q.AcquireAll(context.Background(), "b", set); err != lanequeue.ErrDraining || !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("AcquireAll while draining = %v; want ErrDraining, matching ErrClosed", err)
	}
	if tk, ok := q.TryAcquireAll("b", set); ok {
		tk.Release()
		t.Fatal("TryAcquireAll succeeded while draining")
	}
	if _, err := q.Join("b", set); err != lanequeue.ErrDraining {
		t.Fatalf("Join while draining = %v; want ErrDraining", err)
	}
	if err := q.Check(set); err != lanequeue.ErrDraining {
		t.Fatalf("Check while draining = %v; want ErrDraining", err)
	}
	notYet(t, drained, "a ticket is out")
	if !held.Release() {
		t.Fatal("the ticket out could not be released")
	}
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	if _, err := q.AcquireAll(context.Background(), "b", set); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("AcquireAll after Drain = %v; want ErrClosed", err)
	}
	assertNothingHeld(t, q)
}

// TestStoppingClosesWhenDrainBeginsOrAtClose: Stopping's channel stays
// open while the queue admits work, and is closed once a Drain has begun
// (with a ticket still out, so the queue is not closed yet), a call made
// then being refused; Close closes it too, and a later Drain or Close
// finds it closed (no second close).
func TestStoppingClosesWhenDrainBeginsOrAtClose(t *testing.T) {
	t.Parallel()
	stopped := func(q *lanequeue.Queue[string]) bool {
		select {
		case <-q.Stopping():
			return true
		default:
			return false
		}
	}
	t.Run("Drain", func(t *testing.T) {
		q := testQueue(t, 4)
		set, err := q.Lanes("session", "global")
		must(t, err)
		held, err := q.AcquireAll(context.Background(), "a", set)
		must(t, err)
		if stopped(q) {
			t.Fatal("Stopping closed before any Drain or Close")
		}
		drained := testkit.Go(func() error { return q.Drain(context.Background()) })
		testkit.Recv(t, q.Stopping(), "Stopping's channel to close once the drain begins")
		if _, err := q.AcquireAll(context.Background(), "b", set); err != lanequeue.ErrDraining {
			t.Fatalf("AcquireAll once Stopping is closed = %v; want ErrDraining", err)
		}
		notYet(t, drained, "a ticket is out")
		held.Release()
		must(t, testkit.Recv(t, drained, "Drain"))
		q.Close() // closed already: no second close of the channel
	})
	t.Run("Close", func(t *testing.T) {
		q := testQueue(t, 4)
		q.Close()
		if !stopped(q) {
			t.Fatal("Stopping open after Close")
		}
		must(t, q.Drain(context.Background()))
	})
}

// TestDrainServesTheQueuedCallers (issue 15, OpenClaw: "queued work still
// runs"): a caller that waited in line before Drain is not refused: it is
// served in its turn, and Drain waits for its ticket too.
func TestDrainServesTheQueuedCallers(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	held, err := acquireAll(q, context.Background(), "a", []string{"session", "global"})
	must(t, err)
	queued := acquireAsync(context.Background(), q, "a", []string{"session", "global"})
	waitQueued(t, q, "session", 1)
	drained := drainAsync(t, q, context.Background())
	held.Release()
	r := receive(t, queued)
	if r.err != nil {
		t.Fatalf("the caller queued before Drain = %v; want its ticket", r.err)
	}
	notYet(t, drained, "the queued caller holds its ticket")
	r.t.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainWaitsForPlaces: a place taken before Drain may still be waited
// for (its ticket then counts) or left; Drain waits for both.
func TestDrainWaitsForPlaces(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	set, err := q.Lanes("session", "global")
	must(t, err)
	waited, err := q.Join("a", set)
	must(t, err)
	left, err := q.Join("b", set)
	must(t, err)
	drained := drainAsync(t, q, context.Background())
	tk := testkit.Await(t, "a place taken before Drain", waited.Wait)
	left.Leave()
	notYet(t, drained, "the place's ticket is out")
	tk.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainContextEndsMidDrain: Drain's context ending returns its error
// and how much is out, and leaves the queue draining but open; a later
// Drain finishes the job.
func TestDrainContextEndsMidDrain(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	set, err := q.Lanes("session", "global")
	must(t, err)
	held, err := q.AcquireAll(context.Background(), "a", set)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	drained := drainAsync(t, q, ctx)
	cancel()
	err = testkit.Recv(t, drained, "the cancelled Drain")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "calls, places or tickets still out: 1:") {
		t.Fatalf("cancelled Drain = %v; want context.Canceled, saying 1 is out", err)
	}
	if !q.Draining() {
		t.Fatal("the queue stopped draining")
	}
	if _, err := q.AcquireAll(context.Background(), "b", set); err != lanequeue.ErrDraining {
		t.Fatalf("AcquireAll after a cancelled Drain = %v; want ErrDraining (the queue is not closed)", err)
	}
	if laneStats(t, q, "global").Closed {
		t.Fatal("a cancelled Drain closed the lanes")
	}
	again := testkit.Go(func() error { return q.Drain(context.Background()) })
	notYet(t, again, "a ticket is out")
	held.Release()
	if err := testkit.Recv(t, again, "the second Drain"); err != nil {
		t.Fatalf("second Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainOfAClosedQueueWaitsForTickets: Close leaves tickets out valid;
// a Drain after it still waits for them.
func TestDrainOfAClosedQueueWaitsForTickets(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	held, err := acquireAll(q, context.Background(), "a", []string{"global"})
	must(t, err)
	q.Close()
	drained := drainAsync(t, q, context.Background())
	notYet(t, drained, "a ticket is out")
	held.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
}

// TestDrainOfAClosedQueueWaitsForPlaces: Close ends no place (a place
// whose turn came still holds its keyed lane, and one in line is failed
// only once it is waited for), so a Drain after it waits for every place
// until it is waited for or left, as Drain's doc says.
func TestDrainOfAClosedQueueWaitsForPlaces(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	set, err := q.Lanes("session", "global")
	must(t, err)
	turn, err := q.Join("a", set) // its turn has come: it holds a's session permit
	must(t, err)
	inLine, err := q.Join("a", set) // behind it
	must(t, err)
	q.Close()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Drain(ended); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "calls, places or tickets still out: 2:") {
		t.Fatalf("Drain of a closed queue with two places = %v; want context.Canceled, saying 2 are out", err)
	}
	waited := testkit.Go(func() error { _, err := inLine.Wait(context.Background()); return err })
	if err := testkit.Recv(t, waited, "Wait of the place in line"); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Wait of a place in line after Close = %v; want ErrClosed", err)
	}
	if err := q.Drain(ended); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "calls, places or tickets still out: 1:") {
		t.Fatalf("Drain with the place whose turn came = %v; want context.Canceled, saying 1 is out", err)
	}
	turn.Leave()
	if err := testkit.Recv(t, testkit.Go(func() error { return q.Drain(context.Background()) }), "Drain"); err != nil {
		t.Fatalf("Drain once every place is left = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainRace: calls of every kind race Drain (and a second Drain). A
// ticket is never held once a Drain has returned, every call ends with a
// ticket or with ErrDraining / ErrClosed, and nothing is held after.
func TestDrainRace(t *testing.T) {
	t.Parallel()
	for round := range 1000 {
		q := testQueue(t, 2)
		set, err := q.Lanes("session", "global")
		must(t, err)
		var returned atomic.Bool // a Drain has returned
		var wg sync.WaitGroup
		hold := func(tk *lanequeue.Ticket[string]) {
			if returned.Load() {
				t.Errorf("round %d: a ticket is held after Drain returned", round)
			}
			tk.Release()
		}
		refused := func(what string, err error) {
			if !errors.Is(err, semaphore.ErrClosed) {
				t.Errorf("round %d: %s = %v; want a ticket, ErrDraining or ErrClosed", round, what, err)
			}
		}
		keys := []string{"a", "a", "b"}
		for i, key := range keys {
			wg.Add(3)
			go func() {
				defer wg.Done()
				tk, err := q.AcquireAll(context.Background(), key, set)
				if err != nil {
					refused("AcquireAll", err)
					return
				}
				hold(tk)
			}()
			go func() {
				defer wg.Done()
				if tk, ok := q.TryAcquireAll(key, set); ok {
					hold(tk)
				}
			}()
			go func() {
				defer wg.Done()
				pl, err := q.Join(key, set)
				if err != nil {
					refused("Join", err)
					return
				}
				if i == 2 {
					pl.Leave()
					return
				}
				tk, err := pl.Wait(context.Background())
				if err != nil {
					refused("Wait", err)
					return
				}
				hold(tk)
			}()
		}
		drains := make([]<-chan error, 2)
		for i := range drains {
			drains[i] = testkit.Go(func() error {
				err := q.Drain(context.Background())
				returned.Store(true)
				// Nothing is held once Drain has returned: not a ticket,
				// not a permit of a call still on its way.
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
		testkit.WaitAll(t, &wg, "the callers")
		assertNothingHeld(t, q)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}

// BenchmarkDrainCount is what the count Drain waits on costs a call that
// is admitted and then fails: an admission and an end, two atomic adds,
// alone and from every core at once. A ticket's Release ends its call
// with a plain increment under its stripe's lock instead (see
// BenchmarkAcquire).
func BenchmarkDrainCount(b *testing.B) {
	q := lanequeue.New[string]()
	defer q.Close()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q.AdmitLeave()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				q.AdmitLeave()
			}
		})
	})
}
