package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// chatLanes returns q's session+global set.
func chatLanes(t *testing.T, q *lanequeue.Queue[string]) lanequeue.LaneSet[string] {
	t.Helper()
	ls, err := q.Lanes("session", "global")
	must(t, err)
	return ls
}

// placeWait waits for pl within the testkit deadline and fails t if no
// ticket comes.
func placeWait(t *testing.T, pl *lanequeue.Place[string], what string) *lanequeue.Ticket[string] {
	t.Helper()
	return testkit.Await(t, what, pl.Wait)
}

func join(t *testing.T, q *lanequeue.Queue[string], key string, ls lanequeue.LaneSet[string], opts ...semaphore.AcquireOption) *lanequeue.Place[string] {
	t.Helper()
	// Join must not wait: run it on its own goroutine with a deadline, so
	// that one that blocks (taking a lane it should leave for Wait) fails
	// with a message instead of hanging the test binary.
	type joined struct {
		pl  *lanequeue.Place[string]
		err error
	}
	ch := make(chan joined, 1)
	go func() {
		pl, err := q.Join(key, ls, opts...)
		ch <- joined{pl, err}
	}()
	j := testkit.Recv(t, ch, fmt.Sprintf("Join(%q) to return without waiting", key))
	if j.err != nil {
		t.Fatalf("Join(%q, %v): %v", key, ls, j.err)
	}
	return j.pl
}

// TestPlaceJoinThenWait: places of a busy thread stand in the session
// lane's line holding no global permit, so other threads take the global
// slots meanwhile; Wait then takes the global lane and returns a ticket of
// both lanes.
func TestPlaceJoinThenWait(t *testing.T) {
	q := testQueue(t, 2)
	chat := chatLanes(t, q)
	busy, err := q.AcquireAll(context.Background(), "alice", chat)
	must(t, err)
	second := join(t, q, "alice", chat)
	third := join(t, q, "alice", chat)
	if st := laneStats(t, q, "global"); st.Held != 1 {
		t.Fatalf("global held %d with two places in alice's line; want 1 (only the busy ticket)", st.Held)
	}
	if st := laneStats(t, q, "session"); st.Waiters != 2 {
		t.Fatalf("session waiters %d; want the 2 places", st.Waiters)
	}
	bob, ok := q.TryAcquireAll("bob", chat)
	if !ok {
		t.Fatal("bob could not take the second global slot beside alice's places")
	}
	if lanequeue.PlaceKey(second) != "alice" {
		t.Fatalf("Key() = %q", lanequeue.PlaceKey(second))
	}
	busy.Release()
	tk := placeWait(t, second, "second")
	if w, ok := lanequeue.TicketWeight(tk, "global"); !ok || w != 1 || lanequeue.TicketKey(tk) != "alice" {
		t.Fatalf("ticket of the place: global weight %d %v, key %q; want 1 on global for alice", w, ok, lanequeue.TicketKey(tk))
	}
	if hs := q.Holders(); len(hs) != 4 {
		t.Fatalf("Holders %v; want alice's and bob's tickets on both lanes", hs)
	}
	tk.Release()
	bob.Release()
	placeWait(t, third, "third").Release()
	assertNothingHeld(t, q)
}

