package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/sessionlane/lanes/semaphore"
)

// A gateway summarises eight conversations, but the model API it calls
// allows three calls at once. The loop takes a permit before it starts each
// worker and hands the permit to it; the worker releases it when done.
// Taking the whole capacity at the end waits for the last workers.
func ExampleWeighted_workerPool() {
	const maxCalls = 3
	api := semaphore.New(maxCalls)
	ctx := context.Background()

	threads := []string{"billing", "refund", "login", "upgrade", "invoice", "export", "delete", "support"}
	summaries := make([]string, len(threads))
	var running atomic.Int64
	var over atomic.Bool // set if more than maxCalls ever ran at once

	for i, thread := range threads {
		p, err := api.Acquire(ctx, 1) // waits while three workers run
		if err != nil {
			fmt.Println("acquire:", err)
			return
		}
		go func() {
			defer p.Release() // the worker owns the permit now
			if running.Add(1) > maxCalls {
				over.Store(true)
			}
			summaries[i] = thread + ": summarised" // the call to the model
			running.Add(-1)
		}()
	}

	// Wait for every worker: all permits free means all are done.
	all, err := api.Acquire(ctx, maxCalls)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	all.Release()

	for _, s := range summaries {
		fmt.Println(s)
	}
	fmt.Println("more than", maxCalls, "calls at once:", over.Load())
	// Output:
	// billing: summarised
	// refund: summarised
	// login: summarised
	// upgrade: summarised
	// invoice: summarised
	// export: summarised
	// delete: summarised
	// support: summarised
	// more than 3 calls at once: false
}

// A GPU pool of ten units serves inference requests of one unit and
// training jobs of eight. A training job that waits at the head of the
// queue is not overtaken by later inference requests, even though single
// units are free: otherwise a steady stream of small requests would starve
// it forever.
func ExampleWeighted_weights() {
	gpu := semaphore.New(10)
	ctx := context.Background()

	// Three inference requests are running: seven units are free.
	inf1, _ := gpu.TryAcquire(1)
	inf2, _ := gpu.TryAcquire(1)
	inf3, _ := gpu.TryAcquire(1)

	// A training job needs eight: it waits at the head of the queue.
	training := make(chan semaphore.Permit)
	go func() {
		p, err := gpu.Acquire(ctx, 8)
		if err != nil {
			panic(err)
		}
		training <- p
	}()
	for gpu.Stats().Waiters < 1 {
		runtime.Gosched() // until the training job is queued
	}

	// A new inference request finds seven free units but may not pass it.
	_, ok := gpu.TryAcquire(1)
	fmt.Println("inference admitted ahead of the training job:", ok)

	// Another one waits, behind the training job.
	inference := make(chan semaphore.Permit)
	go func() {
		p, err := gpu.Acquire(ctx, 1)
		if err != nil {
			panic(err)
		}
		inference <- p
	}()
	for gpu.Stats().Waiters < 2 {
		runtime.Gosched() // until it is queued
	}
	st := gpu.Stats()
	fmt.Printf("free %d, waiting %d for %d units\n", st.Available, st.Waiters, st.WaitingWeight)

	// One request ends: eight units are free, the training job starts.
	inf1.Release()
	train := <-training
	fmt.Println("training job starts with", train.Weight(), "units")

	// The next request to end frees the unit the waiting request needs.
	inf2.Release()
	inf4 := <-inference
	fmt.Println("queued inference request starts with", inf4.Weight(), "unit")

	train.Release()
	inf3.Release()
	inf4.Release()
	fmt.Println("free at the end:", gpu.Stats().Available)
	// Output:
	// inference admitted ahead of the training job: false
	// free 7, waiting 2 for 9 units
	// training job starts with 8 units
	// queued inference request starts with 1 unit
	// free at the end: 10
}

// A job runner allows two database connections at once. Do takes the
// permits, runs the job, and releases them when the job returns, even if it
// fails or panics.
func ExampleWeighted_Do() {
	db := semaphore.New(2)
	ctx := context.Background()

	err := db.Do(ctx, 1, func(ctx context.Context) error {
		fmt.Println("report job running, connections in use:", db.Stats().Held)
		return nil
	})
	fmt.Println("report job:", err, "- in use after:", db.Stats().Held)

	errFailed := errors.New("export failed")
	err = db.Do(ctx, 2, func(ctx context.Context) error { return errFailed })
	fmt.Println("export job:", err, "- in use after:", db.Stats().Held)

	err = db.Do(ctx, 3, func(ctx context.Context) error { return nil })
	fmt.Println("migration job needing 3 connections:", errors.Is(err, semaphore.ErrTooHeavy))
	// Output:
	// report job running, connections in use: 1
	// report job: <nil> - in use after: 0
	// export job: export failed - in use after: 0
	// migration job needing 3 connections: true
}

// A request handler defers the release of its permit, but gives the permit
// back early, as soon as the upstream call is done, so that the next
// request need not wait for the logging. The deferred release then does
// nothing: a permit releases exactly once, whichever copy of the handle is
// used, and the extra call is counted.
func ExamplePermit_Release() {
	upstream := semaphore.New(1)

	handle := func() {
		p, err := upstream.Acquire(context.Background(), 1)
		if err != nil {
			return
		}
		defer func() { fmt.Println("deferred release:", p.Release()) }()
		// ... call upstream ...
		fmt.Println("early release:", p.Release())
		// ... write logs, without holding the permit ...
	}
	handle()

	st := upstream.Stats()
	fmt.Println("available:", st.Available, "double releases:", st.DoubleReleases)
	// Output:
	// early release: true
	// deferred release: false
	// available: 1 double releases: 1
}
