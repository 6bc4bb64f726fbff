package semaphore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// A gateway runs one turn at a time: a user's message goes before a
// heartbeat, which goes before a cron job, but the cron job is not
// starved. With a step of a minute, its priority rises by one for every
// minute it waits, so after two minutes (user 1 minus cron -1, times the
// step) no new user turn gets ahead of it. Here all four arrive within
// moments, and are served by priority.
func ExampleWithPriorities() {
	const (
		cron = -1
		user = 1 // heartbeats call plain Acquire: priority 0
	)
	s := semaphore.New(1, semaphore.WithPriorities(time.Minute))
	running, _ := s.TryAcquire(1) // a turn that runs now

	served := make(chan string, 4)
	var wg sync.WaitGroup
	join := func(name string, acquire func() (semaphore.Permit, error)) {
		want := s.Stats().Waiters + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := acquire()
			if err != nil {
				served <- err.Error()
				return
			}
			served <- name
			p.Release()
		}()
		for s.Stats().Waiters < want {
			runtime.Gosched() // until it waits
		}
	}
	turn := func(priority int) func() (semaphore.Permit, error) {
		return func() (semaphore.Permit, error) {
			return s.Acquire(context.Background(), 1, semaphore.Priority(priority))
		}
	}
	join("cron: rotate the logs", turn(cron))
	join("heartbeat", func() (semaphore.Permit, error) { return s.Acquire(context.Background(), 1) })
	join("user: hello", turn(user))
	join("user: thanks", turn(user))

	running.Release()
	wg.Wait()
	close(served)
	for name := range served {
		fmt.Println(name)
	}
	// Output:
	// user: hello
	// user: thanks
	// heartbeat
	// cron: rotate the logs
}
