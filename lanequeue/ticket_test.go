package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestReentrantAcquireFails: inside Do, acquiring again for the same key
// and a lane the ticket holds fails at once with ErrReentrant instead of
// waiting for itself; other keys and other lanes are fine.
func TestReentrantAcquireFails(t *testing.T) {
	q := testQueue(t, 4)
	must(t, addGlobal(q, "tools", 2))
	err := doAll(q, context.Background(), "thread-1", []string{"session", "global"}, func(ctx context.Context) error {
		if _, err := acquireAll(q, ctx, "thread-1", []string{"session"}); !errors.Is(err, lanequeue.ErrReentrant) {
			return fmt.Errorf("same key, same lane: %v; want ErrReentrant", err)
		}
		// Nested Do, in a derived context.
		sub, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := doAll(q, sub, "thread-1", []string{"global", "tools"}, func(context.Context) error { return nil }); !errors.Is(err, lanequeue.ErrReentrant) {
			return fmt.Errorf("nested Do on the global lane: %v; want ErrReentrant", err)
		}
		// Another key may take the same lanes; the same key other lanes.
		if err := doAll(q, ctx, "thread-2", []string{"session", "global"}, func(context.Context) error { return nil }); err != nil {
			return fmt.Errorf("other key: %v", err)
		}
		return doAll(q, ctx, "thread-1", []string{"tools", "rate"}, func(ctx context.Context) error {
			// Two tickets in the chain: both are checked.
			if _, err := acquireAll(q, ctx, "thread-1", []string{"tools"}); !errors.Is(err, lanequeue.ErrReentrant) {
				return fmt.Errorf("inner ticket's lane: %v; want ErrReentrant", err)
			}
			if _, err := acquireAll(q, ctx, "thread-1", []string{"session"}); !errors.Is(err, lanequeue.ErrReentrant) {
				return fmt.Errorf("outer ticket's lane: %v; want ErrReentrant", err)
			}
			return nil
		})
	})
	must(t, err)
	assertNothingHeld(t, q)

	t.Run("released ticket in the context", func(t *testing.T) {
		tk, err := acquireAll(q, context.Background(), "k", []string{"session"})
		must(t, err)
		ctx := lanequeue.WithTicket(context.Background(), tk)
		if got, ok := lanequeue.TicketFrom[string](ctx); !ok || got != tk {
			t.Fatal("TicketFrom does not return the ticket")
		}
		tk.Release()
		again, err := acquireAll(q, ctx, "k", []string{"session"})
		if err != nil {
			t.Fatalf("AcquireAll with a released ticket in the context = %v", err)
		}
		again.Release()
	})
}

// TestTicketReleaseOnce: the first Release returns true and frees every
// permit; later ones, from any goroutine, return false and free nothing
// (the lanes count no double release).
func TestTicketReleaseOnce(t *testing.T) {
	sem := semaphore.New(3)
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](sem)))
	must(t, addKeyed(q, "session"))
	for range 100 {
		tk, err := acquireAll(q, context.Background(), "k", []string{"session", "global"})
		must(t, err)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if tk.Release() {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d concurrent Releases returned true; want exactly 1", wins.Load())
		}
		if tk.Release() {
			t.Fatal("Release after release returned true")
		}
		if !lanequeue.TicketReleased(tk) {
			t.Fatal("Released() false after Release")
		}
	}
	st := sem.Stats()
	if st.Held != 0 || st.DoubleReleases != 0 || st.Acquired != 100 || st.Released != 100 {
		t.Fatalf("semaphore %+v; want 100 acquired and released once each", st)
	}
	assertNothingHeld(t, q)
}

// TestTicketHandedToWorker: a ticket acquired by one goroutine is released
// by another, and keeps the per-key exclusion in the meantime.
func TestTicketHandedToWorker(t *testing.T) {
	q := testQueue(t, 8)
	tickets := make(chan *lanequeue.Ticket[string])
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the worker
		defer wg.Done()
		for tk := range tickets {
			if _, ok := tryAcquireAll(q, lanequeue.TicketKey(tk), []string{"session"}); ok {
				t.Error("key free while its ticket is with the worker")
			}
			tk.Release()
		}
	}()
	for i := range 50 {
		tk, err := acquireAll(q, context.Background(), fmt.Sprint("thread-", i%3), []string{"session", "global"})
		must(t, err)
		tickets <- tk
	}
	close(tickets)
	wg.Wait()
	assertNothingHeld(t, q)
}