// TestPlaceOwnershipQueue: a Place is used once: a second Wait, a Wait
// after Leave and a nil Place's Wait return ErrPlaceUsed and no ticket; a
// Leave after Wait keeps the ticket; Leave of a place whose turn came
// moves the line on.
func TestPlaceOwnershipQueue(t *testing.T) {
	q := testQueue(t, 4)
	chat := chatLanes(t, q)
	pl := join(t, q, "a", chat)
	tk := placeWait(t, pl, "first Wait")
	if tk2, err := pl.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) || tk2 != nil {
		t.Fatalf("second Wait: %v, %v; want ErrPlaceUsed and no ticket", tk2, err)
	}
	pl.Leave()
	if _, ok := q.TryAcquireAll("a", chat); ok {
		t.Fatal("Leave after Wait gave the ticket's lanes back")
	}
	next := join(t, q, "a", chat)
	after := join(t, q, "a", chat)
	if !tk.Release() {
		t.Fatal("the ticket of the waited place was not live")
	}
	// next's turn came; leaving it hands the session lane on to after.
	next.Leave()
	next.Leave()
	if _, err := next.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("Wait after Leave: %v; want ErrPlaceUsed", err)
	}
	placeWait(t, after, "the place after the one left").Release()
	var nilPlace *lanequeue.Place[string]
	if _, err := nilPlace.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("nil Place Wait: %v; want ErrPlaceUsed", err)
	}
	nilPlace.Leave()
	var zero lanequeue.Place[string]
	if _, err := zero.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("zero Place Wait: %v; want ErrPlaceUsed", err)
	}
	assertNothingHeld(t, q)
}

// TestPlaceWaitRollsBack: a Wait that got its turn on the session lane
// and then fails on the global lane (its context ends there) holds
// nothing: the session permit goes on to the next place of the thread.
func TestPlaceWaitRollsBack(t *testing.T) {
	q := testQueue(t, 1)
	chat := chatLanes(t, q)
	other, err := q.AcquireAll(context.Background(), "other", chat) // the one global slot
	must(t, err)
	first := join(t, q, "a", chat)
	second := join(t, q, "a", chat)
	ctx, cancel := context.WithCancel(context.Background())
	done := testkit.Go(func() error { _, err := first.Wait(ctx); return err })
	testkit.Eventually(t, "first to wait on the global lane", func() bool { return laneStats(t, q, "global").Waiters == 1 })
	cancel()
	if err := testkit.Recv(t, done, "the cancelled Wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled on the global lane: %v; want context.Canceled", err)
	}
	other.Release()
	placeWait(t, second, "second, after first rolled back").Release()
	assertNothingHeld(t, q)
}

// TestPlaceEndedContextWins: a place whose turn came before its Wait,
// waited for with a context that has ended, gives the turn on.
func TestPlaceEndedContextWins(t *testing.T) {
	q := testQueue(t, 4)
	chat := chatLanes(t, q)
	first := join(t, q, "a", chat) // its turn at once
	second := join(t, q, "a", chat)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tk, err := first.Wait(ctx); err != context.Canceled || tk != nil {
		t.Fatalf("Wait with an ended context: %v, %v; want context.Canceled", tk, err)
	}
	placeWait(t, second, "second").Release()
	assertNothingHeld(t, q)
}

// TestPlaceJoinRefusals: Join refuses what AcquireAll refuses at once, a
// set without a keyed lane, and a first keyed lane of another package
// (naming it); Wait refuses a re-entrant call and gives the place up; a
// closed queue fails the places in line with ErrClosed.
func TestPlaceJoinRefusals(t *testing.T) {
	q := testQueue(t, 4)
	must(t, q.Add("a-redis", &blindLane{kind: lanequeue.Keyed})) // sorts before "session"
	globalOnly, err := q.Lanes("global")
	must(t, err)
	if _, err := q.Join("k", globalOnly); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Join of a set with no keyed lane: %v; want ErrNoSemaphore", err)
	}
	foreign, err := q.Lanes("a-redis", "session", "global")
	must(t, err)
	if _, err := q.Join("k", foreign); !errors.Is(err, semaphore.ErrInvalidConfig) || !strings.Contains(err.Error(), `"a-redis"`) {
		t.Fatalf("Join with a foreign keyed lane first: %v; want ErrNoSemaphore naming the lane", err)
	}
	chat := chatLanes(t, q)
	if _, err := q.Join("k", chat, semaphore.Weight(2)); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Join of weight 2 on a per-key capacity of 1: %v; want ErrTooHeavy", err)
	}
	if _, err := q.Join("k", lanequeue.LaneSet[string]{}); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Join of the zero set: %v; want ErrNoLanes", err)
	}

	held, err := q.AcquireAll(context.Background(), "k", chat)
	must(t, err)
	again := join(t, q, "k", chat)
	if _, err := again.Wait(lanequeue.WithTicket(context.Background(), held)); !errors.Is(err, lanequeue.ErrReentrant) {
		t.Fatalf("Wait with the key's ticket in ctx: %v; want ErrReentrant", err)
	}
	if st := laneStats(t, q, "session"); st.Waiters != 0 {
		t.Fatalf("the re-entrant place still waits (%d waiters)", st.Waiters)
	}
	inLine := join(t, q, "k", chat)
	q.Close()
	if _, err := inLine.Wait(context.Background()); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Wait of a place in line at Close: %v; want ErrClosed", err)
	}
	if _, err := q.Join("k", chat); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Join after Close: %v; want ErrClosed", err)
	}
	held.Release()
}

