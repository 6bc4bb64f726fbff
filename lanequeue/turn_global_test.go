package lanequeue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// priorityQueue builds session (FIFO, or with keyedOpts) + global, a
// global lane of capacity 1 made semaphore.WithPriorities(step) on a fake
// clock, and takes the global lane with a call of its own, which the test
// releases to let the others through.
func priorityQueue(t *testing.T, step time.Duration, keyedOpts ...keyedsem.Option) (*lanequeue.Queue[string], *clock.Fake, *lanequeue.Ticket[string]) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session", keyedOpts...))
	must(t, addGlobal(q, "global", 1, semaphore.WithPriorities(step), semaphore.WithClock(clk)))
	clk.Advance(time.Hour) // arrivals well after the lane's epoch
	running, err := acquireAll(q, context.Background(), "running", []string{"session", "global"})
	must(t, err)
	return q, clk, running
}

// TestGlobalLanePrioritiesThroughAcquireAll: calls of different threads
// over session + global, the global lane made semaphore.WithPriorities,
// are served on it by priority (a call without WithPriority at 0),
// arrival order within one; each thread's session lane is free, so the
// order is the global lane's.
func TestGlobalLanePrioritiesThroughAcquireAll(t *testing.T) {
	q, _, running := priorityQueue(t, time.Minute)
	chat := []string{"session", "global"}
	out := make(chan message, 8)
	sendAll(t, q, out, "cron", "thread-cron", chat, "global", 1, semaphore.Priority(-1))
	sendAll(t, q, out, "heartbeat", "thread-hb", chat, "global", 2)
	sendAll(t, q, out, "user-1", "thread-u1", chat, "global", 3, semaphore.Priority(2))
	sendAll(t, q, out, "user-2", "thread-u2", chat, "global", 4, semaphore.Priority(2))
	sendAll(t, q, out, "urgent", "thread-u3", chat, "global", 5, semaphore.Priority(3))
	if got, want := fmt.Sprint(served(t, running, out, 5)), "[urgent user-1 user-2 heartbeat cron]"; got != want {
		t.Fatalf("served %s; want %s", got, want)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}

// TestGlobalLaneAgingThroughAcquireAll: on the fake clock with a step of a
// minute, a priority 0 call that has waited three minutes is passed by a
// newcomer of priority 4 (4 > 3), not by one of priority 2 or 3 (a tie
// goes by arrival); and a cron call at -1 under a stream of users at +1,
// one a minute, is served once it has waited two minutes: it is not
// starved.
func TestGlobalLaneAgingThroughAcquireAll(t *testing.T) {
	q, clk, running := priorityQueue(t, time.Minute)
	chat := []string{"session", "global"}
	out := make(chan message, 8)
	sendAll(t, q, out, "low", "thread-low", chat, "global", 1)
	clk.Advance(3 * time.Minute)
	sendAll(t, q, out, "p2", "thread-2", chat, "global", 2, semaphore.Priority(2))
	sendAll(t, q, out, "p3", "thread-3", chat, "global", 3, semaphore.Priority(3))
	sendAll(t, q, out, "p4", "thread-4", chat, "global", 4, semaphore.Priority(4))
	if got, want := fmt.Sprint(served(t, running, out, 4)), "[p4 low p3 p2]"; got != want {
		t.Fatalf("served %s; want %s", got, want)
	}

	// The scheduler's case: each turn takes a minute, a user arrives
	// every minute, the cron job waits at -1.
	running, err := acquireAll(q, context.Background(), "running", chat)
	must(t, err)
	sendAll(t, q, out, "cron", "thread-cron", chat, "global", 1, semaphore.Priority(-1))
	sendAll(t, q, out, "user-0", "thread-u0", chat, "global", 2, semaphore.Priority(1))
	var order []string
	for i := 1; i <= 4; i++ {
		clk.Advance(time.Minute)
		running.Release() // the turn that ran ends; the next one starts
		m := recvMessage(t, out)
		order = append(order, m.label)
		running = m.r.t
		sendAll(t, q, out, fmt.Sprint("user-", i), fmt.Sprint("thread-u", i), chat, "global", laneStats(t, q, "global").Waiters+1, semaphore.Priority(1))
	}
	if got, want := fmt.Sprint(order), "[user-0 user-1 cron user-2]"; got != want {
		t.Fatalf("turns ran in the order %s; want %s (the cron job within two minutes)", got, want)
	}
	// The users left in line.
	served(t, running, out, laneStats(t, q, "global").Waiters)
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}

// recvMessage receives the next grant on out, within the failsafe, and
// fails t on an error.
func recvMessage(t *testing.T, out <-chan message) message {
	t.Helper()
	select {
	case m := <-out:
		if m.r.err != nil {
			t.Fatalf("%s: %v", m.label, m.r.err)
		}
		return m
	case <-time.After(failsafe):
		t.Fatalf("no grant within the failsafe %v", failsafe)
		return message{}
	}
}

// TestWithGroupReachesAFairLane: through AcquireAll, a call's WithGroup
// puts it in that group on a fair lane (AddFairLane), in place of its
// key's tenant: a/3 asks for group b, so it takes b's first turn, beside
// a/1's, and goes before a/2.
func TestWithGroupReachesAFairLane(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "session"))
	must(t, addFair(q, "global", 1, tenantOf))
	chat := []string{"session", "global"}
	running, err := acquireAll(q, context.Background(), "a/0", chat)
	must(t, err)
	out := make(chan message, 4)
	sendAll(t, q, out, "a/1", "a/1", chat, "global", 1)
	sendAll(t, q, out, "a/2", "a/2", chat, "global", 2, semaphore.Priority(5)) // not the fair lane's concern
	sendAll(t, q, out, "a/3 as b", "a/3", chat, "global", 3, semaphore.Group("b"))
	if got, want := fmt.Sprint(served(t, running, out, 3)), "[a/1 a/3 as b a/2]"; got != want {
		t.Fatalf("served %s; want %s", got, want)
	}
	assertNoneRejected(t, q)
	assertNothingHeld(t, q)
}

