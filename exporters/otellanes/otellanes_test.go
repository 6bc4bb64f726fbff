package otellanes_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/otellanes"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// collect registers src's instruments on a meter provider read by an
// in-memory ManualReader, collects once and returns the metrics by name.
func collect(t *testing.T, src exporters.Source, opts ...otellanes.Option) (map[string]metricdata.Metrics, error) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := otellanes.Register(mp.Meter("otellanes_test"), src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Unregister() })
	var rm metricdata.ResourceMetrics
	err = reader.Collect(context.Background(), &rm)
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	return got, err
}

// point is one expected data point: lane, kind, outcome ("" for none), value.
type point struct {
	lane, kind, outcome string
	v                   int64
}

func attrs(p point, fixed ...attribute.KeyValue) attribute.Set {
	kv := append(fixed, otellanes.LaneKey.String(p.lane), otellanes.KindKey.String(p.kind))
	if p.outcome != "" {
		kv = append(kv, otellanes.OutcomeKey.String(p.outcome))
	}
	return attribute.NewSet(kv...)
}

func sum(name, unit string, monotonic bool, pts []point, fixed ...attribute.KeyValue) metricdata.Metrics {
	var dps []metricdata.DataPoint[int64]
	for _, p := range pts {
		dps = append(dps, metricdata.DataPoint[int64]{Attributes: attrs(p, fixed...), Value: p.v})
	}
	return metricdata.Metrics{Name: name, Unit: unit, Data: metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic, DataPoints: dps}}
}

func gauge(name, unit string, pts []point, fixed ...attribute.KeyValue) metricdata.Metrics {
	var dps []metricdata.DataPoint[int64]
	for _, p := range pts {
		dps = append(dps, metricdata.DataPoint[int64]{Attributes: attrs(p, fixed...), Value: p.v})
	}
	return metricdata.Metrics{Name: name, Unit: unit, Data: metricdata.Gauge[int64]{DataPoints: dps}}
}

// outcomesOf gives the five points of lanes.acquires for one lane.
func outcomesOf(lane, kind string, acquired, cancelled, timedOut, rejected, failed int64) []point {
	return []point{
		{lane, kind, "acquired", acquired}, {lane, kind, "cancelled", cancelled}, {lane, kind, "timed_out", timedOut},
		{lane, kind, "rejected", rejected}, {lane, kind, "failed", failed},
	}
}

func check(t *testing.T, got map[string]metricdata.Metrics, want []metricdata.Metrics) {
	t.Helper()
	for _, w := range want {
		g, ok := got[w.Name]
		if !ok {
			t.Errorf("no metric %s collected", w.Name)
			continue
		}
		g.Description = "" // checked once, below
		metricdatatest.AssertEqual(t, w, g, metricdatatest.IgnoreTimestamp())
	}
	if len(got) != len(want) {
		t.Errorf("%d metrics collected; want %d", len(got), len(want))
	}
}

