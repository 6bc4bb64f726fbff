package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// waitPlaces waits for each place from a goroutine of its own (in the
// order given, which need not be the order of service) and returns the
// labels in the order their tickets were granted: each worker reports
// before it releases, and the lanes let one ticket through at a time.
func waitPlaces(t *testing.T, release func(), labels []string, places []*lanequeue.Place[string], queued func(i int) bool) []string {
	t.Helper()
	out := make(chan string, len(places))
	var wg sync.WaitGroup // the tickets back, so the caller may check nothing is held
	for i, pl := range places {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
			defer cancel()
			tk, err := pl.Wait(ctx)
			if err != nil {
				out <- labels[i] + ": " + err.Error()
				return
			}
			out <- labels[i]
			tk.Release()
		}()
		if queued != nil {
			testkit.Eventually(t, labels[i]+"'s Wait to queue", func() bool { return queued(i) })
		}
	}
	release()
	got := make([]string, len(places))
	for i := range got {
		got[i] = testkit.Recv(t, out, fmt.Sprintf("ticket %d of %d (so far %v)", i+1, len(places), got[:i]))
	}
	testkit.WaitAll(t, &wg, "the tickets to be released")
	return got
}

// TestPlaceJoinInSequence is the webhook's case: a thread's messages reach
// the server out of order (4, 2, 5, 3 while message 1 runs) and the
// webhook joins each with its sequence number at once; on a session lane
// made keyedsem.WithSequenceOrder their tickets are granted 2, 3, 4, 5,
// whatever order the workers wait in.
func TestPlaceJoinInSequence(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", 8))
	chat := chatLanes(t, q)
	running, err := q.AcquireAll(context.Background(), "thread-1", chat, semaphore.Sequence(1))
	must(t, err)
	var labels []string
	var places []*lanequeue.Place[string]
	for _, seq := range []int64{4, 2, 5, 3} {
		labels = append(labels, fmt.Sprint(seq))
		places = append(places, join(t, q, "thread-1", chat, semaphore.Sequence(seq)))
	}
	if st := laneStats(t, q, "session"); st.Waiters != 4 {
		t.Fatalf("session lane: %d waiters; want the 4 places", st.Waiters)
	}
	if got, want := fmt.Sprint(waitPlaces(t, func() { running.Release() }, labels, places, nil)), "[2 3 4 5]"; got != want {
		t.Fatalf("places granted %s; want %s", got, want)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}

// TestPlaceTurnReachesTheLanesWaitTakes: a place's options reach the
// lanes Wait takes after the keyed lane: a global lane made
// semaphore.WithPriorities serves the Wait of a priority-2 place before
// that of an earlier plain one, and a fair lane serves a place in its
// WithGroup.
func TestPlaceTurnReachesTheLanesWaitTakes(t *testing.T) {
	q, _, running := priorityQueue(t, time.Minute)
	chat := chatLanes(t, q)
	// Their threads are free: both places hold their session lane at once
	// and their Waits queue on the global lane, plain first.
	plain := join(t, q, "thread-a", chat)
	urgent := join(t, q, "thread-b", chat, semaphore.Priority(2))
	onGlobal := func(i int) bool { return laneStats(t, q, "global").Waiters == i+1 }
	got := waitPlaces(t, func() { running.Release() }, []string{"plain", "urgent"}, []*lanequeue.Place[string]{plain, urgent}, onGlobal)
	if fmt.Sprint(got) != "[urgent plain]" {
		t.Fatalf("Waits served %v on the priority lane; want [urgent plain]", got)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)

	fq := lanequeue.New[string]()
	t.Cleanup(fq.Close)
	must(t, addKeyed(fq, "session"))
	must(t, addFair(fq, "global", 1, tenantOf))
	fchat := chatLanes(t, fq)
	hold, err := fq.AcquireAll(context.Background(), "a/0", fchat)
	must(t, err)
	var places []*lanequeue.Place[string]
	for _, key := range []string{"a/1", "a/2"} {
		places = append(places, join(t, fq, key, fchat))
	}
	places = append(places, join(t, fq, "a/3", fchat, semaphore.Group("b")))
	onFair := func(i int) bool { return laneStats(t, fq, "global").Waiters == i+1 }
	got = waitPlaces(t, func() { hold.Release() }, []string{"a/1", "a/2", "a/3 as b"}, places, onFair)
	if fmt.Sprint(got) != "[a/1 a/3 as b a/2]" {
		t.Fatalf("Waits served %v on the fair lane; want [a/1 a/3 as b a/2]", got)
	}
	assertNoneRejected(t, fq)
	assertNothingHeld(t, fq)
}

// TestPlaceTurnOwnership: a place with a turn keeps the rules of every
// place: leaving it in line moves the line on, it is used once, and a
// WithPriority out of range fails Join with ErrInvalidConfig, taking
// nothing; turn options on a FIFO session lane leave it FIFO.
func TestPlaceTurnOwnership(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", 8))
	chat := chatLanes(t, q)
	running, err := q.AcquireAll(context.Background(), "thread", chat)
	must(t, err)
	three := join(t, q, "thread", chat, semaphore.Sequence(3))
	one := join(t, q, "thread", chat, semaphore.Sequence(1))
	two := join(t, q, "thread", chat, semaphore.Sequence(2))
	one.Leave()
	one.Leave()
	if _, err := one.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("Wait after Leave: %v; want ErrPlaceUsed", err)
	}
	for _, p := range []int{call.MaxPriority + 1, -call.MaxPriority - 1} {
		if _, err := q.Join("thread", chat, semaphore.Priority(p)); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Fatalf("Join(WithPriority(%d)): %v; want ErrInvalidConfig", p, err)
		}
	}
	if st := laneStats(t, q, "session"); st.Waiters != 2 || st.Cancelled != 1 {
		t.Fatalf("session lane: %d waiters, %+v; want the two places left and one cancelled", st.Waiters, st.Counters)
	}
	if got := fmt.Sprint(waitPlaces(t, func() { running.Release() }, []string{"3", "2"}, []*lanequeue.Place[string]{three, two}, nil)); got != "[2 3]" {
		t.Fatalf("places granted %s; want [2 3]", got)
	}

	fifo := testQueue(t, 4)
	fchat := chatLanes(t, fifo)
	running, err = fifo.AcquireAll(context.Background(), "thread", fchat)
	must(t, err)
	later := join(t, fifo, "thread", fchat, semaphore.Sequence(9), semaphore.Priority(3))
	sooner := join(t, fifo, "thread", fchat, semaphore.Sequence(1), semaphore.Group("g"))
	if got := fmt.Sprint(waitPlaces(t, func() { running.Release() }, []string{"sooner", "later"}, []*lanequeue.Place[string]{sooner, later}, nil)); got != "[later sooner]" {
		t.Fatalf("places on FIFO lanes granted %s; want the order joined, [later sooner]", got)
	}
	assertNoneRejected(t, fifo)
	assertNothingHeld(t, fifo)
	assertNothingHeld(t, q)
}

