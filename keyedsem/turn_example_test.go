package keyedsem_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// runInTurn holds key, queues one caller per Turn (in the order given, each
// waiting before the next starts), then lets them run one by one, and
// prints the labels in the order they ran.
func runInTurn(s *keyedsem.Keyed[string], key string, labels []string, turns [][]semaphore.AcquireOption) {
	ctx := context.Background()
	first, err := s.Acquire(ctx, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ran []string
	for i, tn := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(ctx, key, tn...)
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			ran = append(ran, labels[i])
			mu.Unlock()
			p.Release()
		}()
		for s.Stats().Waiters != i+1 { // until it waits
			runtime.Gosched()
		}
	}
	first.Release()
	wg.Wait()
	fmt.Println(ran)
}

// A chat thread's messages 4, 2 and 3 reach the server in that order while
// message 1 runs: the thread's key runs them by sequence.
func ExampleWithSequenceOrder() {
	s := keyedsem.New[string](keyedsem.WithSequenceOrder())
	defer s.Close()
	runInTurn(s, "thread-1", []string{"4", "2", "3"}, [][]semaphore.AcquireOption{{semaphore.Sequence(4)}, {semaphore.Sequence(2)}, {semaphore.Sequence(3)}})
	// Output: [2 3 4]
}

// A cron job, a heartbeat and a user's turn wait for one session: the
// user's turn goes first, and the cron job, passed for now, would rise by
// one priority for every minute it waits.
func ExampleWithPriorities() {
	s := keyedsem.New[string](keyedsem.WithPriorities(time.Minute))
	defer s.Close()
	runInTurn(s, "session-1", []string{"cron", "heartbeat", "user"}, [][]semaphore.AcquireOption{{semaphore.Priority(-1)}, {}, {semaphore.Priority(1)}})
	// Output: [user heartbeat cron]
}
