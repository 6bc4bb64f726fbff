package lanequeue_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A dashboard's snapshot of a gateway: per lane the counters and the
// wait-time and hold-time histograms (the lanes made WithHistograms), who
// holds what (a call waiting for the global lane holds its session lane
// already), and who waits where, in which position.
func ExampleQueue_Waiters() {
	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithHistograms()))); err != nil {
		panic(err)
	}
	if err := q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(1, semaphore.WithHistograms()))); err != nil {
		panic(err)
	}
	lanes, err := q.Lanes("session", "global")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// chat-1 runs; chat-2 and chat-3 wait for the global lane, a second
	// message of chat-1 for its session.
	running, err := q.AcquireAll(ctx, "chat-1", lanes)
	if err != nil {
		panic(err)
	}
	inLine := func() (n int) { // the callers in the lanes' lines
		for _, st := range q.Stats() {
			n += st.Waiters
		}
		return n
	}
	done := make(chan *lanequeue.Ticket[string])
	for i, key := range []string{"chat-2", "chat-3", "chat-1"} {
		go func() {
			t, err := q.AcquireAll(ctx, key, lanes)
			if err != nil {
				panic(err)
			}
			done <- t
		}()
		for inLine() < i+1 { // let each one queue before the next
			runtime.Gosched()
		}
	}

	fmt.Println("holders:")
	holders := q.Holders() // oldest first, to the coarse clock's millisecond: order ties by key
	slices.SortStableFunc(holders, func(a, b lanequeue.Holder[string]) int { return strings.Compare(a.Key, b.Key) })
	for _, h := range holders {
		state := "ticket"
		if h.Waiting {
			state = "waiting for a later lane"
		}
		fmt.Printf("  %s %s weight %d (%s)\n", h.Lane, h.Key, h.Weight, state)
	}
	fmt.Println("waiters:")
	for _, w := range q.Waiters() {
		fmt.Printf("  %s %s #%d weight %d, holding %d lane(s)\n", w.Lane, w.Key, w.Position, w.Weight, w.Holding)
	}
	line := 0
	for _, w := range q.Waiters() {
		if w.Lane == "session" && w.Key == "chat-1" {
			line++
		}
	}
	fmt.Println("chat-1's session line:", line)

	running.Release()
	for range 3 {
		(<-done).Release()
	}
	fmt.Println("stats:")
	for _, st := range q.Stats() {
		fmt.Printf("  %s: acquired %d, released %d; %d waits, %d holds timed, p99 wait under 100s: %v\n",
			st.Name, st.Acquired, st.Released, st.WaitTime.Count, st.HoldTime.Count, st.WaitTime.Quantile(0.99) < 100e9)
	}
	// Output:
	// holders:
	//   session chat-1 weight 1 (ticket)
	//   global chat-1 weight 1 (ticket)
	//   session chat-2 weight 1 (waiting for a later lane)
	//   session chat-3 weight 1 (waiting for a later lane)
	// waiters:
	//   session chat-1 #1 weight 1, holding 0 lane(s)
	//   global chat-2 #1 weight 1, holding 1 lane(s)
	//   global chat-3 #2 weight 1, holding 1 lane(s)
	// chat-1's session line: 1
	// stats:
	//   session: acquired 4, released 4; 4 waits, 4 holds timed, p99 wait under 100s: true
	//   global: acquired 4, released 4; 4 waits, 4 holds timed, p99 wait under 100s: true
}