// TestPlaceQueueRace races webhooks that Join for a few threads, in order
// per thread, with workers that Wait (some with contexts that end), Leave
// or race a Leave against their Wait, under session + global lanes, 1000
// rounds. It checks that the global lane never holds more than its
// capacity, that a thread never has two tickets at once, that the tickets
// of a thread are granted in the order its places were joined, and that
// nothing is held or waiting after each round.
func TestPlaceQueueRace(t *testing.T) {
	const global = 2
	q := testQueue(t, global)
	chat := chatLanes(t, q)
	racePlaceThreads(t, q, global, 3, "the order joined", func(key string, _ *rand.Rand, place func(*lanequeue.Place[string], int64)) error {
		for m := range 3 { // Join in order, answer, hand over
			pl, err := q.Join(key, chat)
			if err != nil {
				return err
			}
			place(pl, int64(m))
		}
		return nil
	})
}

// racePlaceThreads runs the rounds of a place race on q: the webhooks of
// threads threads run at once, each hook joining its thread's places
// (key "thread-N", rng its own) and handing each to place with a label;
// a worker per place ends it as testkit.RacePlace does and holds its
// ticket. It checks that the global lane never holds more than global,
// that a thread never has two tickets at once, that a thread's tickets are
// granted in ascending label (order names that order), and that nothing
// is held or waiting after each round.
func racePlaceThreads(t *testing.T, q *lanequeue.Queue[string], global int64, threads int, order string,
	hook func(key string, rng *rand.Rand, place func(pl *lanequeue.Place[string], label int64)) error) {
	t.Helper()
	var inGlobal atomic.Int64
	var bad atomic.Value // string
	for round := range testkit.Rounds() {
		var mu sync.Mutex
		granted := make([][]int64, threads) // per thread, the labels granted
		inThread := make([]atomic.Int64, threads)
		var workers sync.WaitGroup
		hooks := make([]func(), threads)
		for th := range threads {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(th)))
			place := func(pl *lanequeue.Place[string], label int64) {
				mode := rng.IntN(4)
				workers.Add(1)
				go func() {
					defer workers.Done()
					tk, ok, err := testkit.RacePlace(mode, pl.Wait, pl.Leave, semaphore.ErrPlaceUsed)
					if err != nil {
						bad.Store(err.Error())
					}
					if !ok {
						return
					}
					if inGlobal.Add(1) > global {
						bad.Store("global over capacity")
					}
					if inThread[th].Add(1) > 1 {
						bad.Store("two tickets of one thread at once")
					}
					mu.Lock()
					granted[th] = append(granted[th], label)
					mu.Unlock()
					inThread[th].Add(-1)
					inGlobal.Add(-1)
					tk.Release()
				}()
			}
			hooks[th] = func() {
				if err := hook(fmt.Sprint("thread-", th), rng, place); err != nil {
					bad.Store("the webhook: " + err.Error())
				}
			}
		}
		testkit.Storm(t, "the webhooks", hooks...)
		testkit.WaitAll(t, &workers, "the workers")
		if v := bad.Load(); v != nil {
			t.Fatalf("round %d: %s", round, v)
		}
		for th, got := range granted {
			if !slices.IsSorted(got) {
				t.Fatalf("round %d: thread %d granted %v; want %s", round, th, got, order)
			}
		}
		// A racing Leave that lost runs on after its worker returned.
		testkit.Eventually(t, "the lanes to empty", func() bool {
			for _, st := range q.Stats() {
				if st.Held != 0 || st.Waiters != 0 {
					return false
				}
			}
			return true
		})
	}
	assertNothingHeld(t, q)
}

