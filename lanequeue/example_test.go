package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A chat gateway: each thread's messages are handled one at a time and in
// order (the "session" lane, keyed by thread), while different threads are
// handled in parallel within a budget shared by all (the "global" lane: how
// many calls to the model may run at once).
//
// Each thread has a reader that takes its messages in arrival order and
// acquires the lanes before handing the message, with its ticket, to a
// worker goroutine; the worker releases the ticket when it is done. The
// session lane makes the reader wait until the thread's previous message
// is finished, so a thread's messages never overlap or reorder, and a
// thread that waits holds no global permit.
func Example_gateway() {
	q := lanequeue.Default[string](16) // "session" (per thread) + "global" (16)
	defer q.Close()
	// The lanes a message takes, resolved once and shared by every reader.
	chat, err := q.Lanes("session", "global")
	if err != nil {
		panic(err)
	}

	inbox := map[string][]string{
		"telegram:alice": {"hi", "what's the weather?", "thanks"},
		"slack:#ops":     {"deploy?", "status?"},
		"discord:bob":    {"ping", "pong?", "bye"},
	}

	var mu sync.Mutex
	handled := map[string][]string{} // thread -> messages in the order handled
	var workers sync.WaitGroup
	var readers sync.WaitGroup
	for thread, msgs := range inbox {
		readers.Add(1)
		go func() { // the thread's reader
			defer readers.Done()
			for _, msg := range msgs {
				t, err := q.AcquireAll(context.Background(), thread, chat)
				if err != nil {
					fmt.Println(err)
					return
				}
				workers.Add(1)
				go func() { // the worker owns the ticket now
					defer workers.Done()
					defer t.Release()
					mu.Lock()
					handled[thread] = append(handled[thread], msg) // "call the model"
					mu.Unlock()
				}()
			}
		}()
	}
	readers.Wait()
	workers.Wait()

	for _, th := range slices.Sorted(maps.Keys(handled)) {
		fmt.Printf("%s: %s\n", th, strings.Join(handled[th], " | "))
	}
	// Output:
	// discord:bob: ping | pong? | bye
	// slack:#ops: deploy? | status?
	// telegram:alice: hi | what's the weather? | thanks
}

// A scheduler runs periodic jobs (a daily summary for each chat) without
// ever waiting: it tries the "scheduler" lane (one job at a time) and the
// chat's "session" lane together. If the chat is busy with a user's
// message, the try fails on the session lane, which is tried first (keyed
// lanes come before global ones), so the scheduler's permit is never taken
// and the next job can run at once; the busy chat's job is retried later.
func ExampleQueue_TryAcquireAll() {
	q := lanequeue.New[string]()
	defer q.Close()
	_ = q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]()))
	_ = q.Add("scheduler", lanequeue.NewGlobalLane[string](semaphore.New(1)))
	session, _ := q.Lanes("session")
	job, _ := q.Lanes("scheduler", "session")

	// A user is talking in chat-2 right now.
	user, _ := q.AcquireAll(context.Background(), "chat-2", session)

	var retry []string
	for _, chat := range []string{"chat-1", "chat-2", "chat-3"} {
		t, ok := q.TryAcquireAll(chat, job)
		if !ok {
			fmt.Printf("%s busy, scheduler permits held: %d\n", chat, schedulerHeld(q))
			retry = append(retry, chat)
			continue
		}
		fmt.Printf("%s: summary sent\n", chat)
		t.Release()
	}

	user.Release() // the user's message is done
	for _, chat := range retry {
		if t, ok := q.TryAcquireAll(chat, job); ok {
			fmt.Printf("%s: summary sent on retry\n", chat)
			t.Release()
		}
	}
	// Output:
	// chat-1: summary sent
	// chat-2 busy, scheduler permits held: 0
	// chat-3: summary sent
	// chat-2: summary sent on retry
}

func schedulerHeld(q *lanequeue.Queue[string]) int64 {
	for _, st := range q.Stats() {
		if st.Name == "scheduler" {
			return st.Held
		}
	}
	return -1
}

