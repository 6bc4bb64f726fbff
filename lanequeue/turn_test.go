package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// message is one chat message of a test: its label and the ticket its
// AcquireAll returned.
type message struct {
	label string
	r     acquireResult
}

// sendAll starts AcquireAll of names for key with opts, in a goroutine that
// reports on out, and waits until it waits on lane (waiters counts the
// lane's waiters it then has).
func sendAll(t *testing.T, q *lanequeue.Queue[string], out chan<- message, label, key string, names []string, lane string, waiters int, opts ...semaphore.AcquireOption) {
	t.Helper()
	go func() {
		tk, err := acquireAll(q, context.Background(), key, names, opts...)
		out <- message{label, acquireResult{tk, err}}
	}()
	waitFor(t, label+" to wait on "+lane, func() bool { return laneStats(t, q, lane).Waiters == waiters })
}

// served releases first and then each ticket as it is granted, and
// returns the labels in the order of the grants (one at a time: the
// session lane serialises the key).
func served(t *testing.T, first *lanequeue.Ticket[string], out <-chan message, n int) []string {
	t.Helper()
	first.Release()
	var got []string
	for range n {
		var m message
		select {
		case m = <-out:
		case <-time.After(failsafe):
			t.Fatalf("no grant within the failsafe %v; served so far %v", failsafe, got)
		}
		if m.r.err != nil {
			t.Fatalf("%s: %v", m.label, m.r.err)
		}
		got = append(got, m.label)
		m.r.t.Release()
	}
	return got
}

// TestWithSequenceOrdersAThread: a thread's messages that reach the
// server out of order (4, 2, 5, 3 while message 1 runs) run in the order
// of their sequence on a session lane built with
// keyedsem.WithSequenceOrder; the global lane, FIFO, ignores the
// sequence.
func TestWithSequenceOrdersAThread(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", 8))
	chat := []string{"session", "global"}
	first, err := acquireAll(q, context.Background(), "thread-1", chat, semaphore.Sequence(1))
	must(t, err)
	out := make(chan message, 8)
	for i, seq := range []int64{4, 2, 5, 3} {
		sendAll(t, q, out, fmt.Sprint(seq), "thread-1", chat, "session", i+1, semaphore.Sequence(seq))
	}
	if got, want := fmt.Sprint(served(t, first, out, 4)), "[2 3 4 5]"; got != want {
		t.Fatalf("messages served in the order %s; want %s", got, want)
	}
	assertNothingHeld(t, q)
}

// TestWithPriorityOnAPriorityLane: on a session lane built with
// keyedsem.WithPriorities, a key's waiting calls are served by priority,
// through AcquireAll and Do alike.
func TestWithPriorityOnAPriorityLane(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithPriorities(time.Hour)))
	must(t, addGlobal(q, "global", 8))
	chat := []string{"session", "global"}
	first, err := acquireAll(q, context.Background(), "thread-1", chat)
	must(t, err)
	out := make(chan message, 8)
	sendAll(t, q, out, "cron", "thread-1", chat, "session", 1, semaphore.Priority(-1))
	sendAll(t, q, out, "heartbeat", "thread-1", chat, "session", 2)
	sendAll(t, q, out, "user", "thread-1", chat, "session", 3, semaphore.Priority(2))
	doRelease, doDone := make(chan struct{}), make(chan error, 1)
	go func() {
		doDone <- doAll(q, context.Background(), "thread-1", chat, func(context.Context) error {
			out <- message{label: "do"} // while Do holds the lanes
			<-doRelease
			return nil
		}, semaphore.Priority(1))
	}()
	waitFor(t, "Do to wait", func() bool { return laneStats(t, q, "session").Waiters == 4 })
	first.Release()
	var got []string
	for range 4 {
		var m message
		select {
		case m = <-out:
		case <-time.After(failsafe):
			t.Fatalf("no grant within the failsafe %v; served so far %v", failsafe, got)
		}
		if m.r.err != nil {
			t.Fatalf("%s: %v", m.label, m.r.err)
		}
		got = append(got, m.label)
		if m.label == "do" {
			close(doRelease)
			must(t, <-doDone)
		} else {
			m.r.t.Release()
		}
	}
	if g, want := fmt.Sprint(got), "[user do heartbeat cron]"; g != want {
		t.Fatalf("served %s; want %s", g, want)
	}
}

