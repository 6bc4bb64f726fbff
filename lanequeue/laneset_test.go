package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestLaneSetCalls: a prepared set serves AcquireAll, TryAcquireAll, Do
// and Check, again and again, and names its lanes in canonical order
// whatever order they were given in.
func TestLaneSetCalls(t *testing.T) {
	q := testQueue(t, 4)
	ls, err := q.Lanes("global", "session")
	must(t, err)
	if got := ls.Names(); !slices.Equal(got, []string{"session", "global"}) {
		t.Fatalf("Names() = %v; want [session global]", got)
	}
	ctx := context.Background()
	for i := range 3 {
		tk, err := q.AcquireAll(ctx, "chat-1", ls, lanequeue.LaneWeight("global", 2))
		must(t, err)
		if w, ok := lanequeue.TicketWeight(tk, "global"); !ok || w != 2 || !slices.Equal(lanequeue.TicketLanes(tk), []string{"session", "global"}) {
			t.Fatalf("round %d: ticket lanes %v, global weight %d %v", i, lanequeue.TicketLanes(tk), w, ok)
		}
		if _, ok := q.TryAcquireAll("chat-1", ls); ok {
			t.Fatal("TryAcquireAll of a key held = true")
		}
		tk2, ok := q.TryAcquireAll("chat-2", ls)
		if !ok {
			t.Fatal("TryAcquireAll of a free key = false")
		}
		tk2.Release()
		tk.Release()
	}
	ran := false
	must(t, q.Do(ctx, "chat-1", ls, func(ctx context.Context) error {
		ran = true
		if _, err := q.AcquireAll(ctx, "chat-1", ls); !errors.Is(err, lanequeue.ErrReentrant) {
			t.Errorf("nested AcquireAll with the same set = %v; want ErrReentrant", err)
		}
		return nil
	}))
	if !ran {
		t.Fatal("Do did not run fn")
	}
	must(t, q.Check(ls, semaphore.Weight(1)))
	if err := q.Check(ls, semaphore.Weight(5)); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Check of weight 5 on capacity 4 = %v; want ErrTooHeavy", err)
	}
	if err := q.Check(ls, semaphore.Weight(0)); !errors.Is(err, semaphore.ErrInvalidWeight) {
		t.Fatalf("Check of weight 0 = %v; want ErrInvalidWeight", err)
	}
	if err := q.Check(ls, lanequeue.LaneWeight("rate", 1)); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Check with a weight for a lane not in the set = %v; want ErrUnknownLane", err)
	}
	assertNothingHeld(t, q)
}

// TestLanesRefusesBadLists: Lanes refuses an empty list, an unknown name
// (the empty name too), a name given twice, and a closed queue, with the
// package's sentinels.
func TestLanesRefusesBadLists(t *testing.T) {
	q := testQueue(t, 4)
	for _, c := range []struct {
		names []string
		want  error
	}{
		{nil, semaphore.ErrInvalidConfig},
		{[]string{}, semaphore.ErrInvalidConfig},
		{[]string{"session", "nope"}, semaphore.ErrInvalidConfig},
		{[]string{""}, semaphore.ErrInvalidConfig},
		{[]string{"session", "global", "session"}, semaphore.ErrInvalidConfig},
		{[]string{"rate", "rate"}, semaphore.ErrInvalidConfig},
	} {
		ls, err := q.Lanes(c.names...)
		if !errors.Is(err, c.want) {
			t.Errorf("Lanes(%q) = %v; want %v", c.names, err, c.want)
		}
		if ls != (lanequeue.LaneSet[string]{}) {
			t.Errorf("Lanes(%q) returned a set with its error", c.names)
		}
	}
	q.Close()
	if _, err := q.Lanes("session"); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Lanes on a closed queue = %v; want ErrClosed", err)
	}
}

