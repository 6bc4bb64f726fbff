package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway shutting down: Drain refuses new messages at once, lets the
// reply in progress and the message already in line behind it on its
// thread (a Place) finish, and closes the queue once both are done. A deadline
// bounds the wait; a drain cut short leaves the queue draining (Close then
// fails whatever still waits).
func Example_drainOnShutdown() {
	q := lanequeue.Default[string](4)
	chat, err := q.Lanes("session", "global")
	if err != nil {
		panic(err)
	}

	// A reply in progress on thread "alice", and her next message queued.
	reply, err := q.AcquireAll(context.Background(), "alice", chat)
	if err != nil {
		panic(err)
	}
	place, err := q.Join("alice", chat) // her next message, in line behind it
	if err != nil {
		panic(err)
	}
	next := make(chan error)
	go func() { // the worker for her next message
		t, err := place.Wait(context.Background())
		if err == nil {
			fmt.Println("alice's queued message is answered")
			t.Release()
		}
		next <- err
	}()

	// SIGTERM: drain with a deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drained := make(chan error)
	go func() { drained <- q.Drain(ctx) }()
	for !q.Draining() {
		runtime.Gosched() // until Drain has begun
	}

	_, err = q.AcquireAll(context.Background(), "bob", chat)
	fmt.Println("bob, during the drain:", err, errors.Is(err, semaphore.ErrClosed))

	fmt.Println("alice's reply is done")
	reply.Release()
	fmt.Println("queued message:", <-next)
	fmt.Println("drain:", <-drained)
	_, err = q.AcquireAll(context.Background(), "bob", chat)
	fmt.Println("bob, after:", err)
	// Output:
	// bob, during the drain: lanequeue: draining: lanes: closed true
	// alice's reply is done
	// alice's queued message is answered
	// queued message: <nil>
	// drain: <nil>
	// bob, after: lanes: closed
}
