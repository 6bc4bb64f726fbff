package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
)

// TestProviderTargets: on a seeded run of the simulated provider, each
// controller keeps at least 90% of the goodput of the fixed limit that is
// right on average, with at most a tenth of the 429 rate of the fixed
// limit twice as high (issue 16's targets). The run is in simulated time,
// so the figures are the same on any machine.
func TestProviderTargets(t *testing.T) {
	skipUnderRace(t)
	for _, seed := range []uint64{7} { // TestProviderFlag runs seed 1
		rep := simulateProviders(defaultProvider(seed))
		right, high := rep.Results[1], rep.Results[2]
		for _, r := range rep.Results[3:] {
			if r.Goodput < 0.9*right.Goodput {
				t.Errorf("seed %d: %s goodput %.1f/s, under 90%% of fixed right's %.1f/s", seed, r.Name, r.Goodput, right.Goodput)
			}
			if r.RefusedPc > high.RefusedPc/10 {
				t.Errorf("seed %d: %s 429 rate %.2f%%, over a tenth of fixed too high's %.2f%%", seed, r.Name, r.RefusedPc, high.RefusedPc)
			}
		}
		if !rep.OK {
			t.Errorf("seed %d: the report says the targets were missed", seed)
		}
	}
}

// TestProviderIsDeterministic: the same seed gives the same figures.
func TestProviderIsDeterministic(t *testing.T) {
	cfg := defaultProvider(3)
	cfg.Duration /= 6
	a := simulateProvider(cfg, provVegas, 0, []adaptive.Option{adaptive.WithVegas(0.1, 0.25)})
	b := simulateProvider(cfg, provVegas, 0, []adaptive.Option{adaptive.WithVegas(0.1, 0.25)})
	if a != b {
		t.Fatalf("two runs of seed 3 differ:\n%+v\n%+v", a, b)
	}
}

// skipUnderRace skips the full runs under the race detector: the
// simulation is one goroutine, so the detector finds nothing there and
// makes a run ten times slower; make test's 386 pass and a plain go test
// run them.
func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("a one-goroutine simulation: run without -race (the 386 pass does)")
	}
}

// TestProviderFlag: lanesim -provider -json prints a report that parses,
// with a row per lane, and meets the targets on seed 1 (exit status 0);
// the table of that report has every row and the verdict. One run serves
// both (the provider's run is the slowest of lanesim's tests).
func TestProviderFlag(t *testing.T) {
	skipUnderRace(t)
	var out, errs bytes.Buffer
	if code := run([]string{"-provider", "-seed", "1", "-json"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, stderr %s, output:\n%s", code, errs.String(), out.String())
	}
	var rep providerReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v in:\n%s", err, out.String())
	}
	if len(rep.Results) != 5 || !rep.OK || rep.Right == 0 || rep.Config.Seed != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if rep.Rates == nil || len(rep.Rates.Results) != 3 || !rep.Rates.OK || rep.Rates.Config.Seed != 1 {
		t.Fatalf("the rate limits' report: %+v", rep.Rates)
	}
	out.Reset()
	printProvider(&out, rep)
	printRates(&out, *rep.Rates)
	for _, row := range append([]string{provLow, provRight, provHigh, provAIMD, provVegas, ": met"}, policyNames[:]...) {
		if !strings.Contains(out.String(), row) {
			t.Errorf("no %q in:\n%s", row, out.String())
		}
	}
}

// TestProviderRefusalsAcrossLatencies: the default controllers' 429 rate
// does not depend on the provider's latency, nor climb at a small limit
// (issue 24: a user measured 5.8% against a provider near 10 with 80 ms
// calls, where lanesim's default provider gave 0.3%). With -v it prints
// the table of docs/benchmarks-policies.md.
func TestProviderRefusalsAcrossLatencies(t *testing.T) {
	skipUnderRace(t)
	for _, steps := range [][]int64{{10, 14, 8}, {60, 90, 40}} {
		for _, base := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
			cfg := defaultProvider(1)
			cfg.Base, cfg.Steps, cfg.Duration = base, steps, 10*time.Minute
			if steps[0] > 10 && base != 80*time.Millisecond {
				continue // the default provider's limits: one latency shows them
			}
			right := simulateProvider(cfg, provRight, cfg.meanLimit(), nil)
			aimd := simulateProvider(cfg, provAIMD, 0, []adaptive.Option{adaptive.WithAIMD(1, 0.9)})
			vegas := simulateProvider(cfg, provVegas, 0, []adaptive.Option{adaptive.WithVegas(0.1, 0.25)})
			t.Logf("| %v | %v | %.2f%% | %.0f%% | %.2f%% | %.0f%% |", steps, base, aimd.RefusedPc, 100*aimd.Goodput/right.Goodput, vegas.RefusedPc, 100*vegas.Goodput/right.Goodput)
			for _, r := range []providerResult{aimd, vegas} {
				if r.RefusedPc > 1 {
					t.Errorf("limits %v, calls of %v: %s refused %.2f%% of the calls, over 1%%", steps, base, r.Name, r.RefusedPc)
				}
				if r.Goodput < 0.95*right.Goodput {
					t.Errorf("limits %v, calls of %v: %s goodput %.1f/s, under 95%% of fixed right's %.1f/s", steps, base, r.Name, r.Goodput, right.Goodput)
				}
			}
		}
	}
}
