package promlanes_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/promlanes"
)

// limitsScrape is what a registry scrape of scenario.Controllers must
// give, figure by figure from scenario's doc: Epoch is 1796083200 s; the
// baseline of "slow" rose from 1 s by 1/2048 of the gap to 2 s.
const limitsScrape = `
# HELP lanes_adaptive_baseline_seconds Vegas: the latency taken as the provider's own, without queueing.
# TYPE lanes_adaptive_baseline_seconds gauge
lanes_adaptive_baseline_seconds{lane="slow"} 1.000488281
# HELP lanes_adaptive_ceiling_permits The highest limit the lane's adaptive controller may set.
# TYPE lanes_adaptive_ceiling_permits gauge
lanes_adaptive_ceiling_permits{lane="idle"} 4
lanes_adaptive_ceiling_permits{lane="model"} 20
lanes_adaptive_ceiling_permits{lane="slow"} 16
# HELP lanes_adaptive_decreases_total Moves down of the lane's limit, by reason.
# TYPE lanes_adaptive_decreases_total counter
lanes_adaptive_decreases_total{lane="idle",reason="latency"} 0
lanes_adaptive_decreases_total{lane="idle",reason="overload"} 0
lanes_adaptive_decreases_total{lane="model",reason="latency"} 0
lanes_adaptive_decreases_total{lane="model",reason="overload"} 1
lanes_adaptive_decreases_total{lane="slow",reason="latency"} 1
lanes_adaptive_decreases_total{lane="slow",reason="overload"} 0
# HELP lanes_adaptive_floor_permits The lowest limit the lane's adaptive controller may set.
# TYPE lanes_adaptive_floor_permits gauge
lanes_adaptive_floor_permits{lane="idle"} 1
lanes_adaptive_floor_permits{lane="model"} 2
lanes_adaptive_floor_permits{lane="slow"} 1
# HELP lanes_adaptive_increases_total Moves up of the lane's limit, by reason.
# TYPE lanes_adaptive_increases_total counter
lanes_adaptive_increases_total{lane="idle",reason="growth"} 0
lanes_adaptive_increases_total{lane="model",reason="growth"} 1
lanes_adaptive_increases_total{lane="slow",reason="growth"} 1
# HELP lanes_adaptive_last_change_timestamp_seconds When the lane's limit last moved, on its controller's clock.
# TYPE lanes_adaptive_last_change_timestamp_seconds gauge
lanes_adaptive_last_change_timestamp_seconds{lane="model"} 1796083202
lanes_adaptive_last_change_timestamp_seconds{lane="slow"} 1796083203
# HELP lanes_adaptive_last_reason Why the lane's limit last moved: 1 for that reason, 0 for the others.
# TYPE lanes_adaptive_last_reason gauge
lanes_adaptive_last_reason{lane="idle",reason="growth"} 0
lanes_adaptive_last_reason{lane="idle",reason="latency"} 0
lanes_adaptive_last_reason{lane="idle",reason="none"} 1
lanes_adaptive_last_reason{lane="idle",reason="overload"} 0
lanes_adaptive_last_reason{lane="model",reason="growth"} 0
lanes_adaptive_last_reason{lane="model",reason="latency"} 0
lanes_adaptive_last_reason{lane="model",reason="none"} 0
lanes_adaptive_last_reason{lane="model",reason="overload"} 1
lanes_adaptive_last_reason{lane="slow",reason="growth"} 0
lanes_adaptive_last_reason{lane="slow",reason="latency"} 1
lanes_adaptive_last_reason{lane="slow",reason="none"} 0
lanes_adaptive_last_reason{lane="slow",reason="overload"} 0
# HELP lanes_adaptive_latency_seconds Mean latency of the successes of the last round trip decided.
# TYPE lanes_adaptive_latency_seconds gauge
lanes_adaptive_latency_seconds{lane="idle"} 0
lanes_adaptive_latency_seconds{lane="model"} 1
lanes_adaptive_latency_seconds{lane="slow"} 2
# HELP lanes_adaptive_limit_permits The limit the lane's adaptive controller sets now: the lane's capacity.
# TYPE lanes_adaptive_limit_permits gauge
lanes_adaptive_limit_permits{lane="idle"} 4
lanes_adaptive_limit_permits{lane="model"} 9
lanes_adaptive_limit_permits{lane="slow"} 6
# HELP lanes_adaptive_outcomes_total Outcomes counted in the round trips decided, by outcome.
# TYPE lanes_adaptive_outcomes_total counter
lanes_adaptive_outcomes_total{lane="idle",outcome="overload"} 0
lanes_adaptive_outcomes_total{lane="idle",outcome="success"} 0
lanes_adaptive_outcomes_total{lane="model",outcome="overload"} 1
lanes_adaptive_outcomes_total{lane="model",outcome="success"} 10
lanes_adaptive_outcomes_total{lane="slow",outcome="overload"} 0
lanes_adaptive_outcomes_total{lane="slow",outcome="success"} 17
# HELP lanes_adaptive_round_trips_total Round trips of the lane's adaptive controller decided.
# TYPE lanes_adaptive_round_trips_total counter
lanes_adaptive_round_trips_total{lane="idle"} 0
lanes_adaptive_round_trips_total{lane="model"} 2
lanes_adaptive_round_trips_total{lane="slow"} 2
`

// TestLimitsScrape registers the collector of three controllers in a
// pedantic registry and compares the scrape with the hand-counted figures.
func TestLimitsScrape(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.NewLimits(exporters.Controllers(scenario.Controllers(t))))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(limitsScrape)); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 45 {
		t.Fatalf("%d series (%v); want 45: 14 per controller (3 gauges of permits, 3 move counters, 4 reasons, round trips, 2 outcomes, latency), a last change for the two that moved, a baseline for the vegas one", n, err)
	}
}

// TestLimitsLintAndOptions: names, units and help pass Prometheus' linter,
// and the namespace and constant labels of New apply.
func TestLimitsLintAndOptions(t *testing.T) {
	src := exporters.Controllers(scenario.Controllers(t))
	problems, err := testutil.CollectAndLint(promlanes.NewLimits(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.NewLimits(src, promlanes.WithNamespace("gw"), promlanes.WithConstLabels(prometheus.Labels{"queue": "main"})))
	want := `
# HELP gw_adaptive_limit_permits The limit the lane's adaptive controller sets now: the lane's capacity.
# TYPE gw_adaptive_limit_permits gauge
gw_adaptive_limit_permits{lane="idle",queue="main"} 4
gw_adaptive_limit_permits{lane="model",queue="main"} 9
gw_adaptive_limit_permits{lane="slow",queue="main"} 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gw_adaptive_limit_permits"); err != nil {
		t.Fatal(err)
	}
}

// TestLimitsRepeatedLaneFailsTheScrape: two controllers under one lane
// name make the scrape fail with an error naming it.
func TestLimitsRepeatedLaneFailsTheScrape(t *testing.T) {
	cs := exporters.Controllers(scenario.Controllers(t))
	twice := exporters.LimitFunc(func() []exporters.Limit {
		l := cs.Limits()
		return append(l, l[0])
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.NewLimits(twice))
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), `lane "idle" twice`) {
		t.Fatalf("Gather: %v; want an error naming lane idle", err)
	}
}
