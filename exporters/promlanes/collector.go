// Package promlanes exports the lanes of a [exporters.Source] (a
// [lanequeue.Queue], say) as Prometheus metrics, through a
// [prometheus.Collector] that reads the lanes at each scrape:
//
//	q := lanequeue.Default[string](16)
//	prometheus.MustRegister(promlanes.New(q))
//
// Every series has the labels lane (the lane's name) and kind ("keyed",
// "global" or "rate"). With the default namespace "lanes":
//
//	lanes_capacity_permits             gauge      capacity on in_use's footing: of a global lane, of a keyed lane's keys alive, a rate lane's burst
//	lanes_key_capacity_permits         gauge      capacity per key of a keyed lane
//	lanes_fleet_capacity_permits       gauge      capacity a fleet of instances shares (a Redis lane), the same on each
//	lanes_in_use_permits               gauge      permits held now by this instance, over all keys (a rate lane: what its window counts)
//	lanes_waiters                      gauge      callers waiting now
//	lanes_keys                         gauge      entries alive (keyed lanes only)
//	lanes_closed                       gauge      1 once the lane is closed
//	lanes_acquires_total               counter    acquire calls ended, by outcome: acquired, cancelled, timed_out, rejected, failed
//	lanes_waited_total                 counter    grants that had to wait (of the acquired)
//	lanes_releases_total               counter    first releases of granted permits
//	lanes_double_releases_total        counter    releases of permits already released
//	lanes_reorder_holds_run_out_total  counter    callers that went when their reorder hold ran out (keyed lanes only)
//	lanes_cooldown_seconds             gauge      time left of the lane's pause (lanequeue.Queue.Cooldown), 0 when none; a lane's three cooldown series start at its first pause
//	lanes_cooldown_waiters             gauge      callers waiting out the pause now, holding the lane (in lanes_in_use_permits, not in lanes_waiters)
//	lanes_cooldown_refused_total       counter    calls whose deadline came before the pause ended (at once: in no other series)
//	lanes_wait_seconds                 histogram  time a grant waited in line (0 for one that did not queue)
//	lanes_hold_seconds                 histogram  time from a grant to its release
//	lanes_group_wait_seconds           histogram  time a grant of a fair lane queued, by group (WithGroupWaits)
//
// Capacity and use are on one footing, so that a ratio or a sum of them
// means what it says (the model is the exporters package doc's, "Capacity
// and use"; [exporters.Lane] has the figures, shared with otellanes):
//
//   - a global or rate lane's usage is in_use_permits / capacity_permits;
//   - a keyed lane's capacity_permits is its per-key capacity times its keys
//     alive (lanes_keys), the permits its live keys have between them, so
//     in_use_permits / capacity_permits is the share of them in use;
//     key_capacity_permits is the bound of one key, the same for every key
//     (aggregate it with max, never sum);
//   - a lane whose budget a fleet of instances shares (every lane of
//     package redislane, whose snapshot says so, or one its source marks:
//     [exporters.Fleet]) has no capacity_permits: each instance reports
//     the whole fleet's capacity as fleet_capacity_permits (aggregate it
//     across instances with max, never sum) and its own in_use_permits (sum
//     them), so the fleet's usage is
//     sum by (lane) (lanes_in_use_permits) / max by (lane) (lanes_fleet_capacity_permits).
//     A fleet's keyed lane reports key_capacity_permits only, and a
//     fleet's rate lane (redislane.AsRateLane) an in_use_permits of 0:
//     its count is in Redis.
//
// So capacity_permits and in_use_permits both add up across instances:
// sum by (lane) of each gives a lane's usage over a service's replicas.
// The HELP text of each capacity says which aggregation is right.
//
// The counters are those of [semaphore.Counters], one series per field
// (the five outcomes of an acquire call as one counter with an outcome
// label, since each call ends in exactly one: their sum is the calls that
// returned). Units follow Prometheus' conventions: a count of permits ends
// in _permits, counters in _total, durations are in seconds.
//
// The two histograms are sent only for the lanes that record them
// (semaphore.WithHistograms, keyedsem.WithHistograms,
// redislane.WithHistograms: see [semaphore.Timings]), in the fixed buckets of
// [semaphore.HistogramBounds] (1µs to 100s in 1-2-5 steps) as le bounds in
// seconds; a lane without them has no such series, rather than one that
// says nothing waited. Their _count is the lane's acquired grants
// (wait) and first releases (hold). After a lane's first thousand or so
// waits and holds they are sampled, one in 16, and scaled to every one
// (see semaphore.Timings): _count stays exact, _sum and the buckets are
// then estimates.
//
// With [WithGroupWaits], the waits of fair lanes are reported by
// fair-share group too, from an [exporters.GroupWaits] that the queue's
// hooks feed: lanes_group_wait_seconds, with the labels lane, kind and
// group, in the same buckets, its _count the grants that queued. A lane
// has at most TopGroups+1 such series, the groups with a series of their
// own and group="other" for the rest; which groups have one is the
// exporters package doc's "Waits by group". The series of a lane add up:
// sum by (lane) of their _count is every grant of the lane that queued
// (lanes_waited_total, for the calls made through the queue), give or take
// the waits in flight when a scrape reads the two.
//
// The adaptive controllers that drive lanes' capacities (package adaptive)
// have a collector of their own, [NewLimits]: the limit, its floor and
// ceiling, its moves by reason and the last reason, under
// lanes_adaptive_*.
//
// Concurrency: Collect may run from several scrapes at once; each reads the
// source once. The collector holds no state between scrapes.
package promlanes

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Option changes what New builds.
type Option func(*config)