// TestTurnOptionsIgnoredWithoutTheirOrder: lanes whose semaphore does not
// order by a field ignore it: the call goes through (FIFO keyed and
// global lanes, a rate lane), and no lane counts a refusal for it (the
// adapters pass on only the fields their semaphore honours).
func TestTurnOptionsIgnoredWithoutTheirOrder(t *testing.T) {
	q := testQueue(t, 4)
	opts := []semaphore.AcquireOption{semaphore.Priority(3), semaphore.Sequence(9), semaphore.Group("tenant"), semaphore.Weight(1)}
	for i := range 3 {
		tk, err := acquireAll(q, context.Background(), fmt.Sprint("thread-", i), []string{"session", "global"}, opts...)
		must(t, err)
		tk.Release()
	}
	tk, ok := tryAcquireAll(q, "thread-9", []string{"session", "global"}, opts...)
	if !ok {
		t.Fatal("TryAcquireAll with turn options on FIFO lanes = false")
	}
	tk.Release()
	tk, err := acquireAll(q, context.Background(), "thread-r", []string{"rate"}, opts...)
	must(t, err)
	tk.Release()
	if st := laneStats(t, q, "session"); st.Acquired != 4 {
		t.Fatalf("session lane %+v; want 4 grants", st.Counters)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}

// TestWithPriorityOutOfRange: a priority beyond call.MaxPriority is
// refused by every call before anything is taken.
func TestWithPriorityOutOfRange(t *testing.T) {
	q := testQueue(t, 4)
	chat, err := q.Lanes("session", "global")
	must(t, err)
	for _, p := range []int{call.MaxPriority + 1, -call.MaxPriority - 1} {
		bad := semaphore.Priority(p)
		if _, err := q.AcquireAll(context.Background(), "k", chat, bad); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("AcquireAll(WithPriority(%d)) = %v; want ErrInvalidConfig", p, err)
		}
		if _, ok := q.TryAcquireAll("k", chat, bad); ok {
			t.Errorf("TryAcquireAll(WithPriority(%d)) = true", p)
		}
		if err := q.Check(chat, bad); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("Check(WithPriority(%d)) = %v; want ErrInvalidConfig", p, err)
		}
	}
	for _, p := range []int{call.MaxPriority, -call.MaxPriority} {
		tk, err := q.AcquireAll(context.Background(), "k", chat, semaphore.Priority(p))
		must(t, err)
		tk.Release()
	}
	if st := laneStats(t, q, "session"); st.Acquired != 2 {
		t.Fatalf("session lane %+v; want only the two calls in range", st.Counters)
	}
	assertNothingHeld(t, q)
}

// TestTurnOptionsKeepWeights: turn options are not weights: WithWeight
// and WithLaneWeight count as before beside them, whatever the order.
func TestTurnOptionsKeepWeights(t *testing.T) {
	q := testQueue(t, 4)
	tk, err := acquireAll(q, context.Background(), "k", []string{"session", "global"},
		lanequeue.LaneWeight("global", 3), semaphore.Sequence(2), semaphore.Priority(1), semaphore.Group("g"))
	must(t, err)
	if held := laneStats(t, q, "global").Held; held != 3 {
		t.Fatalf("global lane holds %d; want 3", held)
	}
	tk.Release()
	tk, err = acquireAll(q, context.Background(), "k", []string{"global"}, semaphore.Priority(5), semaphore.Weight(2))
	must(t, err)
	if held := laneStats(t, q, "global").Held; held != 2 {
		t.Fatalf("global lane holds %d; want 2", held)
	}
	tk.Release()
}

// TestAcquireAllWithTurnAllocatesNothingMore: the turn options cost no
// allocation beyond AcquireAll's own (its handle, amortised).
func TestAcquireAllWithTurnAllocatesNothingMore(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedsem.WithSequenceOrder()))
	must(t, addGlobal(q, "global", 4))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lanes, err := q.Lanes("session", "global")
	must(t, err)
	acquireRelease := func() {
		tk, err := q.AcquireAll(ctx, "thread-1", lanes, semaphore.Sequence(7), semaphore.Priority(1))
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
	if n := after.Mallocs - before.Mallocs; n > calls/16 {
		t.Fatalf("%d AcquireAll+Release with turn options: %d allocations; want about %d", calls, n, calls/64)
	}
}

// plainRecorder is a global lane of another package: it counts its
// acquires.
type plainRecorder struct {
	s     *semaphore.Weighted
	plain int
}

func (l *plainRecorder) Kind() lanequeue.Kind { return lanequeue.Global }
func (l *plainRecorder) MaxWeight() int64     { return l.s.Capacity() }
func (l *plainRecorder) Acquire(ctx context.Context, _ string, n int64) (semaphore.Permit, error) {
	l.plain++
	return l.s.Acquire(ctx, n)
}
func (l *plainRecorder) TryAcquire(_ string, n int64) (semaphore.Permit, bool) {
	return l.s.TryAcquire(n)
}
func (l *plainRecorder) Stats() lanequeue.LaneStats {
	return lanequeue.LaneStats{Kind: lanequeue.Global}
}
func (l *plainRecorder) Close() { l.s.Close() }

// TestPlaceOptionsSkipOtherPackagesLanes: a lane of another package orders
// by nothing the call says, so AcquireAll and Do take its plain Acquire
// whatever place options the call gives, and the call succeeds.
func TestPlaceOptionsSkipOtherPackagesLanes(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	rec := &plainRecorder{s: semaphore.New(2)}
	must(t, q.Add("recorded", rec))
	must(t, addKeyed(q, "session"))
	names := []string{"session", "recorded"}
	tk, err := acquireAll(q, context.Background(), "k", names, semaphore.Priority(2), semaphore.Sequence(5), semaphore.Group("tenant"))
	must(t, err)
	tk.Release()
	must(t, doAll(q, context.Background(), "k", names, func(context.Context) error { return nil }, semaphore.Group("other"), semaphore.Group("last")))
	tk, err = acquireAll(q, context.Background(), "k", names)
	must(t, err)
	tk.Release()
	if rec.plain != 3 {
		t.Fatalf("the lane got %d plain acquires; want 3", rec.plain)
	}
}
