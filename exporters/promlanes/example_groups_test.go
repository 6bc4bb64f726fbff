package promlanes_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/promlanes"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway's agents lane shared fairly by tenants: the queue's hooks
// feed a GroupWaits, and the scrape shows the small tenant's wait apart
// from the big tenant's three (the lane's own lanes_wait_seconds mixes
// them). Each tenant has its own series here; past 10 tenants (TopGroups)
// the later ones would be summed as group="other".
func ExampleWithGroupWaits() {
	q := lanequeue.New[string]()
	defer q.Close()
	_ = q.Add("agents", lanequeue.NewGlobalLane[string](semaphore.New(1, semaphore.WithFairShare(nil))))
	groups := exporters.NewGroupWaits()
	q.SetHooks(exporters.GroupHooks(groups, lanequeue.Hooks[string]{})) // or around LogHooks
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(q, promlanes.WithGroupWaits(groups)))

	agents, _ := q.Lanes("agents")
	ctx := context.Background()
	busy, _ := q.AcquireAll(ctx, "big/t0", agents, semaphore.Group("big"))
	var wg sync.WaitGroup
	for _, thread := range []string{"big/t1", "big/t2", "small/t1", "big/t3"} {
		tenant := thread[:len(thread)-3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if t, err := q.AcquireAll(ctx, thread, agents, semaphore.Group(tenant)); err == nil {
				t.Release()
			}
		}()
	}
	for q.Stats()[0].Waiters < 4 { // all four in line
		runtime.Gosched()
	}
	busy.Release()
	wg.Wait()

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "lanes_group_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var group string
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					group = l.GetValue()
				}
			}
			fmt.Printf("lanes_group_wait_seconds_count{lane=agents,group=%s} %d\n", group, m.GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// lanes_group_wait_seconds_count{lane=agents,group=big} 3
	// lanes_group_wait_seconds_count{lane=agents,group=other} 0
	// lanes_group_wait_seconds_count{lane=agents,group=small} 1
}