// TestPlaceTurnQueueRace races webhooks that each hold their thread while
// they join its messages in a random order of sequence numbers, then let
// go, with workers that Wait (some with contexts that end), Leave or race
// a Leave against their Wait, on a session lane made WithSequenceOrder
// and a global lane of 2, 1000 rounds. It checks that the global lane
// never holds more than its capacity, that a thread never has two tickets
// at once, that a thread's tickets are granted in ascending sequence (its
// places all stood in line together), and that nothing is held or waiting
// after each round.
func TestPlaceTurnQueueRace(t *testing.T) {
	const global = 2
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", global))
	chat := chatLanes(t, q)
	session, err := q.Lanes("session")
	must(t, err)
	racePlaceThreads(t, q, global, 3, "ascending sequences (a thread's places all stood in line together)", func(key string, rng *rand.Rand, place func(*lanequeue.Place[string], int64)) error {
		gate, err := q.AcquireAll(context.Background(), key, session)
		if err != nil {
			return err
		}
		defer gate.Release()
		for _, m := range rng.Perm(4) {
			seq := int64(m + 1)
			pl, err := q.Join(key, chat, semaphore.Sequence(seq))
			if err != nil {
				return err
			}
			place(pl, seq)
		}
		return nil
	})
}

// TestPlaceTurnAllocatesNoMore: Join with turn options, Wait and Release
// allocate what they do without them (the Place), on ordered lanes.
func TestPlaceTurnAllocatesNoMore(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", 4, semaphore.WithPriorities(time.Second)))
	chat := chatLanes(t, q)
	ctx := context.Background()
	holder, err := q.AcquireAll(ctx, "thread", chat)
	must(t, err)
	run := func(opts ...semaphore.AcquireOption) float64 {
		return testing.AllocsPerRun(640, func() {
			pl, err := q.Join("thread", chat, opts...)
			if err != nil {
				t.Fatal(err)
			}
			holder.Release() // the place's turn comes
			tk, err := pl.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holder = tk
		})
	}
	plain := run()
	turned := run(semaphore.Sequence(7), semaphore.Priority(1), semaphore.Group("g"))
	holder.Release()
	if turned != plain || plain > 1 {
		t.Fatalf("Join in line+Wait+Release: %.2f allocs with turn options, %.2f without; want the same, at most the Place", turned, plain)
	}
}
