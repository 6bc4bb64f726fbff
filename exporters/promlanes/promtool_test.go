package promlanes_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/promlanes"
)

// TestPromtoolCheckMetrics: the exposition of every kind of lane, as a
// scrape of /metrics gets it (keyed, global and rate lanes, histograms, a
// keyed lane's reorder holds, a fleet's lane, a fair lane's waits by
// group, and the adaptive controllers), passes `promtool check metrics`, Prometheus' own linter
// of the text format. Skipped, with the reason, where promtool is not
// installed (on Debian it comes with the prometheus package).
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("skipping: promtool not found in PATH (on Debian: apt-get install prometheus)")
	}
	q, stopQ := scenario.Queue(t)
	defer stopQ()
	timed, stopT := scenario.Timed(t)
	defer stopT()
	k, stopK := scenario.Reordered(t)
	defer stopK()
	fleet, _, _, stopF := scenario.UsageFleet(t)
	defer stopF()
	groups := exporters.NewGroupWaits(exporters.TopGroups(2))
	scenario.Fair(t, groups, "big", "small", "", "big", "third")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(exporters.Join(q, timed, exporters.Keyed("thread", k)), promlanes.WithGroupWaits(groups)))
	reg.MustRegister(promlanes.New(fleet[0], promlanes.WithNamespace("fleet")))
	reg.MustRegister(promlanes.NewLimits(exporters.Controllers(scenario.Controllers(t))))

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.Bytes()
	for _, name := range []string{"lanes_wait_seconds_bucket", `lanes_group_wait_seconds_bucket{group="other"`, "lanes_reorder_holds_run_out_total", "fleet_fleet_capacity_permits", "lanes_adaptive_"} {
		if !bytes.Contains(body, []byte(name)) {
			t.Fatalf("the exposition has no %s: the check would not cover it", name)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
