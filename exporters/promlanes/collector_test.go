package promlanes_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/promlanes"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// queueScrape is what a registry scrape of scenario.Queue must give: every
// figure counted by hand in scenario's doc.
const queueScrape = `
# HELP lanes_acquires_total Acquire calls on the lane that ended, by outcome (each call ends in exactly one).
# TYPE lanes_acquires_total counter
lanes_acquires_total{kind="global",lane="global",outcome="acquired"} 4
lanes_acquires_total{kind="global",lane="global",outcome="cancelled"} 0
lanes_acquires_total{kind="global",lane="global",outcome="failed"} 0
lanes_acquires_total{kind="global",lane="global",outcome="rejected"} 0
lanes_acquires_total{kind="global",lane="global",outcome="timed_out"} 0
lanes_acquires_total{kind="keyed",lane="session",outcome="acquired"} 4
lanes_acquires_total{kind="keyed",lane="session",outcome="cancelled"} 1
lanes_acquires_total{kind="keyed",lane="session",outcome="failed"} 0
lanes_acquires_total{kind="keyed",lane="session",outcome="rejected"} 0
lanes_acquires_total{kind="keyed",lane="session",outcome="timed_out"} 0
lanes_acquires_total{kind="rate",lane="rate",outcome="acquired"} 1
lanes_acquires_total{kind="rate",lane="rate",outcome="cancelled"} 0
lanes_acquires_total{kind="rate",lane="rate",outcome="failed"} 0
lanes_acquires_total{kind="rate",lane="rate",outcome="rejected"} 0
lanes_acquires_total{kind="rate",lane="rate",outcome="timed_out"} 0
# HELP lanes_capacity_permits Capacity of the lane on the footing of in_use_permits (of a global lane; of a keyed lane, per key times keys alive; of a rate lane, its burst); none for a lane a fleet shares. in_use_permits / capacity_permits is the usage; sum across instances.
# TYPE lanes_capacity_permits gauge
lanes_capacity_permits{kind="global",lane="global"} 3
lanes_capacity_permits{kind="keyed",lane="session"} 3
lanes_capacity_permits{kind="rate",lane="rate"} 5
# HELP lanes_closed 1 once the lane is closed, else 0.
# TYPE lanes_closed gauge
lanes_closed{kind="global",lane="global"} 0
lanes_closed{kind="keyed",lane="session"} 0
lanes_closed{kind="rate",lane="rate"} 0
# HELP lanes_double_releases_total Releases of the lane's permits that were already released.
# TYPE lanes_double_releases_total counter
lanes_double_releases_total{kind="global",lane="global"} 0
lanes_double_releases_total{kind="keyed",lane="session"} 0
lanes_double_releases_total{kind="rate",lane="rate"} 0
# HELP lanes_in_use_permits Permits of the lane held now by this instance, over all keys (of a rate lane, the requests or tokens its window counts now). Sum across keys and instances.
# TYPE lanes_in_use_permits gauge
lanes_in_use_permits{kind="global",lane="global"} 1
lanes_in_use_permits{kind="keyed",lane="session"} 1
lanes_in_use_permits{kind="rate",lane="rate"} 1
# HELP lanes_key_capacity_permits Capacity per key of a keyed lane, the same for every key. Aggregate with max, not sum.
# TYPE lanes_key_capacity_permits gauge
lanes_key_capacity_permits{kind="keyed",lane="session"} 1
# HELP lanes_keys Entries alive in a keyed lane (of a lane a fleet shares, its keys with callers of this instance waiting).
# TYPE lanes_keys gauge
lanes_keys{kind="keyed",lane="session"} 3
# HELP lanes_releases_total First releases of the lane's granted permits.
# TYPE lanes_releases_total counter
lanes_releases_total{kind="global",lane="global"} 3
lanes_releases_total{kind="keyed",lane="session"} 3
lanes_releases_total{kind="rate",lane="rate"} 0
# HELP lanes_reorder_holds_run_out_total Callers of a keyed lane that went when their reorder hold ran out, a predecessor's number still missing (keyedsem.WithReorderHold).
# TYPE lanes_reorder_holds_run_out_total counter
lanes_reorder_holds_run_out_total{kind="keyed",lane="session"} 0
# HELP lanes_waited_total Grants of the lane that had to wait in its queue.
# TYPE lanes_waited_total counter
lanes_waited_total{kind="global",lane="global"} 0
lanes_waited_total{kind="keyed",lane="session"} 1
lanes_waited_total{kind="rate",lane="rate"} 0
# HELP lanes_waiters Callers waiting for the lane now.
# TYPE lanes_waiters gauge
lanes_waiters{kind="global",lane="global"} 0
lanes_waiters{kind="keyed",lane="session"} 1
lanes_waiters{kind="rate",lane="rate"} 0
`

