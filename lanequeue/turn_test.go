package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

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
func sendAll(t *testing.T, q *lanequeue.Queue[string], out chan<- message, label, key string, names []string, lane string, waiters int, opts ...lanequeue.AcquireOption) {
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
	must(t, q.AddKeyedLane("session", keyedsem.WithSequenceOrder()))
	must(t, q.AddGlobalLane("global", 8))
	chat := []string{"session", "global"}
	first, err := acquireAll(q, context.Background(), "thread-1", chat, lanequeue.WithSequence(1))
	must(t, err)
	out := make(chan message, 8)
	for i, seq := range []int64{4, 2, 5, 3} {
		sendAll(t, q, out, fmt.Sprint(seq), "thread-1", chat, "session", i+1, lanequeue.WithSequence(seq))
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
	must(t, q.AddKeyedLane("session", keyedsem.WithPriorities(time.Hour)))
	must(t, q.AddGlobalLane("global", 8))
	chat := []string{"session", "global"}
	first, err := acquireAll(q, context.Background(), "thread-1", chat)
	must(t, err)
	out := make(chan message, 8)
	sendAll(t, q, out, "cron", "thread-1", chat, "session", 1, lanequeue.WithPriority(-1))
	sendAll(t, q, out, "heartbeat", "thread-1", chat, "session", 2)
	sendAll(t, q, out, "user", "thread-1", chat, "session", 3, lanequeue.WithPriority(2))
	doRelease, doDone := make(chan struct{}), make(chan error, 1)
	go func() {
		doDone <- doAll(q, context.Background(), "thread-1", chat, func(context.Context) error {
			out <- message{label: "do"} // while Do holds the lanes
			<-doRelease
			return nil
		}, lanequeue.WithPriority(1))
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
	opts := []lanequeue.AcquireOption{lanequeue.WithPriority(3), lanequeue.WithSequence(9), lanequeue.WithGroup("tenant"), lanequeue.WithWeight(1)}
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

// TestWithPriorityOutOfRange: a priority beyond semaphore.MaxPriority is
// refused by every call before anything is taken.
func TestWithPriorityOutOfRange(t *testing.T) {
	q := testQueue(t, 4)
	chat, err := q.Lanes("session", "global")
	must(t, err)
	for _, p := range []int{semaphore.MaxPriority + 1, -semaphore.MaxPriority - 1} {
		bad := lanequeue.WithPriority(p)
		if _, err := q.AcquireAll(context.Background(), "k", chat, bad); !errors.Is(err, lanequeue.ErrInvalidConfig) {
			t.Errorf("AcquireAll(WithPriority(%d)) = %v; want ErrInvalidConfig", p, err)
		}
		if _, ok := q.TryAcquireAll("k", chat, bad); ok {
			t.Errorf("TryAcquireAll(WithPriority(%d)) = true", p)
		}
		if err := q.Check(chat, bad); !errors.Is(err, lanequeue.ErrInvalidConfig) {
			t.Errorf("Check(WithPriority(%d)) = %v; want ErrInvalidConfig", p, err)
		}
	}
	for _, p := range []int{semaphore.MaxPriority, -semaphore.MaxPriority} {
		tk, err := q.AcquireAll(context.Background(), "k", chat, lanequeue.WithPriority(p))
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
		lanequeue.WithLaneWeight("global", 3), lanequeue.WithSequence(2), lanequeue.WithPriority(1), lanequeue.WithGroup("g"))
	must(t, err)
	if held := laneStats(t, q, "global").Held; held != 3 {
		t.Fatalf("global lane holds %d; want 3", held)
	}
	tk.Release()
	tk, err = acquireAll(q, context.Background(), "k", []string{"global"}, lanequeue.WithPriority(5), lanequeue.WithWeight(2))
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
	must(t, q.AddKeyedLane("session", keyedsem.WithSequenceOrder()))
	must(t, q.AddGlobalLane("global", 4))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lanes, err := q.Lanes("session", "global")
	must(t, err)
	acquireRelease := func() {
		tk, err := q.AcquireAll(ctx, "thread-1", lanes, lanequeue.WithSequence(7), lanequeue.WithPriority(1))
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

// turnRecorder is a global lane of another package that implements
// TurnLane: it records the Turns it is given.
type turnRecorder struct {
	s     *semaphore.Weighted
	turns []semaphore.Turn
	plain int
}

func (l *turnRecorder) Kind() lanequeue.Kind { return lanequeue.Global }
func (l *turnRecorder) MaxWeight() int64     { return l.s.Capacity() }
func (l *turnRecorder) Acquire(ctx context.Context, _ string, n int64) (semaphore.Permit, error) {
	l.plain++
	return l.s.Acquire(ctx, n)
}
func (l *turnRecorder) AcquireTurn(ctx context.Context, _ string, n int64, t semaphore.Turn) (semaphore.Permit, error) {
	l.turns = append(l.turns, t)
	return l.s.Acquire(ctx, n)
}
func (l *turnRecorder) TryAcquire(_ string, n int64) (semaphore.Permit, bool) {
	return l.s.TryAcquire(n)
}
func (l *turnRecorder) Stats() lanequeue.LaneStats {
	return lanequeue.LaneStats{Kind: lanequeue.Global}
}
func (l *turnRecorder) Close() { l.s.Close() }

// TestTurnReachesTurnLanes: AcquireAll and Do hand the call's whole Turn
// to a lane that implements TurnLane, and a call without turn options
// takes its plain Acquire.
func TestTurnReachesTurnLanes(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	rec := &turnRecorder{s: semaphore.New(2)}
	must(t, q.Add("recorded", rec))
	must(t, q.AddKeyedLane("session"))
	names := []string{"session", "recorded"}
	tk, err := acquireAll(q, context.Background(), "k", names, lanequeue.WithPriority(2), lanequeue.WithSequence(5), lanequeue.WithGroup("tenant"))
	must(t, err)
	tk.Release()
	must(t, doAll(q, context.Background(), "k", names, func(context.Context) error { return nil }, lanequeue.WithGroup("other"), lanequeue.WithGroup("last")))
	tk, err = acquireAll(q, context.Background(), "k", names)
	must(t, err)
	tk.Release()
	want := []semaphore.Turn{{Priority: 2, Sequence: 5, Group: "tenant"}, {Group: "last"}}
	if fmt.Sprint(rec.turns) != fmt.Sprint(want) || rec.plain != 1 {
		t.Fatalf("the lane got turns %+v and %d plain acquires; want %+v and 1", rec.turns, rec.plain, want)
	}
}
