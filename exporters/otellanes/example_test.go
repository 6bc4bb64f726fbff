package otellanes_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/otellanes"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway's queue on an OpenTelemetry meter provider (with a periodic
// reader and an OTLP exporter in production; an in-memory reader here):
// one message of thread "t1" is being handled.
func Example() {
	q := lanequeue.Default[string](16)
	defer q.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	reg, err := otellanes.Register(mp.Meter("gateway"), q)
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	chat, _ := q.Lanes("session", "global")
	t, _ := q.AcquireAll(context.Background(), "t1", chat)
	defer t.Release()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "lanes.in_use" && m.Name != "lanes.capacity" {
			continue
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			lane, _ := dp.Attributes.Value(otellanes.LaneKey)
			lines = append(lines, fmt.Sprintf("%s %s lanes.lane=%s %d", m.Name, m.Unit, lane.AsString(), dp.Value))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// lanes.capacity {permit} lanes.lane=global 16
	// lanes.capacity {permit} lanes.lane=session 1
	// lanes.in_use {permit} lanes.lane=global 1
	// lanes.in_use {permit} lanes.lane=session 1
}

// An adaptive controller's state beside the lanes': a refusal (a 429)
// lowered the limit from 4 to 3. (One refusal: whether a second one lowers
// it again depends on whether its work was admitted before the first's
// cut, to about a millisecond of the system clock, which a fixed output
// cannot show.)
func ExampleRegisterLimits() {
	sem := semaphore.New(4)
	ctl, err := adaptive.New(sem, 1, 64)
	if err != nil {
		panic(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	reg, err := otellanes.RegisterLimits(mp.Meter("gateway"), exporters.Controllers(map[string]*adaptive.Controller{"model": ctl}))
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	ctl.Report(adaptive.Overload, time.Millisecond) // a call refused after 1ms
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		var dps []metricdata.DataPoint[int64]
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			dps = d.DataPoints
		case metricdata.Gauge[int64]:
			dps = d.DataPoints
		}
		if m.Name != "lanes.adaptive.limit" && m.Name != "lanes.adaptive.last_reason" {
			continue
		}
		for _, dp := range dps {
			lane, _ := dp.Attributes.Value(otellanes.LaneKey)
			l := fmt.Sprintf("%s lanes.lane=%s", m.Name, lane.AsString())
			if r, ok := dp.Attributes.Value(otellanes.ReasonKey); ok {
				l += " lanes.reason=" + r.AsString()
			}
			lines = append(lines, fmt.Sprintf("%s %d", l, dp.Value))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// lanes.adaptive.last_reason lanes.lane=model lanes.reason=growth 0
	// lanes.adaptive.last_reason lanes.lane=model lanes.reason=latency 0
	// lanes.adaptive.last_reason lanes.lane=model lanes.reason=none 0
	// lanes.adaptive.last_reason lanes.lane=model lanes.reason=overload 1
	// lanes.adaptive.limit lanes.lane=model 3
}
