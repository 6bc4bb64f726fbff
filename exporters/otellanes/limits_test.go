package otellanes_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/otellanes"
)

// collectLimits is collect for RegisterLimits.
func collectLimits(t *testing.T, src exporters.LimitSource, opts ...otellanes.Option) (map[string]metricdata.Metrics, error) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := otellanes.RegisterLimits(mp.Meter("otellanes_test"), src, opts...)
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

// lp is one expected data point of a limit: lane, an extra attribute
// (none if its key is empty), value.
type lp[N int64 | float64] struct {
	lane string
	kv   attribute.KeyValue
	v    N
}

func lattrs(lane string, kv attribute.KeyValue, fixed ...attribute.KeyValue) attribute.Set {
	all := append(append([]attribute.KeyValue(nil), fixed...), otellanes.LaneKey.String(lane))
	if kv.Key != "" {
		all = append(all, kv)
	}
	return attribute.NewSet(all...)
}

func lsum(name, unit string, monotonic bool, pts []lp[int64], fixed ...attribute.KeyValue) metricdata.Metrics {
	var dps []metricdata.DataPoint[int64]
	for _, p := range pts {
		dps = append(dps, metricdata.DataPoint[int64]{Attributes: lattrs(p.lane, p.kv, fixed...), Value: p.v})
	}
	return metricdata.Metrics{Name: name, Unit: unit, Data: metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic, DataPoints: dps}}
}

func lgauge[N int64 | float64](name, unit string, pts []lp[N], fixed ...attribute.KeyValue) metricdata.Metrics {
	var dps []metricdata.DataPoint[N]
	for _, p := range pts {
		dps = append(dps, metricdata.DataPoint[N]{Attributes: lattrs(p.lane, p.kv, fixed...), Value: p.v})
	}
	return metricdata.Metrics{Name: name, Unit: unit, Data: metricdata.Gauge[N]{DataPoints: dps}}
}

var none attribute.KeyValue

func reason(r string) attribute.KeyValue  { return otellanes.ReasonKey.String(r) }
func outcome(o string) attribute.KeyValue { return otellanes.OutcomeKey.String(o) }

// lastReasons gives the four points of lanes.adaptive.last_reason of a
// lane whose last reason is last.
func lastReasons(lane, last string) []lp[int64] {
	var out []lp[int64]
	for _, r := range []string{"none", "growth", "overload", "latency"} {
		v := int64(0)
		if r == last {
			v = 1
		}
		out = append(out, lp[int64]{lane, reason(r), v})
	}
	return out
}

// TestLimitsCollect reads scenario.Controllers through the in-memory
// reader and compares every instrument's points, units and kinds with the
// hand-counted figures of scenario's doc (Epoch is 1796083200 s; the
// baseline of "slow" rose from 1 s by 1/2048 of the gap to 2 s).
func TestLimitsCollect(t *testing.T) {
	role := attribute.String("queue", "main")
	got, err := collectLimits(t, exporters.Controllers(scenario.Controllers(t)), otellanes.WithAttributes(role))
	if err != nil {
		t.Fatal(err)
	}
	const i, m, s = "idle", "model", "slow"
	check(t, got, []metricdata.Metrics{
		lsum("lanes.adaptive.limit", "{permit}", false, []lp[int64]{{i, none, 4}, {m, none, 9}, {s, none, 6}}, role),
		lsum("lanes.adaptive.floor", "{permit}", false, []lp[int64]{{i, none, 1}, {m, none, 2}, {s, none, 1}}, role),
		lsum("lanes.adaptive.ceiling", "{permit}", false, []lp[int64]{{i, none, 4}, {m, none, 20}, {s, none, 16}}, role),
		lsum("lanes.adaptive.increases", "{move}", true, []lp[int64]{{i, reason("growth"), 0}, {m, reason("growth"), 1}, {s, reason("growth"), 1}}, role),
		lsum("lanes.adaptive.decreases", "{move}", true, []lp[int64]{
			{i, reason("overload"), 0}, {i, reason("latency"), 0},
			{m, reason("overload"), 1}, {m, reason("latency"), 0},
			{s, reason("overload"), 0}, {s, reason("latency"), 1}}, role),
		lgauge("lanes.adaptive.last_reason", "1", append(append(lastReasons(i, "none"), lastReasons(m, "overload")...), lastReasons(s, "latency")...), role),
		lgauge("lanes.adaptive.last_change", "s", []lp[float64]{{m, none, 1796083202}, {s, none, 1796083203}}, role),
		lsum("lanes.adaptive.round_trips", "{round_trip}", true, []lp[int64]{{i, none, 0}, {m, none, 2}, {s, none, 2}}, role),
		lsum("lanes.adaptive.outcomes", "{outcome}", true, []lp[int64]{
			{i, outcome("success"), 0}, {i, outcome("overload"), 0},
			{m, outcome("success"), 10}, {m, outcome("overload"), 1},
			{s, outcome("success"), 17}, {s, outcome("overload"), 0}}, role),
		lgauge("lanes.adaptive.latency", "s", []lp[float64]{{i, none, 0}, {m, none, 1}, {s, none, 2}}, role),
		lgauge("lanes.adaptive.baseline", "s", []lp[float64]{{s, none, 1.000488281}}, role),
	})
	for name, m := range got {
		if !strings.HasPrefix(name, "lanes.adaptive.") || m.Description == "" {
			t.Errorf("metric %q (description %q): want the lanes.adaptive. prefix and a description", name, m.Description)
		}
	}
}

// TestLimitsRepeatedLane: a lane name given twice is observed once, and
// the collection returns an error naming it.
func TestLimitsRepeatedLane(t *testing.T) {
	cs := exporters.Controllers(scenario.Controllers(t))
	twice := exporters.LimitFunc(func() []exporters.Limit {
		l := cs.Limits()
		return append(l, l[1])
	})
	got, err := collectLimits(t, twice)
	if err == nil || !strings.Contains(err.Error(), `lane "model" twice`) {
		t.Fatalf("Collect: %v; want an error naming lane model", err)
	}
	if n := len(got["lanes.adaptive.limit"].Data.(metricdata.Sum[int64]).DataPoints); n != 3 {
		t.Fatalf("%d points of lanes.adaptive.limit; want 3", n)
	}
}