// assertNoneRejected checks that no lane of q counted a refusal.
func assertNoneRejected(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Rejected != 0 {
			t.Errorf("lane %q counted %d refusals; want 0", st.Name, st.Rejected)
		}
	}
}

// TestTurnOptionsCountNoRefusal: the turn options of calls on lanes that
// do not order by them count nothing in those lanes' Stats: FIFO session
// and global lanes, a session lane of sequence order given a priority, a
// priority global lane given a sequence and a group, through AcquireAll,
// Do, TryAcquireAll and Join, also with a lane's first call.
func TestTurnOptionsCountNoRefusal(t *testing.T) {
	all := []semaphore.AcquireOption{semaphore.Priority(2), semaphore.Sequence(9), semaphore.Group("tenant")}
	for _, c := range []struct {
		name   string
		keyed  []keyedsem.Option
		global []semaphore.Option
	}{
		{"FIFO", nil, nil},
		{"sequence+priorities", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.Option{semaphore.WithPriorities(time.Second)}},
		{"priorities+FIFO", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := lanequeue.New[string]()
			t.Cleanup(q.Close)
			must(t, addKeyed(q, "session", c.keyed...))
			must(t, addGlobal(q, "global", 2, c.global...))
			chat, err := q.Lanes("session", "global")
			must(t, err)
			for i := range 3 {
				tk, err := q.AcquireAll(context.Background(), fmt.Sprint("thread-", i), chat, all...)
				must(t, err)
				tk.Release()
			}
			must(t, q.Do(context.Background(), "thread-do", chat, func(context.Context) error { return nil }, all...))
			if tk, ok := q.TryAcquireAll("thread-try", chat, all...); !ok {
				t.Fatal("TryAcquireAll with turn options = false")
			} else {
				tk.Release()
			}
			// Waiters too: a call that has to wait on each lane.
			holder, err := q.AcquireAll(context.Background(), "busy", chat, lanequeue.LaneWeight("global", 2))
			must(t, err)
			waitingOut := make(chan message, 2)
			sendAll(t, q, waitingOut, "on session", "busy", []string{"session", "global"}, "session", 1, all...)
			pl := join(t, q, "busy", chat, all...)
			sendAll(t, q, waitingOut, "on global", "other", []string{"session", "global"}, "global", 1, all...)
			holder.Release()
			for range 2 {
				recvMessage(t, waitingOut).r.t.Release()
			}
			placeWait(t, pl, "the place").Release()
			assertNoneRejected(t, q)
			if st := laneStats(t, q, "session"); st.Acquired != 9 {
				t.Errorf("session lane %+v; want 9 grants", st.Counters)
			}
			assertNothingHeld(t, q)
		})
	}
}