// TestQueueCollect reads the scenario's queue through OpenTelemetry's
// in-memory reader and compares every instrument's data points, with
// their units and kinds (monotonic counters, up-down counters, a gauge),
// with the hand-counted figures.
func TestQueueCollect(t *testing.T) {
	q, stop := scenario.Queue(t)
	defer stop()
	got, err := collect(t, q)
	if err != nil {
		t.Fatal(err)
	}
	const s, g, r = "session", "global", "rate"
	check(t, got, []metricdata.Metrics{
		sum("lanes.capacity", "{permit}", false, []point{{s, "keyed", "", 3}, {g, "global", "", 3}, {r, "rate", "", 5}}),
		gauge("lanes.key.capacity", "{permit}", []point{{s, "keyed", "", 1}}),
		sum("lanes.in_use", "{permit}", false, []point{{s, "keyed", "", 1}, {g, "global", "", 1}, {r, "rate", "", 1}}),
		sum("lanes.waiting", "{caller}", false, []point{{s, "keyed", "", 1}, {g, "global", "", 0}, {r, "rate", "", 0}}),
		sum("lanes.keys", "{key}", false, []point{{s, "keyed", "", 3}}),
		gauge("lanes.closed", "1", []point{{s, "keyed", "", 0}, {g, "global", "", 0}, {r, "rate", "", 0}}),
		sum("lanes.acquires", "{call}", true, append(append(outcomesOf(s, "keyed", 4, 1, 0, 0, 0),
			outcomesOf(g, "global", 4, 0, 0, 0, 0)...), outcomesOf(r, "rate", 1, 0, 0, 0, 0)...)),
		sum("lanes.waited", "{call}", true, []point{{s, "keyed", "", 1}, {g, "global", "", 0}, {r, "rate", "", 0}}),
		sum("lanes.releases", "{release}", true, []point{{s, "keyed", "", 3}, {g, "global", "", 3}, {r, "rate", "", 0}}),
		sum("lanes.double_releases", "{release}", true, []point{{s, "keyed", "", 0}, {g, "global", "", 0}, {r, "rate", "", 0}}),
		sum("lanes.reorder.holds_run_out", "{call}", true, []point{{s, "keyed", "", 0}}),
	})
	for name, m := range got {
		if !strings.HasPrefix(name, "lanes.") || m.Description == "" {
			t.Errorf("metric %q (description %q): want the lanes. prefix and a description", name, m.Description)
		}
	}
}

// TestSemaphoreKeyedAttributes: semaphores and keyed semaphores on their
// own, under the names given, with fixed attributes on every point.
func TestSemaphoreKeyedAttributes(t *testing.T) {
	sem, stopS := scenario.Semaphore(t)
	defer stopS()
	k, stopK := scenario.Keyed(t)
	defer stopK()
	role := attribute.String("queue", "main")
	got, err := collect(t, exporters.Join(exporters.Semaphore("api", sem), exporters.Keyed("jobs", k)), otellanes.WithAttributes(role))
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, []metricdata.Metrics{
		sum("lanes.capacity", "{permit}", false, []point{{"api", "global", "", 4}, {"jobs", "keyed", "", 4}}, role),
		gauge("lanes.key.capacity", "{permit}", []point{{"jobs", "keyed", "", 2}}, role),
		sum("lanes.in_use", "{permit}", false, []point{{"api", "global", "", 3}, {"jobs", "keyed", "", 1}}, role),
		sum("lanes.waiting", "{caller}", false, []point{{"api", "global", "", 0}, {"jobs", "keyed", "", 0}}, role),
		sum("lanes.keys", "{key}", false, []point{{"jobs", "keyed", "", 2}}, role),
		gauge("lanes.closed", "1", []point{{"api", "global", "", 0}, {"jobs", "keyed", "", 0}}, role),
		sum("lanes.acquires", "{call}", true, append(outcomesOf("api", "global", 2, 0, 0, 1, 0), outcomesOf("jobs", "keyed", 2, 0, 0, 0, 0)...), role),
		sum("lanes.waited", "{call}", true, []point{{"api", "global", "", 0}, {"jobs", "keyed", "", 0}}, role),
		sum("lanes.releases", "{release}", true, []point{{"api", "global", "", 1}, {"jobs", "keyed", "", 1}}, role),
		sum("lanes.double_releases", "{release}", true, []point{{"api", "global", "", 1}, {"jobs", "keyed", "", 0}}, role),
		sum("lanes.reorder.holds_run_out", "{call}", true, []point{{"jobs", "keyed", "", 0}}, role),
	})
}

// TestRepeatedLane: a name given twice is observed once, and the
// collection reports an error naming it.
func TestRepeatedLane(t *testing.T) {
	sem, stop := scenario.Semaphore(t)
	defer stop()
	got, err := collect(t, exporters.Join(exporters.Semaphore("global", sem), exporters.Semaphore("global", sem)))
	if err == nil || !strings.Contains(err.Error(), `lane "global" twice`) {
		t.Fatalf("collect: %v; want an error naming the lane", err)
	}
	if c, ok := got["lanes.capacity"].Data.(metricdata.Sum[int64]); !ok || len(c.DataPoints) != 1 || c.DataPoints[0].Value != 4 {
		t.Fatalf("lanes.capacity %+v; want one point, 4", got["lanes.capacity"].Data)
	}
}