// Sub-agents: a parent agent fans work out to sub-agents, each under a key
// of its own, so the session lane never makes one wait for another; they
// are limited only by their own lane, "subagents", here two at a time.
// Do puts the ticket in the sub-agent's context: if a sub-agent, by
// mistake, asked again for a lane it holds under its own key, it would
// get ErrReentrant instead of waiting for itself forever.
func Example_subAgents() {
	q := lanequeue.New[string]()
	defer q.Close()
	_ = q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]()))
	_ = q.Add("subagents", lanequeue.NewGlobalLane[string](semaphore.New(2)))
	agent, _ := q.Lanes("session", "subagents")
	subagents, _ := q.Lanes("subagents")

	// Two sub-agents running take the whole "subagents" lane...
	a1, _ := q.AcquireAll(context.Background(), "agent-1", agent)
	a2, _ := q.AcquireAll(context.Background(), "agent-2", agent)
	_, ok := q.TryAcquireAll("agent-3", agent)
	fmt.Println("third sub-agent can start now:", ok)
	a1.Release()
	a2.Release()

	// ...and a batch of them runs through Do, two at a time.
	var mu sync.Mutex
	var results []string
	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		key := fmt.Sprintf("agent-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = q.Do(context.Background(), key, agent, func(ctx context.Context) error {
				_, err := q.AcquireAll(ctx, key, subagents) // the mistake
				mu.Lock()
				results = append(results, fmt.Sprintf("%s done (nested acquire: %v)", key, err != nil))
				mu.Unlock()
				return nil
			})
		}()
	}
	wg.Wait()
	slices.Sort(results)
	for _, r := range results {
		fmt.Println(r)
	}
	// Output:
	// third sub-agent can start now: false
	// agent-1 done (nested acquire: true)
	// agent-2 done (nested acquire: true)
	// agent-3 done (nested acquire: true)
	// agent-4 done (nested acquire: true)
	// agent-5 done (nested acquire: true)
}

// Reservations by composition: background jobs take "global" and
// "background", whose capacity is one less than global's, so however many
// background jobs queue up, one global permit always stays free for users.
func Example_reservation() {
	q := lanequeue.New[string]()
	defer q.Close()
	const global = 4
	_ = q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(global)))
	_ = q.Add("background", lanequeue.NewGlobalLane[string](semaphore.New(global-1)))
	background, _ := q.Lanes("background", "global")
	users, _ := q.Lanes("global")

	var jobs []*lanequeue.Ticket[string]
	for i := 1; i <= 5; i++ {
		t, ok := q.TryAcquireAll(fmt.Sprintf("job-%d", i), background)
		fmt.Printf("background job-%d started: %v\n", i, ok)
		if ok {
			jobs = append(jobs, t)
		}
	}
	user, ok := q.TryAcquireAll("user-42", users)
	fmt.Println("user request started:", ok)
	if ok {
		user.Release()
	}
	for _, t := range jobs {
		t.Release()
	}
	// Output:
	// background job-1 started: true
	// background job-2 started: true
	// background job-3 started: true
	// background job-4 started: false
	// background job-5 started: false
	// user request started: true
}

// Lanes resolves names once, at set-up: the errors of a list of names
// come here, not on every call. A set belongs to the queue that made it,
// and keeps the lanes it resolved.
func ExampleQueue_Lanes() {
	q := lanequeue.Default[string](16)
	defer q.Close()

	chat, err := q.Lanes("global", "session") // any order
	fmt.Println(chat.Names(), err)            // canonical order: keyed, then global

	_, err = q.Lanes("session", "gpu")
	fmt.Println(errors.Is(err, semaphore.ErrInvalidConfig), err)
	_, err = q.Lanes("session", "session")
	fmt.Println(errors.Is(err, semaphore.ErrInvalidConfig), err)
	_, err = q.Lanes()
	fmt.Println(errors.Is(err, semaphore.ErrInvalidConfig), err)

	// Another queue with lanes of the same names has other lanes.
	other := lanequeue.Default[string](16)
	defer other.Close()
	_, err = other.AcquireAll(context.Background(), "t1", chat)
	fmt.Println(errors.Is(err, semaphore.ErrInvalidConfig), err)

	// A lane added later is not in the sets made before.
	_ = q.Add("model-rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1, 10)))
	withRate, _ := q.Lanes("session", "global", "model-rpm")
	fmt.Println(chat.Names(), withRate.Names())
	// Output:
	// [session global] <nil>
	// true lanequeue: unknown lane "gpu": lanes: invalid configuration
	// true lanequeue: lane "session" named twice: lanes: invalid configuration
	// true lanequeue: no lanes named: lanes: invalid configuration
	// true lanequeue: the lane set was prepared by another queue: lanes: invalid configuration
	// [session global] [session global model-rpm]
}
