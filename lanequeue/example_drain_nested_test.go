package lanequeue_test

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Drain with nested work: a webhook admitted on its thread's lane before
// the drain calls the model (another lane of the same queue, another key)
// during the drain. The model call is part of the admitted work (its
// context carries the webhook's ticket, as Do's function's does), so it is
// served and the drain waits for it; a webhook that arrives during the
// drain is new work and is refused.
func Example_drainWithNestedWork() {
	q := lanequeue.New[string]()
	if err := q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string]())); err != nil {
		panic(err)
	}
	if err := q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(2))); err != nil {
		panic(err)
	}
	thread, err := q.Lanes("thread")
	if err != nil {
		panic(err)
	}
	model, err := q.Lanes("model")
	if err != nil {
		panic(err)
	}

	admitted, goOn, answered := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() { // the handler of a webhook on thread "t-1"
		answered <- q.Do(context.Background(), "t-1", thread, func(ctx context.Context) error {
			close(admitted)
			<-goOn // reads the message, meanwhile the drain begins
			return q.Do(ctx, "tenant-a", model, func(context.Context) error {
				fmt.Println("t-1: the model answers")
				return nil
			})
		})
	}()
	<-admitted

	// SIGTERM: drain with a deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drained := make(chan error)
	go func() { drained <- q.Drain(ctx) }()
	for !q.Draining() {
		runtime.Gosched() // until Drain has begun
	}

	err = q.Do(context.Background(), "t-2", thread, func(context.Context) error { return nil })
	fmt.Println("t-2, a new webhook during the drain:", err)

	close(goOn)
	fmt.Println("t-1, admitted before the drain:", <-answered)
	fmt.Println("drain:", <-drained)
	// Output:
	// t-2, a new webhook during the drain: lanequeue: draining: lanes: closed
	// t-1: the model answers
	// t-1, admitted before the drain: <nil>
	// drain: <nil>
}
