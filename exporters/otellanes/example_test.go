package otellanes_test

import (
	"context"
	"fmt"
	"sort"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters/otellanes"
	"github.com/sessionlane/lanes/lanequeue"
)

// A gateway's queue on an OpenTelemetry meter provider (with a periodic
// reader and an OTLP exporter in production; an in-memory reader here):
// one message of thread "t1" is being handled.
func Example() {
	q := lanequeue.Default[string](lanequeue.DefaultGlobalCapacity)
	defer q.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	reg, err := otellanes.Register(mp.Meter("gateway"), q)
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	chat, _ := q.Lanes(lanequeue.SessionLane, lanequeue.GlobalLane)
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
