package otellanes_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/otellanes"
)

// figure is one instrument's value for one lane, and whether the
// instrument adds up across instances (an UpDownCounter's sum) or not (a
// Gauge).
type figure struct {
	v        int64
	additive bool
}

// figuresOf collects src once and returns its int64 figures by instrument
// and lane.
func figuresOf(t *testing.T, src scenario.Source) map[string]map[string]figure {
	t.Helper()
	got, err := collect(t, src)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]figure{}
	add := func(name string, dps []metricdata.DataPoint[int64], additive bool) {
		out[name] = map[string]figure{}
		for _, dp := range dps {
			lane, _ := dp.Attributes.Value(otellanes.LaneKey)
			out[name][lane.AsString()] = figure{dp.Value, additive}
		}
	}
	for name, m := range got {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			add(name, d.DataPoints, true)
		case metricdata.Gauge[int64]:
			add(name, d.DataPoints, false)
		}
	}
	return out
}

// capacity is a lane's capacity on the footing of lanes.in_use, as the
// package doc has it: lanes.capacity, or for a lane a fleet shares,
// lanes.fleet.capacity.
func capacity(figs map[string]map[string]figure, lane string) (figure, bool) {
	if f, ok := figs["lanes.capacity"][lane]; ok {
		return f, true
	}
	f, ok := figs["lanes.fleet.capacity"][lane]
	return f, ok
}

// TestUsageAddsUp: lanes.in_use ÷ the capacity is each lane's true usage, on
// every instance of a fleet of three and over the fleet, for a keyed lane
// with 160 keys held, a global lane and a lane whose budget the fleet shares
// (marked by its source, and a real redislane lane in a queue, marked by
// nothing but its own snapshot), with the three instances' figures
// aggregated as OpenTelemetry aggregates each kind of instrument (an
// UpDownCounter's values sum, a Gauge's do not: the max), so that the
// fleet's capacity is counted once.
func TestUsageAddsUp(t *testing.T) {
	t.Run("marked", func(t *testing.T) { usageAddsUp(t, scenario.UsageFleet) })
	t.Run("redis", func(t *testing.T) { usageAddsUp(t, scenario.UsageRedis) })
}

// usageAddsUp is TestUsageAddsUp on the instances that build makes.
func usageAddsUp(t *testing.T, build func(testing.TB) ([3]scenario.Source, [3]map[string]scenario.Usage, map[string]scenario.Usage, func())) {
	instances, perInstance, fleet, stop := build(t)
	defer stop()
	usage := func(where, lane string, figs map[string]map[string]figure, truth scenario.Usage) {
		t.Helper()
		inUse, ok := figs["lanes.in_use"][lane]
		c, ok2 := capacity(figs, lane)
		if !ok || !ok2 {
			t.Errorf("%s, lane %s: no in-use (%v) or capacity (%v) figure", where, lane, ok, ok2)
			return
		}
		got, want := float64(inUse.v)/float64(c.v), float64(truth.InUse)/float64(truth.Capacity)
		if got < 0 || got > 1 || got != want {
			t.Errorf("%s, lane %s: usage %d/%d = %v; want %d/%d = %v", where, lane, inUse.v, c.v, got, truth.InUse, truth.Capacity, want)
		}
	}
	agg := map[string]map[string]figure{}
	for i, src := range instances {
		figs := figuresOf(t, src)
		for lane, truth := range perInstance[i] {
			usage("instance "+string(rune('A'+i)), lane, figs, truth)
		}
		for name, byLane := range figs {
			if agg[name] == nil {
				agg[name] = map[string]figure{}
			}
			for lane, f := range byLane {
				old, ok := agg[name][lane]
				switch {
				case !ok:
					agg[name][lane] = f
				case f.additive:
					agg[name][lane] = figure{old.v + f.v, true}
				case f.v > old.v:
					agg[name][lane] = f
				}
			}
		}
	}
	for lane, truth := range fleet {
		usage("over the fleet", lane, agg, truth)
	}
	if f, ok := agg["lanes.capacity"][scenario.FleetLane]; ok {
		t.Errorf("the fleet's lane is in lanes.capacity (%d over the fleet), an UpDownCounter that sums across instances", f.v)
	}
	if f := agg["lanes.fleet.capacity"][scenario.FleetLane]; f.v != 48 || f.additive {
		t.Errorf("the fleet's capacity over three instances: %+v; want 48 from a Gauge, counted once", f)
	}
}
