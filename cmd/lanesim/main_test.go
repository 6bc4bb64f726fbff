package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

func smallConfig() config {
	return config{Keys: 12, Channels: 3, Messages: 4, Latency: 100 * time.Microsecond, Jitter: 0.5,
		Global: 4, Duration: time.Minute, Seed: 7}
}

// TestSimulationKeepsPerThreadGuarantees runs both configurations with
// small parameters and checks the figures they report: every message
// handled, at most one handler per thread at once, no order violation, the
// global lane's bound on messages in flight, and the session lane's keys
// dropped once idle (idle timeout 0). The -duration cap is a failsafe.
func TestSimulationKeepsPerThreadGuarantees(t *testing.T) {
	cfg := smallConfig()
	rep := simulateAll(context.Background(), cfg, nil)
	if len(rep.Results) != 2 || !rep.OK {
		t.Fatalf("report %+v; want two runs, OK", rep)
	}
	for _, r := range rep.Results {
		if r.Handled != cfg.Keys*cfg.Messages || r.Incomplete != 0 {
			t.Errorf("%s: handled %d of %d (incomplete %d)", r.Mode, r.Handled, r.Messages, r.Incomplete)
		}
		if r.MaxPerKey != 1 || r.OrderViolations != 0 {
			t.Errorf("%s: %d handlers at once for a thread, %d order violations; want 1, 0", r.Mode, r.MaxPerKey, r.OrderViolations)
		}
		if r.P50 <= 0 || r.P99 < r.P50 || r.Throughput <= 0 {
			t.Errorf("%s: p50 %v, p99 %v, throughput %v", r.Mode, r.P50, r.P99, r.Throughput)
		}
	}
	g1, sg := rep.Results[0], rep.Results[1]
	if g1.MaxGlobal != 1 {
		t.Errorf("global-1: %d messages in flight at once; want 1", g1.MaxGlobal)
	}
	if sg.MaxGlobal > cfg.Global {
		t.Errorf("session+global: %d messages in flight, global capacity %d", sg.MaxGlobal, cfg.Global)
	}
	if g1.KeysAlive != -1 {
		t.Errorf("global-1 reports %d session keys; it uses no session lane", g1.KeysAlive)
	}
	if sg.KeysAlive != 0 || sg.Evictions < uint64(cfg.Keys) {
		t.Errorf("session+global: %d keys alive, %d evictions after the run; want 0 and >= %d (idle timeout 0)", sg.KeysAlive, sg.Evictions, cfg.Keys)
	}
}

// TestTrackerCountsViolations checks the figures of the unsafe run at
// their source: the tracker counts overlapping handlers and messages that
// start before the previous one has finished.
func TestTrackerCountsViolations(t *testing.T) {
	var tr tracker
	if tr.start(1) {
		t.Fatal("first message reported out of order")
	}
	if !tr.start(2) { // 1 still running
		t.Fatal("message 2 started while 1 runs: not reported")
	}
	tr.finish(2)
	tr.finish(1)
	if tr.start(3) {
		t.Fatal("message 3 after 1 and 2 finished reported out of order")
	}
	tr.finish(3)
	if got := tr.max.Load(); got != 2 {
		t.Fatalf("max in flight %d; want 2", got)
	}
	if !tr.start(5) { // 4 never ran
		t.Fatal("message 5 started before 4: not reported")
	}
}

// TestUnsafeRunIsReportedNotFailed: the global-only run may break the
// per-thread guarantees (it has no per-thread lane); that is shown, and
// does not fail the command.
func TestUnsafeRunIsReportedNotFailed(t *testing.T) {
	cfg := smallConfig()
	cfg.Unsafe = true
	rep := simulateAll(context.Background(), cfg, nil)
	if len(rep.Results) != 3 || rep.Results[2].PerKey || !rep.OK {
		t.Fatalf("report %+v; want three runs, the third without per-key guarantee, OK", rep)
	}
	if r := rep.Results[2]; r.Handled != cfg.Keys*cfg.Messages {
		t.Fatalf("global only: handled %d of %d", r.Handled, r.Messages)
	}
}

// TestDurationCapCutsTheRun: a run longer than -duration stops, and the
// messages it did not handle are reported as incomplete.
func TestDurationCapCutsTheRun(t *testing.T) {
	cfg := smallConfig()
	cfg.Latency = time.Hour
	cfg.Duration = 50 * time.Millisecond
	r := simulate(context.Background(), cfg, modeSession, nil)
	if r.Handled != 0 || r.Incomplete != cfg.Keys*cfg.Messages {
		t.Fatalf("handled %d, incomplete %d; want 0, %d", r.Handled, r.Incomplete, cfg.Keys*cfg.Messages)
	}
	if r.MaxPerKey > 1 || r.OrderViolations != 0 {
		t.Fatalf("cut run: %d per thread, %d violations", r.MaxPerKey, r.OrderViolations)
	}
}

// TestRunOutput checks the command's table and JSON output and its exit
// status.
func TestRunOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-keys", "6", "-messages", "3", "-latency", "50us", "-global", "3", "-quiet"}
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, errOut.String())
	}
	for _, want := range []string{"global-1 (bug)", "session+global", "max/thread", "order viol.", "keys alive", "OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(append(args, "-json"), &out, &errOut); code != 0 {
		t.Fatalf("-json: exit %d; stderr: %s", code, errOut.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out.String())
	}
	if !rep.OK || len(rep.Results) != 2 || rep.Results[1].Handled != 18 || rep.Config.Keys != 6 {
		t.Fatalf("-json report %+v", rep)
	}
	if code := run([]string{"-keys", "0"}, &out, &errOut); code != 2 {
		t.Fatalf("-keys 0: exit %d; want 2", code)
	}
}