// TestDoReleasesOnPanic: Do gives the lanes back when fn panics, and the
// panic goes on.
func TestDoReleasesOnPanic(t *testing.T) {
	q := testQueue(t, 1)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v; want the panic of fn", r)
			}
		}()
		_ = doAll(q, context.Background(), "k", []string{"session", "global"}, func(context.Context) error { panic("boom") })
	}()
	assertNothingHeld(t, q)
	want := errors.New("work failed")
	if err := doAll(q, context.Background(), "k", []string{"session", "global"}, func(context.Context) error { return want }); err != want {
		t.Fatalf("Do = %v; want fn's error", err)
	}
	assertNothingHeld(t, q)
}

// TestDoNilFnPanics: a nil fn panics with a message naming the package
// before any lane is taken, as semaphore's and keyedsem's Do do, not with a
// nil dereference while the lanes are held.
func TestDoNilFnPanics(t *testing.T) {
	q := testQueue(t, 1)
	if r := panics(func() { _ = doAll(q, context.Background(), "k", []string{"session", "global"}, nil) }); r != "lanequeue: Do with a nil fn" {
		t.Fatalf("recovered %v; want lanequeue's message", r)
	}
	assertNothingHeld(t, q)
	for _, st := range q.Stats() {
		if st.Acquired != 0 {
			t.Fatalf("lane %s granted %d for a nil fn", st.Name, st.Acquired)
		}
	}
}

// TestHolders lists what is held, with lane, key, per-lane weight and
// time, oldest first; released tickets drop out; rate lanes are not listed.
func TestHolders(t *testing.T) {
	q := testQueue(t, 8)
	first, err := acquireAll(q, context.Background(), "thread-1", []string{"global", "session"}, lanequeue.LaneWeight("global", 3))
	must(t, err)
	second, err := acquireAll(q, context.Background(), "thread-2", []string{"session", "global", "rate"}, lanequeue.LaneWeight("session", 1), semaphore.Weight(1))
	must(t, err)
	hs := q.Holders()
	type row struct {
		lane, key string
		weight    int64
	}
	var got []row
	for _, h := range hs {
		got = append(got, row{h.Lane, h.Key, h.Weight})
		if h.Since.IsZero() {
			t.Errorf("holder %+v has no time", h)
		}
	}
	for i := 1; i < len(hs); i++ {
		if hs[i].Since.Before(hs[i-1].Since) {
			t.Errorf("Holders not oldest first: %v", hs)
		}
	}
	slices.SortFunc(got, func(a, b row) int {
		if a.key != b.key {
			return map[bool]int{true: -1, false: 1}[a.key < b.key]
		}
		return map[bool]int{true: -1, false: 1}[a.lane > b.lane]
	})
	want := []row{{"session", "thread-1", 1}, {"global", "thread-1", 3}, {"session", "thread-2", 1}, {"global", "thread-2", 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("Holders() = %v; want %v", got, want)
	}
	if w, ok := lanequeue.TicketWeight(first, "global"); !ok || w != 3 {
		t.Fatalf("LaneWeight(global) = %d, %v; want 3", w, ok)
	}
	first.Release()
	if hs := q.Holders(); len(hs) != 2 || hs[0].Key != "thread-2" {
		t.Fatalf("Holders() after a release = %v; want thread-2's two lanes", hs)
	}
	second.Release()
	assertNothingHeld(t, q)
}

// TestTicketLayout pins the layout that keeps AcquireAll cheap: on 64-bit
// platforms a *Ticket is a handle of one pointer, carved from 512-byte
// blocks (the largest size the runtime allocates without a header) of 64
// handles, and a record holds four lanes inline. The bytes an AcquireAll
// allocates set how often the GC runs, which, with the allocation itself,
// was most of AcquireAll's cost beyond the lanes' own (see
// BenchmarkAcquireRatio): growing the handle grows both. A stripe of the
// list of records fills one cache line, so that goroutines on different
// stripes do not share a line.
func TestTicketLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout pinned on 64-bit platforms")
	}
	if lanequeue.StripeSize != 64 {
		t.Fatalf("a stripe is %d bytes; want one 64-byte cache line", lanequeue.StripeSize)
	}
	if lanequeue.TicketSize != 8 || lanequeue.HandlesPerBlock != 64 || lanequeue.InlineLanes != 4 {
		t.Fatalf("Ticket[string] is %d bytes, %d to a block, with %d inline lanes; want 8, 64 and 4",
			lanequeue.TicketSize, lanequeue.HandlesPerBlock, lanequeue.InlineLanes)
	}
}