type config struct {
	namespace string
	labels    prometheus.Labels
	groups    *exporters.GroupWaits
}

// WithNamespace replaces the metrics' namespace, "lanes" by default (the
// prefix of every name). An empty namespace leaves the names unprefixed
// (capacity_permits, ...), which is rarely what a dashboard wants.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every series (the
// queue's role in a process with several, say). They must not be lane,
// kind, outcome or group. Two collectors on one registry must have the
// same label names: give every collector of the registry the label (a
// second queue's collector with it beside a first without is refused by
// the registry), or join the queues in one collector ([exporters.Join]).
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.labels = l }
}

// WithGroupWaits makes New's collector report the waits of w, a fair
// lane's by fair-share group, as lanes_group_wait_seconds (see the package
// doc). NewLimits ignores it.
func WithGroupWaits(w *exporters.GroupWaits) Option {
	if w == nil {
		panic("promlanes: nil GroupWaits")
	}
	return func(c *config) { c.groups = w }
}

// Collector is a [prometheus.Collector] of the lanes of a source. Make it
// with New and register it with a [prometheus.Registerer].
type Collector struct {
	src    exporters.Source
	groups *exporters.GroupWaits // nil: no group series

	capacity, keyCapacity, fleetCapacity *prometheus.Desc
	inUse, waiters, keys, closed         *prometheus.Desc
	acquires, waited, releases, doubles  *prometheus.Desc
	holdsRunOut                          *prometheus.Desc
	waitTime, holdTime                   *prometheus.Desc
	groupWait                            *prometheus.Desc
	cooldown, coolWaiters, coolRefused   *prometheus.Desc
}

// Outcomes of an acquire call, the values of the outcome label of
// lanes_acquires_total, one per field of semaphore.Counters that ends a
// call.
const (
	OutcomeAcquired  = "acquired"
	OutcomeCancelled = "cancelled"
	OutcomeTimedOut  = "timed_out"
	OutcomeRejected  = "rejected"
	OutcomeFailed    = "failed"
)

// New returns a collector of src's lanes. It panics if src is nil.
func New(src exporters.Source, opts ...Option) *Collector {
	if nilptr.Is(src) { // also a typed nil, such as a nil *lanequeue.Queue, which would fail at the first scrape
		panic("promlanes: nil source")
	}
	cfg := config{namespace: "lanes"}
	for _, o := range opts {
		o(&cfg)
	}
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, "", name), help,
			append([]string{"lane", "kind"}, extra...), cfg.labels)
	}
	return &Collector{
		src:           src,
		groups:        cfg.groups,
		capacity:      desc("capacity_permits", "Capacity of the lane on the footing of in_use_permits (of a global lane; of a keyed lane, per key times keys alive; of a rate lane, its burst); none for a lane a fleet shares. in_use_permits / capacity_permits is the usage; sum across instances."),
		keyCapacity:   desc("key_capacity_permits", "Capacity per key of a keyed lane, the same for every key. Aggregate with max, not sum."),
		fleetCapacity: desc("fleet_capacity_permits", "Capacity that a fleet of instances shares (a Redis lane); every instance reports the same whole. Aggregate across instances with max, not sum: the fleet's usage is sum(in_use_permits) / max(fleet_capacity_permits)."),
		inUse:         desc("in_use_permits", "Permits of the lane held now by this instance, over all keys (of a rate lane, the requests or tokens its window counts now). Sum across keys and instances."),
		waiters:       desc("waiters", "Callers waiting for the lane now."),
		keys:          desc("keys", "Entries alive in a keyed lane (of a lane a fleet shares, its keys with callers of this instance waiting)."),
		closed:        desc("closed", "1 once the lane is closed, else 0."),
		acquires:      desc("acquires_total", "Acquire calls on the lane that ended, by outcome (each call ends in exactly one).", "outcome"),
		waited:        desc("waited_total", "Grants of the lane that had to wait in its queue."),
		releases:      desc("releases_total", "First releases of the lane's granted permits."),
		doubles:       desc("double_releases_total", "Releases of the lane's permits that were already released."),
		holdsRunOut:   desc("reorder_holds_run_out_total", "Callers of a keyed lane that went when their reorder hold ran out, a predecessor's number still missing (keyedsem.WithReorderHold)."),
		waitTime:      desc("wait_seconds", "Time a grant of the lane waited in line (0 for one that did not queue)."),
		holdTime:      desc("hold_seconds", "Time from a grant of the lane to its release."),
		cooldown:      desc("cooldown_seconds", "Time left of the lane's pause (lanequeue.Queue.Cooldown, a provider's Retry-After); 0 when none."),
		coolWaiters:   desc("cooldown_waiters", "Callers waiting out the lane's pause now, each holding the lane (so in in_use_permits, not in waiters)."),
		coolRefused:   desc("cooldown_refused_total", "Calls that failed because their deadline came before the lane's pause ended: at once (in no other series), or while waiting it out (then also acquired and released on the lane)."),
		groupWait: desc("group_wait_seconds", "Time a grant of a fair lane waited in line, of the calls that queued, by fair-share group: the groups with a series of their own, the others summed as group=\"other\". Sum by lane to get every queued grant.",
			"group"),
	}
}

