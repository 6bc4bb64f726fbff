package promlanes_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/promlanes"
)

// scrape is one instance's scrape: the value of each gauge by metric and
// lane, and each metric's HELP.
type scrape struct {
	value map[string]map[string]float64
	help  map[string]string
}

func scrapeOf(t *testing.T, src scenario.Source) scrape {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := scrape{value: map[string]map[string]float64{}, help: map[string]string{}}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE {
			continue
		}
		s.help[mf.GetName()] = mf.GetHelp()
		s.value[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lane" {
					s.value[mf.GetName()][l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return s
}

// capacityOf is a lane's capacity on the footing of lanes_in_use_permits, as
// the package doc has it: lanes_capacity_permits, or for a lane a fleet
// shares, lanes_fleet_capacity_permits.
func capacityOf(values map[string]map[string]float64, lane string) (float64, bool) {
	if v, ok := values["lanes_capacity_permits"][lane]; ok {
		return v, true
	}
	v, ok := values["lanes_fleet_capacity_permits"][lane]
	return v, ok
}

// TestUsageAddsUp: in_use ÷ capacity is each lane's true usage, on every
// instance of a fleet of three and over the fleet, for a keyed lane with 160
// keys held, a global lane and a lane whose budget the fleet shares (marked
// by its source, and a real redislane lane in a queue, marked by nothing but
// its own snapshot), with the figures of the three instances aggregated as
// each metric's HELP says (max where it says so, else sum), so that the
// fleet's capacity is counted once. The scrapes pass Prometheus' linter.
func TestUsageAddsUp(t *testing.T) {
	t.Run("marked", func(t *testing.T) { usageAddsUp(t, scenario.UsageFleet) })
	t.Run("redis", func(t *testing.T) { usageAddsUp(t, scenario.UsageRedis) })
}

// usageAddsUp is TestUsageAddsUp on the instances that build makes.
func usageAddsUp(t *testing.T, build func(testing.TB) ([3]scenario.Source, [3]map[string]scenario.Usage, map[string]scenario.Usage, func())) {
	instances, perInstance, fleet, stop := build(t)
	defer stop()
	usage := func(where, lane string, values map[string]map[string]float64, truth scenario.Usage) {
		t.Helper()
		inUse, ok := values["lanes_in_use_permits"][lane]
		capacity, ok2 := capacityOf(values, lane)
		if !ok || !ok2 {
			t.Errorf("%s, lane %s: no in-use (%v) or capacity (%v) figure", where, lane, ok, ok2)
			return
		}
		got, want := inUse/capacity, float64(truth.InUse)/float64(truth.Capacity)
		if got < 0 || got > 1 || got != want {
			t.Errorf("%s, lane %s: usage %v/%v = %v; want %d/%d = %v", where, lane, inUse, capacity, got, truth.InUse, truth.Capacity, want)
		}
	}
	agg := map[string]map[string]float64{}
	for i, src := range instances {
		s := scrapeOf(t, src)
		for lane, truth := range perInstance[i] {
			usage("instance "+string(rune('A'+i)), lane, s.value, truth)
		}
		for name, byLane := range s.value {
			max := strings.Contains(s.help[name], "with max")
			if agg[name] == nil {
				agg[name] = map[string]float64{}
			}
			for lane, v := range byLane {
				if old, ok := agg[name][lane]; max && ok {
					agg[name][lane] = maxf(old, v)
				} else {
					agg[name][lane] += v
				}
			}
		}
		problems, err := testutil.CollectAndLint(promlanes.New(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	for lane, truth := range fleet {
		usage("over the fleet", lane, agg, truth)
	}
	if v, ok := agg["lanes_capacity_permits"][scenario.FleetLane]; ok {
		t.Errorf("the fleet's lane is in lanes_capacity_permits (%v over the fleet), which sums across instances", v)
	}
	if v := agg["lanes_fleet_capacity_permits"][scenario.FleetLane]; v != 48 {
		t.Errorf("the fleet's capacity over three instances: %v; want 48, counted once", v)
	}
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