// TestUnregister: after Unregister the source is no longer read.
func TestUnregister(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	reads := 0
	src := exporters.SourceFunc(func() []lanequeue.LaneStats { reads++; return nil })
	reg, err := otellanes.Register(mp.Meter("t"), src)
	if err != nil {
		t.Fatal(err)
	}
	reads = 0 // Register's own read, of the lanes it checks
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil || reads != 1 {
		t.Fatalf("collect: %v, %d reads; want 1", err, reads)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := reader.Collect(context.Background(), &rm); err != nil || reads != 1 {
		t.Fatalf("collect after Unregister: %v, %d reads; want still 1", err, reads)
	}
}

// TestProducerHistograms: a reader given the Producer collects the
// histograms of a lane made WithHistograms (scenario.Timed, on a fake
// clock) bucket by bucket, in seconds, as cumulative histograms; lanes
// without histograms produce nothing.
func TestProducerHistograms(t *testing.T) {
	q, stop := scenario.Timed(t)
	defer stop()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(otellanes.NewProducer(q, otellanes.WithAttributes(attribute.String("queue", "main")))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Name != otellanes.ScopeName {
		t.Fatalf("scopes %+v; want the producer's alone", rm.ScopeMetrics)
	}
	var bounds []float64
	for _, d := range semaphore.HistogramBounds() {
		bounds = append(bounds, d.Seconds())
	}
	set := attribute.NewSet(attribute.String("queue", "main"), otellanes.LaneKey.String("api"), otellanes.KindKey.String("global"))
	hist := func(name string, sum float64, at map[int]uint64) metricdata.Metrics {
		counts := make([]uint64, semaphore.HistogramBuckets)
		var n uint64
		for i, c := range at {
			counts[i], n = c, n+c
		}
		return metricdata.Metrics{Name: name, Unit: "s", Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints:  []metricdata.HistogramDataPoint[float64]{{Attributes: set, Count: n, Bounds: bounds, BucketCounts: counts, Sum: sum}},
		}}
	}
	// Bucket 0 is [0, 1µs], 11 is (2ms, 5ms], 13 is (10ms, 20ms].
	want := []metricdata.Metrics{
		hist("lanes.wait.duration", 0.020, map[int]uint64{0: 2, 13: 1}),
		hist("lanes.hold.duration", 0.023, map[int]uint64{11: 1, 13: 1}),
	}
	got := rm.ScopeMetrics[0].Metrics
	if len(got) != 2 {
		t.Fatalf("%d metrics; want 2", len(got))
	}
	for i := range want {
		g := got[i]
		if g.Description == "" {
			t.Errorf("%s: no description", g.Name)
		}
		g.Description = ""
		metricdatatest.AssertEqual(t, want[i], g, metricdatatest.IgnoreTimestamp())
	}

	plain, stopPlain := scenario.Queue(t)
	defer stopPlain()
	if sm, err := otellanes.NewProducer(plain).Produce(context.Background()); err != nil || len(sm) != 0 {
		t.Fatalf("lanes without histograms: %+v, %v; want nothing", sm, err)
	}
	if _, err := otellanes.NewProducer(exporters.Join(q, q)).Produce(context.Background()); err == nil || !strings.Contains(err.Error(), `lane "api" twice`) {
		t.Fatalf("a repeated lane: %v; want an error naming it", err)
	}
}

// TestFixedAttributeCannotRenameALane: a fixed attribute with the key
// lanes.lane does not replace the lane's own name.
func TestFixedAttributeCannotRenameALane(t *testing.T) {
	sem, stop := scenario.Semaphore(t)
	defer stop()
	got, err := collect(t, exporters.Semaphore("api", sem), otellanes.WithAttributes(otellanes.LaneKey.String("other")))
	if err != nil {
		t.Fatal(err)
	}
	for _, dp := range got["lanes.capacity"].Data.(metricdata.Sum[int64]).DataPoints {
		if v, _ := dp.Attributes.Value(otellanes.LaneKey); v.AsString() != "api" {
			t.Fatalf("lane attribute %q; want the lane's own, api", v.AsString())
		}
	}
}

// TestReorderHoldsRunOut: a keyed lane's reorder holds that ran out
// (keyedsem.Stats.HoldsRunOut) are observed, from a queue's keyed lane and
// from a keyed semaphore on its own alike.
func TestReorderHoldsRunOut(t *testing.T) {
	k, stop := scenario.Reordered(t)
	defer stop()
	q := lanequeue.New[string]()
	if err := q.Add("thread", lanequeue.NewKeyedLane(k)); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]exporters.Source{"queue": q, "keyed": exporters.Keyed("thread", k)} {
		got, err := collect(t, src)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := got["lanes.reorder.holds_run_out"]
		if !ok {
			t.Errorf("from a %s source: no lanes.reorder.holds_run_out", name)
			continue
		}
		m.Description = ""
		metricdatatest.AssertEqual(t, sum("lanes.reorder.holds_run_out", "{call}", true, []point{{"thread", "keyed", "", 1}}), m,
			metricdatatest.IgnoreTimestamp())
	}
}