// TestQueueScrape registers the collector of a queue in a pedantic
// registry (which checks each metric against its descriptor) and compares
// the scrape with the hand-counted figures, series by series.
func TestQueueScrape(t *testing.T) {
	q, stop := scenario.Queue(t)
	defer stop()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(q))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(queueScrape)); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 39 {
		t.Fatalf("%d series (%v); want 39: 12 per lane (4 gauges, 5 outcomes, 3 counters), and keys, key capacity and reorder holds run out for the keyed one", n, err)
	}
}

// TestLint: the names, units and help strings pass Prometheus' own linter
// (counters end in _total, units are base units, no reserved suffixes).
func TestLint(t *testing.T) {
	q, stop := scenario.Queue(t)
	defer stop()
	problems, err := testutil.CollectAndLint(promlanes.New(q))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestSemaphoreKeyedJoin: semaphores and keyed semaphores used on their
// own are exported under the names given, beside a queue's lanes, with
// the namespace and constant labels chosen.
func TestSemaphoreKeyedJoin(t *testing.T) {
	s, stopS := scenario.Semaphore(t)
	defer stopS()
	k, stopK := scenario.Keyed(t)
	defer stopK()
	reg := prometheus.NewPedanticRegistry()
	src := exporters.Join(exporters.Semaphore("api", s), exporters.Keyed("jobs", k))
	reg.MustRegister(promlanes.New(src, promlanes.WithNamespace("gw"), promlanes.WithConstLabels(prometheus.Labels{"queue": "main"})))
	want := `
# HELP gw_acquires_total Acquire calls on the lane that ended, by outcome (each call ends in exactly one).
# TYPE gw_acquires_total counter
gw_acquires_total{kind="global",lane="api",outcome="acquired",queue="main"} 2
gw_acquires_total{kind="global",lane="api",outcome="cancelled",queue="main"} 0
gw_acquires_total{kind="global",lane="api",outcome="failed",queue="main"} 0
gw_acquires_total{kind="global",lane="api",outcome="rejected",queue="main"} 1
gw_acquires_total{kind="global",lane="api",outcome="timed_out",queue="main"} 0
gw_acquires_total{kind="keyed",lane="jobs",outcome="acquired",queue="main"} 2
gw_acquires_total{kind="keyed",lane="jobs",outcome="cancelled",queue="main"} 0
gw_acquires_total{kind="keyed",lane="jobs",outcome="failed",queue="main"} 0
gw_acquires_total{kind="keyed",lane="jobs",outcome="rejected",queue="main"} 0
gw_acquires_total{kind="keyed",lane="jobs",outcome="timed_out",queue="main"} 0
# HELP gw_capacity_permits Capacity of the lane on the footing of in_use_permits (of a global lane; of a keyed lane, per key times keys alive; of a rate lane, its burst); none for a lane a fleet shares. in_use_permits / capacity_permits is the usage; sum across instances.
# TYPE gw_capacity_permits gauge
gw_capacity_permits{kind="global",lane="api",queue="main"} 4
gw_capacity_permits{kind="keyed",lane="jobs",queue="main"} 4
# HELP gw_double_releases_total Releases of the lane's permits that were already released.
# TYPE gw_double_releases_total counter
gw_double_releases_total{kind="global",lane="api",queue="main"} 1
gw_double_releases_total{kind="keyed",lane="jobs",queue="main"} 0
# HELP gw_in_use_permits Permits of the lane held now by this instance, over all keys (of a rate lane, the requests or tokens its window counts now). Sum across keys and instances.
# TYPE gw_in_use_permits gauge
gw_in_use_permits{kind="global",lane="api",queue="main"} 3
gw_in_use_permits{kind="keyed",lane="jobs",queue="main"} 1
# HELP gw_key_capacity_permits Capacity per key of a keyed lane, the same for every key. Aggregate with max, not sum.
# TYPE gw_key_capacity_permits gauge
gw_key_capacity_permits{kind="keyed",lane="jobs",queue="main"} 2
# HELP gw_keys Entries alive in a keyed lane (of a lane a fleet shares, its keys with callers of this instance waiting).
# TYPE gw_keys gauge
gw_keys{kind="keyed",lane="jobs",queue="main"} 2
# HELP gw_releases_total First releases of the lane's granted permits.
# TYPE gw_releases_total counter
gw_releases_total{kind="global",lane="api",queue="main"} 1
gw_releases_total{kind="keyed",lane="jobs",queue="main"} 1
# HELP gw_reorder_holds_run_out_total Callers of a keyed lane that went when their reorder hold ran out, a predecessor's number still missing (keyedsem.WithReorderHold).
# TYPE gw_reorder_holds_run_out_total counter
gw_reorder_holds_run_out_total{kind="keyed",lane="jobs",queue="main"} 0
`
	names := []string{"gw_acquires_total", "gw_capacity_permits", "gw_double_releases_total", "gw_in_use_permits", "gw_key_capacity_permits", "gw_keys", "gw_releases_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

// TestRepeatedLaneFailsTheScrape: two lanes of one name (two queues joined
// that both have a "global") make the scrape fail with an error naming
// the lane, rather than one lane's figures standing for the other's.
func TestRepeatedLaneFailsTheScrape(t *testing.T) {
	s, stop := scenario.Semaphore(t)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promlanes.New(exporters.Join(exporters.Semaphore("global", s), exporters.Semaphore("global", s))))
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), `lane "global" twice`) {
		t.Fatalf("scrape of a repeated lane: %v; want an error naming it", err)
	}
}