// Describe sends the descriptors of every metric the collector makes.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	// groupWait is described also without group waits, so that a
	// registry refuses a constant label "group" at Register, as it does
	// lane, kind and outcome, whether or not the series come later.
	return []*prometheus.Desc{c.capacity, c.keyCapacity, c.fleetCapacity, c.inUse, c.waiters, c.keys, c.closed, c.acquires, c.waited, c.releases, c.doubles, c.holdsRunOut, c.waitTime, c.holdTime, c.groupWait,
		c.cooldown, c.coolWaiters, c.coolRefused}
}

// Collect reads the source once and sends each lane's metrics. A lane name
// that the source gives twice is sent as an invalid metric, so that the
// scrape fails with an error naming it rather than reporting one lane's
// figures under another's name.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	lanes, err := exporters.Read(c.src)
	for _, l := range lanes {
		c.collectLane(ch, l)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.capacity, fmt.Errorf("promlanes: %w", err))
	}
	if c.groups != nil {
		kind := lanequeue.Global.String() // GroupWaits records global lanes only
		for _, l := range c.groups.Lanes() {
			for i := range l.Groups {
				g := &l.Groups[i]
				ch <- histogram(c.groupWait, &g.Waits, l.Lane, kind, g.Group)
			}
		}
	}
}

func (c *Collector) collectLane(ch chan<- prometheus.Metric, l exporters.Lane) {
	st := l.LaneStats
	kind := st.Kind.String()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, st.Name, kind)
	}
	counter := func(d *prometheus.Desc, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{st.Name, kind}, extra...)...)
	}
	if n, ok := l.InstanceCapacity(); ok {
		gauge(c.capacity, float64(n))
	}
	if n, ok := l.KeyCapacity(); ok {
		gauge(c.keyCapacity, float64(n))
	}
	if n, ok := l.FleetCapacity(); ok {
		gauge(c.fleetCapacity, float64(n))
	}
	gauge(c.inUse, float64(l.InUse()))
	gauge(c.waiters, float64(st.Waiters))
	if st.Kind == lanequeue.Keyed {
		gauge(c.keys, float64(l.KeysAlive()))
	}
	closed := 0.0
	if st.Closed {
		closed = 1
	}
	gauge(c.closed, closed)
	n := st.Counters
	counter(c.acquires, n.Acquired, OutcomeAcquired)
	counter(c.acquires, n.Cancelled, OutcomeCancelled)
	counter(c.acquires, n.TimedOut, OutcomeTimedOut)
	counter(c.acquires, n.Rejected, OutcomeRejected)
	counter(c.acquires, n.Failed, OutcomeFailed)
	counter(c.waited, n.Waited)
	counter(c.releases, n.Released)
	counter(c.doubles, n.DoubleReleases)
	if st.Kind == lanequeue.Keyed {
		counter(c.holdsRunOut, st.HoldsRunOut)
	}
	if st.CooldownSet { // from a lane's first pause on
		gauge(c.cooldown, st.CooldownLeft.Seconds())
		gauge(c.coolWaiters, float64(st.CooldownWaiters))
		counter(c.coolRefused, st.CooldownRefused)
	}
	if st.Enabled {
		ch <- histogram(c.waitTime, &st.WaitTime, st.Name, kind)
		ch <- histogram(c.holdTime, &st.HoldTime, st.Name, kind)
	}
}

// bounds are semaphore.HistogramBounds in seconds, the le of each bucket.
var bounds = func() []float64 {
	b := semaphore.HistogramBounds()
	s := make([]float64, len(b))
	for i, d := range b {
		s[i] = d.Seconds()
	}
	return s
}()

// histogram converts h into a constant Prometheus histogram: cumulative
// counts per bound; the last bucket, above the last bound, is the
// implicit +Inf one (h.Count).
func histogram(d *prometheus.Desc, h *semaphore.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, le := range bounds {
		cum += h.Counts[i]
		buckets[le] = cum
	}
	// The count is the buckets' sum, not h.Count: read while the lane is
	// in use, the two may differ by an observation in flight, and the
	// +Inf bucket must not be below the last bound's.
	cum += h.Counts[len(bounds)]
	return prometheus.MustNewConstHistogram(d, cum, h.Sum.Seconds(), buckets, labels...)
}
