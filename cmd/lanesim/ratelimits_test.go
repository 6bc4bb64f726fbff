package main

import (
	"testing"
	"time"
)

// TestRateTargets: against the provider with rate limits (tokens per
// minute binding), the lanes row serves at least 95% of the binding limit
// with at most one 429 a minute on average (issue 24's targets; in every
// minute: TestRateAtMostOneRefusalInAnyMinute); charging
// estimates for good (fixed limits) leaves a fifth of the budget unused,
// and the naive loop makes the provider refuse thousands of calls a minute.
// The run is in simulated time: the same figures on any machine.
func TestRateTargets(t *testing.T) {
	seeds := []uint64{1, 2}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		rep, err := simulateRatesAll(defaultRates(seed))
		if err != nil {
			t.Fatal(err)
		}
		naive, fixed, lanes := rep.Results[policyNaive], rep.Results[policyFixed], rep.Results[policyLanes]
		if lanes.Binding < 0.95 {
			t.Errorf("seed %d: lanes use %.1f%% of the binding limit, under 95%%", seed, 100*lanes.Binding)
		}
		if lanes.PerWindow > 1 {
			t.Errorf("seed %d: lanes: %.2f 429s a minute, over 1", seed, lanes.PerWindow)
		}
		if lanes.Debts == 0 {
			t.Errorf("seed %d: no call used more than its estimate: the run does not test a debt", seed)
		}
		if fixed.Binding > 0.85 {
			t.Errorf("seed %d: fixed limits use %.1f%% of the binding limit: estimates charged for good should waste a fifth", seed, 100*fixed.Binding)
		}
		if naive.PerWindow < 100*max(lanes.PerWindow, 1) {
			t.Errorf("seed %d: the naive loop made %.1f 429s a minute, the lanes %.2f: the run shows no storm", seed, naive.PerWindow, lanes.PerWindow)
		}
		if !rep.OK {
			t.Errorf("seed %d: the report says the targets were missed", seed)
		}
	}
}

// TestRateAtMostOneRefusalInAnyMinute: over seeds 1-12 the lanes row
// meets issue 24's target in every steady-state minute of the provider,
// not only on average: at most one 429 in any minute, and at least 95% of
// the binding limit served. A 429 comes when the calls in flight, admitted
// on their estimates, use more than them (the lane counts the difference
// only when they settle); the first of a minute is allowed for, but
// seeds 2 and 11 had a second one in the same minute when the lane's
// count after the pause was as low as before it. The run is in simulated
// time, the same on any machine; each seed takes about 40ms (the lanes row
// only).
func TestRateAtMostOneRefusalInAnyMinute(t *testing.T) {
	seeds := 12
	if raceEnabled {
		seeds = 2 // a one-goroutine simulation: the detector finds nothing there
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		r, err := simulateRates(defaultRates(seed), policyLanes)
		if err != nil {
			t.Fatal(err)
		}
		if r.MaxWindow > 1 {
			t.Errorf("seed %d: lanes: %d 429s in one minute (%d in %d minutes), over 1", seed, r.MaxWindow, r.Refused, r.Windows)
		}
		if r.Binding < 0.95 {
			t.Errorf("seed %d: lanes use %.1f%% of the binding limit, under 95%%", seed, 100*r.Binding)
		}
	}
}

// TestRateRequestsBinding: with small calls the requests per minute bind,
// and the lanes still serve at least 95% of them without a 429.
func TestRateRequestsBinding(t *testing.T) {
	cfg := defaultRates(3)
	cfg.EstMin, cfg.EstMax = 200, 600
	cfg.Duration = 12 * time.Minute
	r, err := simulateRates(cfg, policyLanes)
	if err != nil {
		t.Fatal(err)
	}
	if r.UseRPM < 0.95 || r.UseRPM < r.UseTPM || r.UseRPM < r.UseConc {
		t.Errorf("requests/min use %.1f%% (tokens %.1f%%, concurrency %.1f%%): want the requests binding, at 95%% or more", 100*r.UseRPM, 100*r.UseTPM, 100*r.UseConc)
	}
	if r.Refused != 0 {
		t.Errorf("%d 429s: a requests lane of the provider's own count should meet none", r.Refused)
	}
}

// TestRateProviderNeverPassesItsLimits: the simulated provider itself
// refuses what would pass a limit, with a retry time that makes room: a
// call retried then is taken.
func TestRateProviderNeverPassesItsLimits(t *testing.T) {
	cfg := defaultRates(1)
	cfg.Concurrency, cfg.RPM, cfg.TPM = 2, 3, 1000
	p := &rateProvider{cfg: &cfg}
	if ok, _ := p.start(0, 600); !ok {
		t.Fatal("first call refused")
	}
	ok, retry := p.start(time.Second, 600)
	if ok || retry != time.Minute-time.Second {
		t.Fatalf("a call over the tokens: ok %v, retry %v; want refused, retry 59s", ok, retry)
	}
	if ok, _ := p.start(2*time.Second, 400); !ok {
		t.Fatal("a call within every limit refused")
	}
	if ok, retry := p.start(3*time.Second, 1); ok || retry != time.Second {
		t.Fatalf("a third call in flight: ok %v, retry %v; want refused, retry 1s", ok, retry)
	}
	p.inflight = 0
	if ok, _ := p.start(time.Minute, 600); !ok {
		t.Fatal("the retry, once the first call left the minute, refused")
	}
}

// TestRateIsDeterministic: the same seed gives the same figures.
func TestRateIsDeterministic(t *testing.T) {
	cfg := defaultRates(4)
	cfg.Duration = 6 * time.Minute
	a, err := simulateRates(cfg, policyLanes)
	if err != nil {
		t.Fatal(err)
	}
	b, err := simulateRates(cfg, policyLanes)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("two runs of seed 4 differ:\n%+v\n%+v", a, b)
	}
}

// TestRateCooldownWhenTheBudgetIsTooHigh: when the gateway's token lane
// is given a quarter more than the provider allows, only the provider's
// 429s show it: the lanes' pauses (Queue.Cooldown for every caller, until
// the Retry-After) keep the 429s to 1.6 a minute, where callers that each
// retried alone after their pause made about 29,000 (measured with the
// cooldown taken out), and the goodput stays at the provider's limit. The
// pause charges the token lane up to its budget, so that after it the
// lane admits only as its last minute's tokens leave, at the pace the
// provider let them through: 7.3 a minute before it did, a pause's end
// letting the lane fill the quarter it was told of at once.
func TestRateCooldownWhenTheBudgetIsTooHigh(t *testing.T) {
	cfg := defaultRates(1)
	cfg.LaneTPM = cfg.TPM * 5 / 4
	cfg.Duration = 12 * time.Minute
	r, err := simulateRates(cfg, policyLanes)
	if err != nil {
		t.Fatal(err)
	}
	if r.PerWindow > 3 {
		t.Errorf("%.1f 429s a minute: the pauses, filling the token lane, should hold them near 1.6", r.PerWindow)
	}
	if r.Binding < 0.95 {
		t.Errorf("the lanes use %.1f%% of the binding limit, under 95%%", 100*r.Binding)
	}
}
