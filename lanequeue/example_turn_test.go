package lanequeue_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// simClock is the time of the scheduler in Example_cronYieldsToUsers: it
// moves a minute per turn when the scheduler moves it, so that the example
// prints the same on every run. A real scheduler leaves WithClock out and
// ages its waiters on the system clock.
type simClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// NewTimer is never called: the lane has no WithMaxWait.
func (c *simClock) NewTimer(time.Duration) semaphore.Timer { panic("no timers in this example") }

// A gateway's model runs one turn at a time (the global lane "model", of
// capacity 1), for user messages and for a nightly cron job. User turns
// come first (priority 1, the cron job -1), but the cron job still runs:
// made with semaphore.WithPriorities(time.Minute), the lane raises a
// waiting turn's priority by one for every minute it has waited, so once
// the cron job has waited two minutes (1 - (-1) steps) no newcomer goes
// ahead of it. Here every turn takes a minute and a new user message
// arrives every minute: carol, who comes a minute after the cron job,
// still goes first; dave, who comes two minutes after it, waits behind it.
func Example_cronYieldsToUsers() {
	const (
		userTurn = 1
		cronJob  = -1
	)
	clk := &simClock{now: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())); err != nil {
		panic(err)
	}
	if err := q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(1, semaphore.WithPriorities(time.Minute), semaphore.WithClock(clk)))); err != nil {
		panic(err)
	}
	lanes, err := q.Lanes("session", "model")
	if err != nil {
		panic(err)
	}
	start := clk.Now()
	minute := func() int { return int(clk.Now().Sub(start) / time.Minute) }
	waiting := func() int {
		for _, st := range q.Stats() {
			if st.Name == "model" {
				return st.Waiters
			}
		}
		return 0
	}

	type turn struct {
		what   string
		queued int // the minute it arrived
		t      *lanequeue.Ticket[string]
	}
	started := make(chan turn)
	// submit starts a turn for thread and returns once it waits for the
	// model (the scheduler then knows the order of arrival).
	submit := func(thread, what string, priority int) {
		want, queued := waiting()+1, minute()
		go func() {
			t, err := q.AcquireAll(context.Background(), thread, lanes, semaphore.Priority(priority))
			if err != nil {
				panic(err)
			}
			started <- turn{what, queued, t}
		}()
		for waiting() < want {
			runtime.Gosched()
		}
	}

	t, err := q.AcquireAll(context.Background(), "alice", lanes, semaphore.Priority(userTurn))
	if err != nil {
		panic(err)
	}
	now := turn{"alice: hi", 0, t}
	submit("cron", "cron: nightly report", cronJob)
	submit("bob", "bob: hello", userTurn)
	arrivals := []string{"carol", "dave", "erin", "frank"}
	for {
		fmt.Printf("minute %d: %s (queued at minute %d)\n", minute(), now.what, now.queued)
		clk.advance(time.Minute) // the turn runs for a minute
		if len(arrivals) > 0 {
			submit(arrivals[0], arrivals[0]+": a question", userTurn)
			arrivals = arrivals[1:]
		}
		more := waiting() > 0
		now.t.Release()
		if !more {
			break
		}
		now = <-started
	}
	// Output:
	// minute 0: alice: hi (queued at minute 0)
	// minute 1: bob: hello (queued at minute 0)
	// minute 2: carol: a question (queued at minute 1)
	// minute 3: cron: nightly report (queued at minute 0)
	// minute 4: dave: a question (queued at minute 2)
	// minute 5: erin: a question (queued at minute 3)
	// minute 6: frank: a question (queued at minute 4)
}