// TestStaleTicketCannotReleaseTheNextOne: once released, a ticket's record
// goes to the next grant, here the same goroutine's next AcquireAll. The
// stale ticket's Release returns false and leaves the new ticket's permits
// alone, and its methods answer as the zero Ticket's do, while the new
// ticket answers for itself.
func TestStaleTicketCannotReleaseTheNextOne(t *testing.T) {
	q := testQueue(t, 4)
	ctx := context.Background()
	var old, cur *lanequeue.Ticket[string]
	// The record comes back to the goroutine that released it unless its
	// stack moved in between; try a few times.
	for range 10 {
		var err error
		old, err = acquireAll(q, ctx, "chat-1", []string{"session", "global"})
		must(t, err)
		if !old.Release() {
			t.Fatal("first Release returned false")
		}
		cur, err = acquireAll(q, ctx, "chat-2", []string{"global", "session"}, lanequeue.LaneWeight("global", 2))
		must(t, err)
		if lanequeue.SameRecord(old, cur) {
			break
		}
		cur.Release()
		cur = nil
	}
	if cur == nil {
		t.Fatal("a released record was never reused by the next grant")
	}
	if old.Release() || !lanequeue.TicketReleased(old) {
		t.Fatal("stale ticket: Release returned true or Released false")
	}
	if laneStats(t, q, "global").Held != 2 {
		t.Fatalf("global lane holds %d after a stale Release; want the new ticket's 2", laneStats(t, q, "global").Held)
	}
	if _, ok := tryAcquireAll(q, "chat-2", []string{"session"}); ok {
		t.Fatal("chat-2's session lane is free after a stale Release")
	}
	if k, l := lanequeue.TicketKey(old), lanequeue.TicketLanes(old); k != "" || l != nil {
		t.Fatalf("stale ticket: Key %q, Lanes %v; want the zero Ticket's", k, l)
	}
	if w, ok := lanequeue.TicketWeight(old, "global"); ok || w != 0 || !lanequeue.TicketSince(old).IsZero() {
		t.Fatalf("stale ticket: LaneWeight %d, %v, Since %v; want the zero Ticket's", w, ok, lanequeue.TicketSince(old))
	}
	if lanequeue.TicketReleased(cur) || lanequeue.TicketKey(cur) != "chat-2" || func() bool { w, ok := lanequeue.TicketWeight(cur, "session"); return !ok || w != 1 }() || !slices.Equal(lanequeue.TicketLanes(cur), []string{"session", "global"}) {
		t.Fatalf("new ticket: Released %v, Key %q, Lanes %v", lanequeue.TicketReleased(cur), lanequeue.TicketKey(cur), lanequeue.TicketLanes(cur))
	}
	if w, ok := lanequeue.TicketWeight(cur, "global"); !ok || w != 2 || lanequeue.TicketSince(cur).IsZero() {
		t.Fatalf("new ticket: LaneWeight(global) %d, %v, Since %v", w, ok, lanequeue.TicketSince(cur))
	}
	if hs := q.Holders(); len(hs) != 2 || hs[0].Key != "chat-2" || hs[1].Key != "chat-2" {
		t.Fatalf("Holders() = %v; want chat-2's two lanes", hs)
	}
	if !cur.Release() {
		t.Fatal("new ticket: Release returned false")
	}
	assertNothingHeld(t, q)
}

// TestZeroTicketHoldsNothing: the zero Ticket is released and holds
// nothing.
func TestZeroTicketHoldsNothing(t *testing.T) {
	var z lanequeue.Ticket[string]
	if z.Release() || !lanequeue.TicketReleased(&z) || lanequeue.TicketKey(&z) != "" || lanequeue.TicketLanes(&z) != nil || !lanequeue.TicketSince(&z).IsZero() {
		t.Fatal("the zero Ticket holds something")
	}
	if _, ok := lanequeue.TicketWeight(&z, "global"); ok {
		t.Fatal("the zero Ticket has a lane")
	}
	q := testQueue(t, 1)
	ctx := lanequeue.WithTicket(context.Background(), &z)
	tk, err := acquireAll(q, ctx, "", []string{"session", "global"})
	must(t, err) // the zero Ticket holds no lane, so this is no re-entry
	tk.Release()
}

// TestNilTicketAfterAFailedCall: AcquireAll returns a nil *Ticket with its
// error, and a Release deferred before the error check must not panic: a
// nil ticket answers as a released one.
func TestNilTicketAfterAFailedCall(t *testing.T) {
	q := testQueue(t, 1)
	tk, err := acquireAll(q, context.Background(), "k", []string{"no-such-lane"})
	defer tk.Release()
	if !errors.Is(err, semaphore.ErrInvalidConfig) || tk != nil {
		t.Fatalf("AcquireAll of an unknown lane: %v, %v; want ErrUnknownLane and a nil ticket", tk, err)
	}
	if tk.Release() || !lanequeue.TicketReleased(tk) || lanequeue.TicketKey(tk) != "" || lanequeue.TicketLanes(tk) != nil || !lanequeue.TicketSince(tk).IsZero() {
		t.Fatal("a nil ticket does not answer as a released one")
	}
	if _, ok := lanequeue.TicketWeight(tk, "global"); ok {
		t.Fatal("a nil ticket has a lane")
	}
}

