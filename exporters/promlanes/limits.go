package promlanes

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/exporters"
)

// LimitCollector is a [prometheus.Collector] of the adaptive controllers
// of a [exporters.LimitSource]: the limit each sets on its lane and why it
// moved. Make it with NewLimits and register it beside the lanes'
// collector:
//
//	ctl, _ := adaptive.New(sem, 2, 64)
//	prometheus.MustRegister(promlanes.New(q), promlanes.NewLimits(exporters.Controllers(map[string]*adaptive.Controller{"model": ctl})))
//
// Every series has the label lane (the name of the lane the controller
// drives). With the default namespace "lanes":
//
//	lanes_adaptive_limit_permits                  gauge    the limit set on the lane now (its capacity)
//	lanes_adaptive_floor_permits                  gauge    the lowest limit the controller may set
//	lanes_adaptive_ceiling_permits                gauge    the highest
//	lanes_adaptive_increases_total                counter  moves up, by reason: growth
//	lanes_adaptive_decreases_total                counter  moves down, by reason: overload, latency
//	lanes_adaptive_last_reason                    gauge    why the limit last moved: 1 for that reason, 0 for the others (none, growth, overload, latency)
//	lanes_adaptive_last_change_timestamp_seconds  gauge    when it last moved, on the controller's clock (absent until it moves)
//	lanes_adaptive_round_trips_total              counter  round trips decided
//	lanes_adaptive_outcomes_total                 counter  outcomes counted in them, by outcome: success, overload
//	lanes_adaptive_latency_seconds                gauge    mean latency of the last round trip's successes
//	lanes_adaptive_baseline_seconds               gauge    Vegas: the latency taken as the provider's own (absent for AIMD)
//
// The last reason is a state set, as OpenMetrics has for an enumeration:
// one series per reason, all present, so that a query compares values
// rather than looks for a series that appears and vanishes; the reason
// label's values are those of [adaptive.Reason.String]. The moves count
// the round trips that changed the integer limit, as
// [adaptive.Stats] does; a round trip that leaves it counts in none.
//
// Concurrency: Collect may run from several scrapes at once; each reads the
// source once. The collector holds no state between scrapes.
type LimitCollector struct {
	src exporters.LimitSource

	limit, floor, ceiling, increases, decreases *prometheus.Desc
	lastReason, lastChange, roundTrips          *prometheus.Desc
	outcomes, latency, baseline                 *prometheus.Desc
}

// NewLimits returns a collector of src's controllers, with the options of
// [New] (namespace and constant labels; the latter must not be lane,
// reason or outcome). It panics if src is nil.
func NewLimits(src exporters.LimitSource, opts ...Option) *LimitCollector {
	if src == nil {
		panic("promlanes: nil limit source")
	}
	cfg := config{namespace: "lanes"}
	for _, o := range opts {
		o(&cfg)
	}
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, "adaptive", name), help,
			append([]string{"lane"}, extra...), cfg.labels)
	}
	return &LimitCollector{
		src:        src,
		limit:      desc("limit_permits", "The limit the lane's adaptive controller sets now: the lane's capacity."),
		floor:      desc("floor_permits", "The lowest limit the lane's adaptive controller may set."),
		ceiling:    desc("ceiling_permits", "The highest limit the lane's adaptive controller may set."),
		increases:  desc("increases_total", "Moves up of the lane's limit, by reason.", "reason"),
		decreases:  desc("decreases_total", "Moves down of the lane's limit, by reason.", "reason"),
		lastReason: desc("last_reason", "Why the lane's limit last moved: 1 for that reason, 0 for the others.", "reason"),
		lastChange: desc("last_change_timestamp_seconds", "When the lane's limit last moved, on its controller's clock."),
		roundTrips: desc("round_trips_total", "Round trips of the lane's adaptive controller decided."),
		outcomes:   desc("outcomes_total", "Outcomes counted in the round trips decided, by outcome.", "outcome"),
		latency:    desc("latency_seconds", "Mean latency of the successes of the last round trip decided."),
		baseline:   desc("baseline_seconds", "Vegas: the latency taken as the provider's own, without queueing."),
	}
}

// Describe sends the descriptors of every metric the collector makes.
func (c *LimitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.floor, c.ceiling, c.increases, c.decreases,
		c.lastReason, c.lastChange, c.roundTrips, c.outcomes, c.latency, c.baseline} {
		ch <- d
	}
}

// reasons are the values of the reason label of lanes_adaptive_last_reason.
var reasons = [...]adaptive.Reason{adaptive.ReasonNone, adaptive.ReasonGrowth, adaptive.ReasonOverload, adaptive.ReasonLatency}

// Collect reads the source once and sends each controller's metrics. A
// lane name that the source gives twice is sent as an invalid metric.
func (c *LimitCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, l := range c.src.Limits() {
		if seen[l.Lane] {
			ch <- prometheus.NewInvalidMetric(c.limit, fmt.Errorf("promlanes: the limit source reports lane %q twice", l.Lane))
			continue
		}
		seen[l.Lane] = true
		c.collectLimit(ch, l)
	}
}

func (c *LimitCollector) collectLimit(ch chan<- prometheus.Metric, l exporters.Limit) {
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{l.Lane}, extra...)...)
	}
	counter := func(d *prometheus.Desc, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{l.Lane}, extra...)...)
	}
	gauge(c.limit, float64(l.Limit))
	gauge(c.floor, float64(l.Floor))
	gauge(c.ceiling, float64(l.Ceiling))
	counter(c.increases, l.Increases, adaptive.ReasonGrowth.String())
	counter(c.decreases, l.OverloadDecreases, adaptive.ReasonOverload.String())
	counter(c.decreases, l.LatencyDecreases, adaptive.ReasonLatency.String())
	for _, r := range reasons {
		v := 0.0
		if r == l.LastReason {
			v = 1
		}
		gauge(c.lastReason, v, r.String())
	}
	if !l.LastChange.IsZero() {
		gauge(c.lastChange, float64(l.LastChange.UnixNano())/1e9)
	}
	counter(c.roundTrips, l.Windows)
	counter(c.outcomes, l.Samples-l.Overloads, adaptive.Success.String())
	counter(c.outcomes, l.Overloads, adaptive.Overload.String())
	gauge(c.latency, l.Latency.Seconds())
	if l.Algorithm == "vegas" {
		gauge(c.baseline, l.Baseline.Seconds())
	}
}