// TestPlaceOrderQueue: places of one thread joined 1..N get their tickets
// 1..N, though their Waits are called N..1, each after the one before it
// has queued (were Wait the one to queue).
func TestPlaceOrderQueue(t *testing.T) {
	const n = 8
	q := testQueue(t, 4)
	chat := chatLanes(t, q)
	places := make([]*lanequeue.Place[string], n+1)
	for i := 1; i <= n; i++ {
		places[i] = join(t, q, "thread", chat)
	}
	testkit.ServedInJoinOrder(t, n, func() int { return laneStats(t, q, "session").Waiters },
		func(ctx context.Context, i int) (*lanequeue.Ticket[string], error) { return places[i].Wait(ctx) })
	assertNothingHeld(t, q)
}

// TestPlaceListedOnlyOnceWaitHasItsKeyedLane pins what the docs of
// Place, Holders, Waiters and LineLen say: a place standing in its keyed
// lane's line, or whose turn has come, counts in the lane's Stats but is
// not in the queue's lists; once its Wait has the keyed lane and waits for
// a later one, it is listed as a call of AcquireAll is. (Holders' doc
// said that every permit out through the queue was listed.)
func TestPlaceListedOnlyOnceWaitHasItsKeyedLane(t *testing.T) {
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	set := chatLanes(t, q)
	first, err := q.Join("a", set) // its turn comes at once
	must(t, err)
	defer first.Leave()
	second, err := q.Join("a", set) // in line behind it
	must(t, err)
	defer second.Leave()
	if st := laneStats(t, q, "session"); st.Held != 1 || st.Waiters != 1 {
		t.Fatalf("session Held %d, Waiters %d; want 1 and 1", st.Held, st.Waiters)
	}
	if hs := q.Holders(); len(hs) != 0 {
		t.Errorf("Holders() = %v with the turn of a place not waited for; want none (documented)", hs)
	}
	if ws := q.Waiters(); len(ws) != 0 {
		t.Errorf("Waiters() = %v with a place in line; want none (documented)", ws)
	}
	if n := lineLen(q, "session", "a"); n != 0 {
		t.Errorf("LineLen(session, a) = %d with a place in line; want 0 (documented)", n)
	}

	// The global lane is full: the first place's Wait has its keyed lane
	// and waits there, listed.
	other, err := acquireAll(q, context.Background(), "z", []string{"global"})
	must(t, err)
	got := testkit.Go(func() error {
		tk, err := first.Wait(context.Background())
		if err == nil {
			tk.Release()
		}
		return err
	})
	testkit.Eventually(t, "Wait listed for global", func() bool { return lineLen(q, "global", "") == 1 })
	want := []lanequeue.Holder[string]{{Lane: "global", Kind: lanequeue.Global, Key: "z", Weight: 1}, {Lane: "session", Kind: lanequeue.Keyed, Key: "a", Weight: 1, Waiting: true}}
	hs := q.Holders()
	for i := range hs {
		hs[i].Since = time.Time{}
	}
	slices.SortFunc(hs, func(x, y lanequeue.Holder[string]) int { return strings.Compare(x.Lane, y.Lane) })
	if !slices.Equal(hs, want) {
		t.Errorf("Holders() = %v while the place's Wait waits for global; want %v", hs, want)
	}
	other.Release()
	must(t, testkit.Recv(t, got, "Wait"))
}
