package promlanes_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessionlane/lanes/exporters/promlanes"
	"github.com/sessionlane/lanes/lanequeue"
)

// A gateway's queue on a Prometheus registry (serve it with promhttp):
// here one message of thread "t1" is being handled, and the scrape shows
// the permits in use per lane.
func Example() {
	q := lanequeue.Default[string](lanequeue.DefaultGlobalCapacity)
	defer q.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(q))

	chat, _ := q.Lanes(lanequeue.SessionLane, lanequeue.GlobalLane)
	t, _ := q.AcquireAll(context.Background(), "t1", chat)
	defer t.Release()

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "lanes_in_use_permits" && mf.GetName() != "lanes_capacity_permits" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Printf("%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
		}
	}
	n, _ := testutil.GatherAndCount(reg, "lanes_acquires_total")
	fmt.Println("lanes_acquires_total series:", n)
	// Output:
	// lanes_capacity_permits{kind=global,lane=global} 16
	// lanes_capacity_permits{kind=keyed,lane=session} 1
	// lanes_in_use_permits{kind=global,lane=global} 1
	// lanes_in_use_permits{kind=keyed,lane=session} 1
	// lanes_acquires_total series: 10
}