// TestZeroLaneSet: the zero LaneSet names no lanes; every call refuses it
// and takes nothing.
func TestZeroLaneSet(t *testing.T) {
	q := testQueue(t, 4)
	var zero lanequeue.LaneSet[string]
	if zero.Names() != nil {
		t.Fatalf("zero set: Names %v", zero.Names())
	}
	if tk, err := q.AcquireAll(context.Background(), "k", zero); !errors.Is(err, semaphore.ErrInvalidConfig) || tk != nil {
		t.Fatalf("AcquireAll(zero set) = %v, %v; want ErrNoLanes", tk, err)
	}
	if _, ok := q.TryAcquireAll("k", zero); ok {
		t.Fatal("TryAcquireAll(zero set) = true")
	}
	if err := q.Do(context.Background(), "k", zero, func(context.Context) error {
		t.Error("Do ran fn with the zero set")
		return nil
	}); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Do(zero set) = %v; want ErrNoLanes", err)
	}
	if err := q.Check(zero); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Check(zero set) = %v; want ErrNoLanes", err)
	}
	assertNothingHeld(t, q)
}

// TestLaneSetOfAnotherQueue: a set belongs to the queue that made it. On
// another queue, even one whose lanes have the same names, every call
// fails with ErrUnknownLane and takes nothing on either queue (a silent
// grant would take the other queue's lanes, or this one's by name).
func TestLaneSetOfAnotherQueue(t *testing.T) {
	q1, q2 := testQueue(t, 1), testQueue(t, 1)
	ls1, err := q1.Lanes("session", "global")
	must(t, err)
	ctx := context.Background()
	if tk, err := q2.AcquireAll(ctx, "k", ls1); !errors.Is(err, semaphore.ErrInvalidConfig) || tk != nil {
		t.Fatalf("AcquireAll with another queue's set = %v, %v; want ErrUnknownLane", tk, err)
	}
	if _, ok := q2.TryAcquireAll("k", ls1); ok {
		t.Fatal("TryAcquireAll with another queue's set = true")
	}
	if err := q2.Do(ctx, "k", ls1, func(context.Context) error {
		t.Error("Do ran fn with another queue's set")
		return nil
	}); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Do with another queue's set = %v; want ErrUnknownLane", err)
	}
	if err := q2.Check(ls1); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Check with another queue's set = %v; want ErrUnknownLane", err)
	}
	assertNothingHeld(t, q1)
	assertNothingHeld(t, q2)
	// Both sets still work on their own queues.
	ls2, err := q2.Lanes("session", "global")
	must(t, err)
	if ls1 == ls2 {
		t.Fatal("two queues' sets compare equal")
	}
	for _, c := range []struct {
		q  *lanequeue.Queue[string]
		ls lanequeue.LaneSet[string]
	}{{q1, ls1}, {q2, ls2}} {
		tk, err := c.q.AcquireAll(ctx, "k", c.ls)
		must(t, err)
		tk.Release()
	}
}

// TestLaneSetKeepsItsLanes: a set keeps the lanes it resolved. Lanes
// added later are not in it, nor is a change to the slice of names it was
// made from; a closed queue fails the calls with ErrClosed.
func TestLaneSetKeepsItsLanes(t *testing.T) {
	q := testQueue(t, 4)
	names := []string{"session", "global"}
	ls, err := q.Lanes(names...)
	must(t, err)
	names[1] = "rate" // the caller's slice, changed after
	must(t, addGlobal(q, "a-first", 1))
	must(t, addKeyed(q, "tenant")) // sorts before "session"
	if got := ls.Names(); !slices.Equal(got, []string{"session", "global"}) {
		t.Fatalf("Names() after adds = %v; want [session global]", got)
	}
	tk, err := q.AcquireAll(context.Background(), "k", ls)
	must(t, err)
	if got := lanequeue.TicketLanes(tk); !slices.Equal(got, []string{"session", "global"}) {
		t.Fatalf("ticket lanes after adds = %v", got)
	}
	if st := laneStats(t, q, "a-first"); st.Held != 0 {
		t.Fatal("a lane added after the set was taken")
	}
	// A new set sees the new lanes, in canonical order.
	all, err := q.Lanes("a-first", "tenant", "global", "session")
	must(t, err)
	if got := all.Names(); !slices.Equal(got, []string{"session", "tenant", "a-first", "global"}) {
		t.Fatalf("Names() of a new set = %v", got)
	}
	tk.Release()
	q.Close()
	if _, err := q.AcquireAll(context.Background(), "k", ls); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("AcquireAll on a closed queue = %v; want ErrClosed", err)
	}
	if _, ok := q.TryAcquireAll("k", ls); ok {
		t.Fatal("TryAcquireAll on a closed queue = true")
	}
	if err := q.Check(ls); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Check on a closed queue = %v; want ErrClosed", err)
	}
}

