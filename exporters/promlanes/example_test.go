package promlanes_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/promlanes"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway's queue on a Prometheus registry (serve it with promhttp):
// here one message of thread "t1" is being handled, and the scrape shows
// the permits in use per lane.
func Example() {
	q := lanequeue.Default[string](16)
	defer q.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(q))

	chat, _ := q.Lanes("session", "global")
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

// A global lane driven by an adaptive controller, with the controller's
// state beside the lanes' on one registry: a refusal (a 429) lowered the
// limit from 4 to 3. (One refusal: whether a second one lowers it again
// depends on whether its work was admitted before the first's cut, to
// about a millisecond of the system clock, which a fixed output cannot
// show.)
func ExampleNewLimits() {
	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(4)
	_ = q.Add("model", lanequeue.NewGlobalLane[string](sem))
	ctl, _ := adaptive.New(sem, 1, 64)
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(q), promlanes.NewLimits(exporters.Controllers(map[string]*adaptive.Controller{"model": ctl})))

	ctl.Report(adaptive.Overload, time.Millisecond) // a call refused after 1ms
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "lanes_capacity_permits", "lanes_adaptive_limit_permits", "lanes_adaptive_decreases_total", "lanes_adaptive_last_reason":
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Printf("%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), v)
		}
	}
	// Output:
	// lanes_adaptive_decreases_total{lane=model,reason=latency} 0
	// lanes_adaptive_decreases_total{lane=model,reason=overload} 1
	// lanes_adaptive_last_reason{lane=model,reason=growth} 0
	// lanes_adaptive_last_reason{lane=model,reason=latency} 0
	// lanes_adaptive_last_reason{lane=model,reason=none} 0
	// lanes_adaptive_last_reason{lane=model,reason=overload} 1
	// lanes_adaptive_limit_permits{lane=model} 3
	// lanes_capacity_permits{kind=global,lane=model} 3
}

// A replica of a service whose lane "model" is a budget the replicas share
// in Redis (q.Add("model", redislane.AsLane[string](fleet)); a local lane
// of the fleet's capacity stands in for it here): exporters.Fleet marks
// it, so the scrape reports its capacity as lanes_fleet_capacity_permits,
// which a dashboard aggregates across replicas with max, beside this
// replica's own use, which it sums. With three threads held, the keyed
// lane's capacity is that of its three live keys.
func ExampleNew_fleet() {
	q := lanequeue.New[string]()
	defer q.Close()
	_ = q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]()))
	_ = q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(48))) // redislane.AsLane[string](fleet) in a real fleet
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(exporters.Fleet(q, "model")))

	chat, _ := q.Lanes("session", "model")
	for _, thread := range []string{"t1", "t2", "t3"} {
		t, _ := q.AcquireAll(context.Background(), thread, chat)
		defer t.Release()
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "_permits") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var lane string
			for _, l := range m.GetLabel() {
				if l.GetName() == "lane" {
					lane = l.GetValue()
				}
			}
			fmt.Printf("%s{lane=%s} %v\n", mf.GetName(), lane, m.GetGauge().GetValue())
		}
	}
	// Output:
	// lanes_capacity_permits{lane=session} 3
	// lanes_fleet_capacity_permits{lane=model} 48
	// lanes_in_use_permits{lane=model} 3
	// lanes_in_use_permits{lane=session} 3
	// lanes_key_capacity_permits{lane=session} 1
}