// TestProducerRedisLane: a Redis lane made redislane.WithHistograms, in a
// queue, has its wait and hold histograms produced like any other lane's:
// the instance's one grant in lanes.wait.duration, no release yet in
// lanes.hold.duration.
func TestProducerRedisLane(t *testing.T) {
	instances, _, _, stop := scenario.UsageRedis(t)
	defer stop()
	sm, err := otellanes.NewProducer(instances[0]).Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]uint64{}
	for _, s := range sm {
		for _, m := range s.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				if lane, _ := dp.Attributes.Value(otellanes.LaneKey); lane.AsString() == scenario.FleetLane {
					count[m.Name] = dp.Count
				}
			}
		}
	}
	if len(count) != 2 || count["lanes.wait.duration"] != 1 || count["lanes.hold.duration"] != 0 {
		t.Fatalf("histograms of the Redis lane %q: %v; want a wait of 1 grant and a hold of none", scenario.FleetLane, count)
	}
}

// TestRegisterRefusesANilQueue: a nil *lanequeue.Queue panics in
// Register, as a nil Source does, not at the first collection.
func TestRegisterRefusesANilQueue(t *testing.T) {
	var q *lanequeue.Queue[string]
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() {
		if r := recover(); r != "otellanes: nil source" {
			t.Fatalf("recovered %v; want the nil source panic", r)
		}
	}()
	_, _ = otellanes.Register(mp.Meter("t"), q)
	t.Fatal("Register(nil *Queue) returned")
}

// TestCooldownInstruments: from a lane's first pause on, the lane has its
// cooldown data points: the time left, the callers waiting it out, the
// calls refused for a deadline before its end.
func TestCooldownInstruments(t *testing.T) {
	got, err := collect(t, scenario.Paused(t))
	if err != nil {
		t.Fatal(err)
	}
	left, ok := got["lanes.cooldown.remaining"].Data.(metricdata.Gauge[float64])
	if !ok || len(left.DataPoints) != 1 || left.DataPoints[0].Value != 60 {
		t.Fatalf("lanes.cooldown.remaining = %+v; want one point of 60", got["lanes.cooldown.remaining"])
	}
	refused, ok := got["lanes.cooldown.refused"].Data.(metricdata.Sum[int64])
	if !ok || len(refused.DataPoints) != 1 || refused.DataPoints[0].Value != 1 {
		t.Fatalf("lanes.cooldown.refused = %+v; want one point of 1", got["lanes.cooldown.refused"])
	}
	if _, ok := got["lanes.cooldown.waiting"]; !ok {
		t.Fatal("no lanes.cooldown.waiting")
	}
}