// TestLaneSetSharedRace: one set, used by many goroutines at once with
// AcquireAll, TryAcquireAll and Do, while lanes are added to the queue and
// other sets prepared (the queue's table swapped under them): per key one
// holder at a time, the global lane within its capacity, nothing left held.
func TestLaneSetSharedRace(t *testing.T) {
	const keys, goroutines, rounds, global = 3, 8, 500, 2
	q := testQueue(t, global)
	ls, err := q.Lanes("global", "session")
	must(t, err)
	var perKey [keys]atomic.Int32
	var inGlobal atomic.Int32
	enter := func(k int) error {
		if n := perKey[k].Add(1); n != 1 {
			return fmt.Errorf("key %d has %d holders", k, n)
		}
		if n := inGlobal.Add(1); n > global {
			return fmt.Errorf("global lane has %d holders, capacity %d", n, global)
		}
		inGlobal.Add(-1)
		perKey[k].Add(-1)
		return nil
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % keys
			key := fmt.Sprint("key-", k)
			for i := range rounds {
				var err error
				switch (g + i) % 3 {
				case 0:
					var tk *lanequeue.Ticket[string]
					if tk, err = q.AcquireAll(ctx, key, ls); err == nil {
						err = enter(k)
						tk.Release()
					}
				case 1:
					if tk, ok := q.TryAcquireAll(key, ls); ok {
						err = enter(k)
						tk.Release()
					}
				case 2:
					err = q.Do(ctx, key, ls, func(context.Context) error { return enter(k) })
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // the table changes under the shared set
		defer wg.Done()
		for i := range 50 {
			name := fmt.Sprintf("extra-%02d", i)
			if err := addGlobal(q, name, 1); err != nil {
				t.Error(err)
				return
			}
			if _, err := q.Lanes("session", name); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	assertNothingHeld(t, q)
}

// TestPreparedAcquireAllocatesNothing: with a prepared set, a loop of
// AcquireAll+Release of session + global allocates nothing but the
// tickets' handles, 64 to an allocation: less than one allocation per
// call, which testing.AllocsPerRun rounds down to 0, as b.ReportAllocs does.
func TestPreparedAcquireAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := testQueue(t, 4)
	ls, err := q.Lanes("session", "global")
	must(t, err)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(640, func() {
		tk, err := q.AcquireAll(ctx, "thread-1", ls)
		if err != nil {
			t.Fatal(err)
		}
		tk.Release()
	})
	if allocs != 0 {
		t.Fatalf("AcquireAll+Release with a prepared set: %.2f allocs per call; want 0 (a block of handles per %d calls)", allocs, lanequeue.HandlesPerBlock)
	}
}

// TestLaneSetWithALaneClosedOnItsOwn: a lane of the set closed through its
// semaphore (not through the queue) fails the calls that reach it with its
// own error, wrapped with its name, and they hold nothing.
func TestLaneSetWithALaneClosedOnItsOwn(t *testing.T) {
	q := testQueue(t, 4)
	ls, err := q.Lanes("session", "global")
	must(t, err)
	s, err := lanequeue.GlobalSemaphore(q, "global")
	must(t, err)
	s.Close()
	_, err = q.AcquireAll(context.Background(), "k", ls)
	if !errors.Is(err, semaphore.ErrClosed) || !strings.Contains(err.Error(), `"global"`) {
		t.Fatalf("AcquireAll with the global lane closed = %v; want semaphore.ErrClosed, naming the lane", err)
	}
	if _, ok := q.TryAcquireAll("k", ls); ok {
		t.Fatal("TryAcquireAll with the global lane closed = true")
	}
	assertNothingHeld(t, q)
}