// TestRecordsAfterABurst: a goroutine that holds many tickets at once
// gets a record each; once they are released, the queue keeps at most
// MaxFree free records per stripe, Holders lists none of them, and their
// tickets stay released.
func TestRecordsAfterABurst(t *testing.T) {
	q := testQueue(t, 1000)
	const n = 40 * lanequeue.MaxFree // more than all 32 stripes keep
	tickets := make([]*lanequeue.Ticket[string], n)
	for i := range tickets {
		tk, err := acquireAll(q, context.Background(), fmt.Sprint("chat-", i), []string{"session", "global"})
		must(t, err)
		tickets[i] = tk
	}
	if hs := q.Holders(); len(hs) != 2*n {
		t.Fatalf("Holders() lists %d lanes; want %d", len(hs), 2*n)
	}
	if all, _ := q.Records(); all < n {
		t.Fatalf("%d records for %d tickets held at once", all, n)
	}
	for _, tk := range tickets {
		if !tk.Release() {
			t.Fatal("first Release returned false")
		}
	}
	all, free := q.Records()
	if all != free || free > 32*lanequeue.MaxFree {
		t.Fatalf("after the burst: %d records, %d free; want all free, at most %d", all, free, 32*lanequeue.MaxFree)
	}
	for _, tk := range tickets {
		if tk.Release() || !lanequeue.TicketReleased(tk) || lanequeue.TicketKey(tk) != "" {
			t.Fatal("a released ticket of the burst is live again")
		}
	}
	assertNothingHeld(t, q)
}

// TestStaleReleasesUnderChurn: goroutines acquire and release while
// another calls Release and the accessors on tickets already released,
// whose records are being reused meanwhile. No stale Release wins, no
// permit is released twice, and nothing is held at the end (run with
// -race: the accessors and Holders read records that grants rewrite).
func TestStaleReleasesUnderChurn(t *testing.T) {
	sem := semaphore.New(8)
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addKeyed(q, "session"))
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](sem)))
	const workers, rounds = 4, 500
	released := make(chan *lanequeue.Ticket[string], workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				tk, err := acquireAll(q, context.Background(), fmt.Sprint("chat-", (w+i)%6), []string{"session", "global"})
				if err != nil {
					t.Error(err)
					return
				}
				tk.Release()
				released <- tk
			}
		}()
	}
	stale := make(chan int)
	go func() {
		wins := 0
		for tk := range released {
			if tk.Release() {
				wins++
			}
			if lanequeue.TicketKey(tk) != "" || lanequeue.TicketLanes(tk) != nil || !lanequeue.TicketReleased(tk) {
				wins++
			}
			_ = q.Holders()
		}
		stale <- wins
	}()
	wg.Wait()
	close(released)
	if wins := <-stale; wins != 0 {
		t.Fatalf("%d stale tickets released something or still answered", wins)
	}
	if st := sem.Stats(); st.DoubleReleases != 0 || st.Held != 0 || st.Acquired != workers*rounds {
		t.Fatalf("semaphore %+v; want %d grants, each released once", st, workers*rounds)
	}
	assertNothingHeld(t, q)
}

// TestReentrantGlobalLaneWithoutRoom: a nested AcquireAll for another key
// on a global lane the context's ticket holds waits for itself when the
// lane's capacity cannot hold both: it fails at once with ErrReentrant
// (an HTTP handler's outbound call on the lane its request holds waited
// out its deadline). With room for both, it nests.
func TestReentrantGlobalLaneWithoutRoom(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addGlobal(q, "one", 1))
	must(t, addGlobal(q, "two", 2))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	err := doAll(q, ctx, "inbound", []string{"one", "two"}, func(ctx context.Context) error {
		if _, err := acquireAll(q, ctx, "outbound", []string{"one"}); !errors.Is(err, lanequeue.ErrReentrant) {
			return fmt.Errorf("another key on a lane of capacity 1 the context holds: %v; want ErrReentrant", err)
		}
		if _, err := acquireAll(q, ctx, "outbound", []string{"two"}, lanequeue.LaneWeight("two", 2)); !errors.Is(err, lanequeue.ErrReentrant) {
			return fmt.Errorf("another key asking 2 of a capacity of 2, 1 held by the context: %v; want ErrReentrant", err)
		}
		tk, err := acquireAll(q, ctx, "outbound", []string{"two"})
		if err != nil {
			return fmt.Errorf("another key asking 1 of a capacity of 2, 1 held: %v; want a grant", err)
		}
		tk.Release()
		return nil
	})
	must(t, err)
	assertNothingHeld(t, q)
}