// histogramText writes a Prometheus histogram's series for one lane: the
// cumulative count at each le bound of semaphore.HistogramBounds, given
// by cum(le), then +Inf, sum and count.
func histogramText(name, lane, kind string, cum func(le float64) int, count int, sum string) string {
	var b strings.Builder
	for _, d := range semaphore.HistogramBounds() {
		le := d.Seconds()
		fmt.Fprintf(&b, "%s_bucket{kind=%q,lane=%q,le=%q} %d\n", name, kind, lane, strconv.FormatFloat(le, 'g', -1, 64), cum(le))
	}
	fmt.Fprintf(&b, "%s_bucket{kind=%q,lane=%q,le=\"+Inf\"} %d\n", name, kind, lane, count)
	fmt.Fprintf(&b, "%s_sum{kind=%q,lane=%q} %s\n%s_count{kind=%q,lane=%q} %d\n", name, kind, lane, sum, name, kind, lane, count)
	return b.String()
}

// TestHistogramScrape: a lane made WithHistograms (scenario.Timed, on a
// fake clock) is scraped with lanes_wait_seconds and lanes_hold_seconds in
// seconds, bucket by bucket; the lanes without histograms (scenario.Queue)
// have no such series.
func TestHistogramScrape(t *testing.T) {
	q, stop := scenario.Timed(t)
	defer stop()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(q))
	step := func(at ...float64) func(float64) int { // at[i]: where the i+1-th observation is counted from
		return func(le float64) int {
			n := 0
			for _, a := range at {
				if le >= a {
					n++
				}
			}
			return n
		}
	}
	want := "# HELP lanes_wait_seconds Time a grant of the lane waited in line (0 for one that did not queue).\n" +
		"# TYPE lanes_wait_seconds histogram\n" +
		histogramText("lanes_wait_seconds", "api", "global", step(0, 0, 0.020), 3, "0.02") +
		"# HELP lanes_hold_seconds Time from a grant of the lane to its release.\n" +
		"# TYPE lanes_hold_seconds histogram\n" +
		histogramText("lanes_hold_seconds", "api", "global", step(0.005, 0.020), 2, "0.023")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lanes_wait_seconds", "lanes_hold_seconds"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(promlanes.New(q))
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}

	plain, stopPlain := scenario.Queue(t)
	defer stopPlain()
	if n := testutil.CollectAndCount(promlanes.New(plain), "lanes_wait_seconds", "lanes_hold_seconds"); n != 0 {
		t.Fatalf("lanes without histograms: %d histogram series; want none", n)
	}
}

