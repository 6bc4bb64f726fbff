package semaphore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/sessionlane/lanes/semaphore"
)

// fairDemo holds api's one permit while it queues the requests (tenant
// and number, in that order), then lets them through one at a time, and
// prints the order they ran in.
func fairDemo(api *semaphore.Weighted, requests []string) {
	ctx := context.Background()
	busy, _ := api.TryAcquire(1) // a call in flight
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, r := range requests {
		tenant := strings.TrimRight(r, "0123456789")
		n := api.Stats().Waiters
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := api.Acquire(ctx, 1, semaphore.Group(tenant))
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			order = append(order, r) // the call to the model API
			mu.Unlock()
			p.Release()
		}()
		for api.Stats().Waiters == n { // waits until it queues, so that the order is the one above
			runtime.Gosched()
		}
	}
	busy.Release()
	wg.Wait()
	fmt.Println(strings.Join(order, " "))
}

// Two tenants share a model API that takes one call at a time. "big" has
// six requests waiting when "small" sends two; with fair share, small's
// requests do not wait for all of big's: the tenants take turns while
// both wait, each in its own arrival order.
func ExampleWithFairShare() {
	api := semaphore.New(1, semaphore.WithFairShare(nil))
	fairDemo(api, []string{"big1", "big2", "big3", "big4", "big5", "big6", "small1", "small2"})
	// Output: big1 small1 big2 small2 big3 big4 big5 big6
}

// A paying tenant of weight 2 gets two calls for each one of a free
// tenant of weight 1 while both wait.
func ExampleWithFairShare_weights() {
	weight := func(tenant string) int {
		if tenant == "pro" {
			return 2
		}
		return 1
	}
	api := semaphore.New(1, semaphore.WithFairShare(weight))
	fairDemo(api, []string{"pro1", "pro2", "pro3", "pro4", "free1", "free2", "free3", "free4"})
	// Output: pro1 free1 pro2 pro3 free2 pro4 free3 free4
}
