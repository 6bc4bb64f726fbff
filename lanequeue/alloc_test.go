package lanequeue_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestAcquireAllAllocationIsAmortized: AcquireAll and Release of up to
// four lanes (no rate lane) allocate nothing but the ticket's handle, and
// handles come 64 to an allocation, so a loop of them allocates about once
// per 64 calls (the target is at most once per call).
func TestAcquireAllAllocationIsAmortized(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := testQueue(t, 4)
	must(t, addGlobal(q, "background", 3))
	must(t, addKeyed(q, "tenant"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lanes, err := q.Lanes("global", "session", "background", "tenant")
	must(t, err)
	acquireRelease := func() {
		tk, err := q.AcquireAll(ctx, "thread-1", lanes, semaphore.Weight(1))
		if err != nil {
			t.Fatal(err)
		}
		tk.Release()
	}
	acquireRelease() // the record, the lanes' own state
	const calls = 64 * 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		acquireRelease()
	}
	runtime.ReadMemStats(&after)
	// 100 blocks, and slack for what the lanes' pools may allocate again
	// after a GC.
	if n := after.Mallocs - before.Mallocs; n > calls/16 {
		t.Fatalf("%d AcquireAll+Release of 4 lanes: %d allocations; want about %d (a block of handles per %d calls)",
			calls, n, calls/64, lanequeue.HandlesPerBlock)
	}
}

// TestRateAcquireAllAllocationIsAmortized: AcquireAll and Release of a
// global lane and two rate lanes whose tokens are there allocate no more
// than the ticket's handle either: a rate lane's reservation stays on the
// caller's stack (it took two allocations a call when rateReq kept
// ReserveN's pointer).
func TestRateAcquireAllAllocationIsAmortized(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := testQueue(t, 4)
	must(t, addRate(q, "rpm", 1e9, 1e9))
	must(t, addRate(q, "tpm", 1e12, 1<<30))
	lanes, err := q.Lanes("global", "rpm", "tpm")
	must(t, err)
	acquireRelease := func() {
		tk, err := q.AcquireAll(context.Background(), "", lanes, lanequeue.LaneWeight("tpm", 100))
		if err != nil {
			t.Fatal(err)
		}
		tk.Release()
	}
	acquireRelease()
	const calls = 64 * 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		acquireRelease()
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n > calls/16 {
		t.Fatalf("%d AcquireAll+Release of a global and two rate lanes: %d allocations; want about %d (a block of handles per %d calls)",
			calls, n, calls/64, lanequeue.HandlesPerBlock)
	}
}

// TestFailedTryAcquireAllAllocatesNothing: a scheduler that polls busy
// keys with TryAcquireAll pays no allocation for the tries that fail.
func TestFailedTryAcquireAllAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := testQueue(t, 4)
	busy, err := acquireAll(q, context.Background(), "chat-2", []string{"session"})
	must(t, err)
	defer busy.Release()
	lanes, err := q.Lanes("global", "session")
	must(t, err)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := q.TryAcquireAll("chat-2", lanes); ok {
			t.Fatal("TryAcquireAll succeeded on a busy key")
		}
	})
	if allocs != 0 {
		t.Fatalf("failed TryAcquireAll: %.1f allocs; want 0", allocs)
	}
	if held := laneStats(t, q, "global").Held; held != 0 {
		t.Fatalf("global lane holds %d after failed tries", held)
	}
}

// TestDoWithoutLeasedLanesAllocatesOnlyItsContext: Do on lanes none of
// which is Leased allocates the context that carries the ticket and
// nothing more (watching Leased permits put a variable on the heap on
// every call: a review measured 2 allocations instead of 1).
func TestDoWithoutLeasedLanesAllocatesOnlyItsContext(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := testQueue(t, 4)
	lanes, err := q.Lanes("global", "session")
	must(t, err)
	fn := func(context.Context) error { return nil }
	ctx := context.Background()
	_ = q.Do(ctx, "k", lanes, fn) // the record, the lanes' own state
	// AllocsPerRun truncates to a whole count: the ticket's handles, 64 to an
	// allocation, read as 1, and one more allocation a call as 2.
	if n := testing.AllocsPerRun(6400, func() { _ = q.Do(ctx, "k", lanes, fn) }); n >= 2 {
		t.Fatalf("Do allocates %.2f times a call; want the ticket's context alone (1)", n)
	}
}