// TestReorderHoldsRunOut: a keyed lane's reorder holds that ran out
// (keyedsem.Stats.HoldsRunOut) are exported, from a queue's keyed lane and
// from a keyed semaphore on its own alike.
func TestReorderHoldsRunOut(t *testing.T) {
	k, stop := scenario.Reordered(t)
	defer stop()
	q := lanequeue.New[string]()
	if err := q.Add("thread", lanequeue.NewKeyedLane(k)); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]exporters.Source{"queue": q, "keyed": exporters.Keyed("thread", k)} {
		want := `
# HELP lanes_reorder_holds_run_out_total Callers of a keyed lane that went when their reorder hold ran out, a predecessor's number still missing (keyedsem.WithReorderHold).
# TYPE lanes_reorder_holds_run_out_total counter
lanes_reorder_holds_run_out_total{kind="keyed",lane="thread"} 1
`
		if err := testutil.CollectAndCompare(promlanes.New(src), strings.NewReader(want), "lanes_reorder_holds_run_out_total"); err != nil {
			t.Errorf("from a %s source: %v", name, err)
		}
	}
}

// TestRedisLaneHistograms: a Redis lane made redislane.WithHistograms, in
// a queue, has its wait and hold histograms exported like any other lane's:
// the instance's one grant in lanes_wait_seconds, no release yet in
// lanes_hold_seconds.
func TestRedisLaneHistograms(t *testing.T) {
	instances, _, _, stop := scenario.UsageRedis(t)
	defer stop()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(instances[0]))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lane" && l.GetValue() == scenario.FleetLane && m.GetHistogram() != nil {
					count[mf.GetName()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	want := map[string]uint64{"lanes_wait_seconds": 1, "lanes_hold_seconds": 0}
	if len(count) != len(want) || count["lanes_wait_seconds"] != 1 || count["lanes_hold_seconds"] != 0 {
		t.Fatalf("histograms of the Redis lane %q: %v; want %v", scenario.FleetLane, count, want)
	}
}

// TestConstLabelsReserved: a constant label named as one of the series'
// own labels (lane, kind, outcome, group) is refused when the collector is
// registered. group was accepted unless group waits were on, though the
// option's doc names it (a new user's trial).
func TestConstLabelsReserved(t *testing.T) {
	for _, l := range []string{"lane", "kind", "outcome", "group"} {
		reg := prometheus.NewRegistry()
		err := reg.Register(promlanes.New(lanequeue.Default[string](2), promlanes.WithConstLabels(prometheus.Labels{l: "v"})))
		if err == nil {
			t.Errorf("constant label %q: registered; want it refused", l)
		}
	}
}

// TestNewRefusesANilQueue: a nil *lanequeue.Queue (a typed nil in the
// Source) panics in New, at set-up; it passed, and the first scrape
// crashed the process in the registry's goroutine (a new user's trial
// found it).
func TestNewRefusesANilQueue(t *testing.T) {
	var q *lanequeue.Queue[string]
	defer func() {
		if r := recover(); r != "promlanes: nil source" {
			t.Fatalf("recovered %v; want the nil source panic", r)
		}
	}()
	promlanes.New(q)
	t.Fatal("New(nil *Queue) returned")
}

// TestCooldownSeries: from a lane's first pause (Queue.Cooldown) on, the
// lane has its cooldown series: the time left, the callers waiting it out,
// the calls refused for a deadline before its end; they pass the linter.
// Before, a pause showed in no series: a dashboard saw no waiter and no
// refusal during a provider's 429 storm (a new user's trial found it).
func TestCooldownSeries(t *testing.T) {
	q0, stop := scenario.Queue(t) // never paused
	defer stop()
	if n := testutil.CollectAndCount(promlanes.New(q0), "lanes_cooldown_seconds"); n != 0 {
		t.Fatalf("%d cooldown series of lanes never paused; want 0", n)
	}
	q := scenario.Paused(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(q))
	want := `
# HELP lanes_cooldown_refused_total Calls that failed because their deadline came before the lane's pause ended: at once (in no other series), or while waiting it out (then also acquired and released on the lane).
# TYPE lanes_cooldown_refused_total counter
lanes_cooldown_refused_total{kind="global",lane="model"} 1
# HELP lanes_cooldown_seconds Time left of the lane's pause (lanequeue.Queue.Cooldown, a provider's Retry-After); 0 when none.
# TYPE lanes_cooldown_seconds gauge
lanes_cooldown_seconds{kind="global",lane="model"} 60
# HELP lanes_cooldown_waiters Callers waiting out the lane's pause now, each holding the lane (so in in_use_permits, not in waiters).
# TYPE lanes_cooldown_waiters gauge
lanes_cooldown_waiters{kind="global",lane="model"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lanes_cooldown_seconds", "lanes_cooldown_waiters", "lanes_cooldown_refused_total"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(promlanes.New(q))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
