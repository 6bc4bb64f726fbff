package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// The -provider run: a model API whose real concurrency limit is unknown
// to its callers, steps and drifts, answers 429 above it and slows down
// near it; and a global lane in front of it, either of a fixed capacity or
// driven by an adaptive.Controller. The run is a discrete-event
// simulation in simulated time: one goroutine, no sleeps, the same figures
// for the same seed on any machine, and a simulated half hour in about a
// second. The exit status is 1 if a controller misses issue 16's targets
// (goodput at least 90% of the right fixed limit's, a 429 rate at most a
// tenth of the too-high one's).

// providerConfig is the provider and the run.
type providerConfig struct {
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration_ns"` // simulated time of each run
	// Steps is the provider's true limit: Steps[i] for the i-th equal part
	// of the run, times a drift of ±Drift following a sine of period
	// DriftPeriod.
	Steps       []int64       `json:"steps"`
	Drift       float64       `json:"drift"`
	DriftPeriod time.Duration `json:"drift_period_ns"`
	// A call the provider takes lasts Base × (1 + Slow·u⁴) × (1 ± Jitter),
	// u its calls in flight over its limit: it slows down near the limit.
	Base   time.Duration `json:"base_ns"`
	Slow   float64       `json:"slow"`
	Jitter float64       `json:"jitter"`
	// Refuse is how long a 429 takes to come back.
	Refuse  time.Duration `json:"refuse_ns"`
	Floor   int64         `json:"floor"` // the controllers' bounds
	Ceiling int64         `json:"ceiling"`
	Start   int64         `json:"start"` // the controllers' first limit
}

func defaultProvider(seed uint64) providerConfig {
	return providerConfig{
		Seed: seed, Duration: 30 * time.Minute,
		Steps: []int64{60, 90, 40}, Drift: 0.1, DriftPeriod: 7 * time.Minute,
		Base: 500 * time.Millisecond, Slow: 0.5, Jitter: 0.3, Refuse: 50 * time.Millisecond,
		Floor: 2, Ceiling: 500, Start: 10,
	}
}

// trueLimit is the provider's limit at t.
func (c *providerConfig) trueLimit(t time.Duration) int64 {
	i := min(int(int64(len(c.Steps))*int64(t)/int64(c.Duration)), len(c.Steps)-1)
	d := 1 + c.Drift*math.Sin(2*math.Pi*float64(t)/float64(c.DriftPeriod))
	return max(1, int64(math.Round(float64(c.Steps[i])*d)))
}

// meanLimit is the time average of the true limit: the fixed limit that
// is "right" on average.
func (c *providerConfig) meanLimit() int64 {
	const n = 10000
	var sum float64
	for i := range n {
		sum += float64(c.trueLimit(c.Duration * time.Duration(i) / n))
	}
	return int64(math.Round(sum / n))
}

// providerResult is one lane in front of the provider.
type providerResult struct {
	Name      string        `json:"name"`
	Goodput   float64       `json:"goodput"`    // successful calls per simulated second
	RefusedPc float64       `json:"refused_pc"` // 429s, percent of the calls
	P50       time.Duration `json:"p50_ns"`     // latency of the successful calls
	P99       time.Duration `json:"p99_ns"`
	MeanLimit float64       `json:"mean_limit"` // the lane's capacity, time average
	// MeanGap is the mean of |capacity - true limit| over the run; Moves
	// the controller's moves of the limit; Why the last one.
	MeanGap float64 `json:"mean_gap"`
	Moves   uint64  `json:"moves"`
}

// simClock is the simulation's time, for the controller. Its timers are
// never used (the controller makes none).
type simClock struct {
	start time.Time
	now   time.Duration
}

func (c *simClock) Now() time.Time { return c.start.Add(c.now) }
func (c *simClock) NewTimer(time.Duration) clock.Timer {
	panic("lanesim: the simulated clock makes no timers")
}

// call is a call in flight: a permit of the lane, and when it ends.
type call struct {
	at, start time.Duration
	seq       uint64
	p         semaphore.Permit
	refused   bool
}

// callBefore orders calls by (at, seq): a total order, so the calls end in
// the same order whatever the heap's layout, and a seed gives the same run.
func callBefore(a, b *call) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// simulateProvider runs the provider for cfg.Duration behind a global lane
// of fixed capacity (ctlOpts nil) or driven by a controller made with
// ctlOpts. The callers always have more work than the lane admits: every
// permit freed is taken again at once, so what the lane admits is what the
// provider sees.
func simulateProvider(cfg providerConfig, name string, fixed int64, ctlOpts []adaptive.Option) providerResult {
	rng := rand.New(rand.NewPCG(cfg.Seed, 16))
	clk := &simClock{start: time.Unix(0, 0)}
	var s *semaphore.Weighted
	var ctl *adaptive.Controller
	if ctlOpts == nil {
		s = semaphore.New(fixed)
	} else {
		s = semaphore.New(cfg.Start)
		var err error
		ctl, err = adaptive.New(s, cfg.Floor, cfg.Ceiling, append([]adaptive.Option{adaptive.WithClock(clk)}, ctlOpts...)...)
		if err != nil {
			panic(err) // the options below are valid
		}
	}
	var (
		h         = minHeap[call]{before: callBefore}
		seq       uint64
		inflight  int64 // calls the provider is serving
		ok, nope  int
		lat       []time.Duration
		capArea   float64 // ∫ capacity dt
		gapArea   float64 // ∫ |capacity - true limit| dt
		lastT     time.Duration
		lastCap   = s.Capacity()
		lastLimit = cfg.trueLimit(0)
	)
	admit := func() {
		for {
			p, got := s.TryAcquire(1)
			if !got {
				return
			}
			seq++
			c := call{start: clk.now, seq: seq, p: p}
			limit := cfg.trueLimit(clk.now)
			if inflight >= limit {
				c.refused, c.at = true, clk.now+cfg.Refuse
			} else {
				inflight++
				u := float64(inflight) / float64(limit)
				j := 1 + cfg.Jitter*(2*rng.Float64()-1)
				c.at = clk.now + time.Duration(float64(cfg.Base)*(1+cfg.Slow*u*u*u*u)*j)
			}
			h.push(c)
		}
	}
	admit()
	for h.len() > 0 {
		c := h.pop()
		if c.at > cfg.Duration {
			break
		}
		dt := float64(c.at - lastT)
		capArea += dt * float64(lastCap)
		gapArea += dt * math.Abs(float64(lastCap-lastLimit))
		clk.now, lastT = c.at, c.at
		rtt := c.at - c.start
		if c.refused {
			nope++
		} else {
			inflight--
			ok++
			lat = append(lat, rtt)
		}
		if ctl != nil {
			o := adaptive.Success
			if c.refused {
				o = adaptive.Overload
			}
			ctl.Report(o, rtt) // before the release, as Do does
		}
		c.p.Release()
		admit()
		lastCap, lastLimit = s.Capacity(), cfg.trueLimit(clk.now)
	}
	r := providerResult{Name: name}
	secs := cfg.Duration.Seconds()
	r.Goodput = float64(ok) / secs
	if ok+nope > 0 {
		r.RefusedPc = 100 * float64(nope) / float64(ok+nope)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	r.MeanLimit = capArea / float64(lastT)
	r.MeanGap = gapArea / float64(lastT)
	if ctl != nil {
		st := ctl.Stats()
		r.Moves = st.Increases + st.OverloadDecreases + st.LatencyDecreases
	}
	return r
}

// providerReport is the whole -provider run.
type providerReport struct {
	Config  providerConfig   `json:"config"`
	Right   int64            `json:"right"` // the fixed limit that is right on average
	Results []providerResult `json:"results"`
	// The targets: each controller's goodput at least 90% of the right
	// fixed limit's, and its 429 rate at most a tenth of the too-high
	// one's; and Rates's.
	OK bool `json:"ok"`
	// Rates is the second table: a provider with rate limits
	// (ratelimits.go).
	Rates *rateReport `json:"rates,omitempty"`
}

// Names of the rows.
const (
	provLow   = "fixed too low"
	provRight = "fixed right"
	provHigh  = "fixed too high"
	provAIMD  = "aimd"
	provVegas = "vegas"
)

func simulateProviders(cfg providerConfig) providerReport {
	right := cfg.meanLimit()
	rep := providerReport{Config: cfg, Right: right}
	rep.Results = []providerResult{
		simulateProvider(cfg, provLow, right/2, nil),
		simulateProvider(cfg, provRight, right, nil),
		simulateProvider(cfg, provHigh, 2*right, nil),
		simulateProvider(cfg, provAIMD, 0, []adaptive.Option{adaptive.WithAIMD(1, 0.9)}),
		simulateProvider(cfg, provVegas, 0, []adaptive.Option{adaptive.WithVegas(0.1, 0.25)}),
	}
	rep.OK = controllersMet(rep.Results)
	return rep
}

// controllersMet says whether each controller of results (the rows of
// simulateProviders) meets the targets.
func controllersMet(results []providerResult) bool {
	rr, hr := results[1], results[2]
	for _, r := range results[3:] {
		if r.Goodput < 0.9*rr.Goodput || r.RefusedPc > hr.RefusedPc/10 {
			return false
		}
	}
	return true
}

// runProvider is the -provider mode of run.
func runProvider(seed uint64, asJSON bool, stdout, stderr io.Writer) int {
	rep := simulateProviders(defaultProvider(seed))
	rates, err := simulateRatesAll(defaultRates(seed))
	if err != nil {
		fmt.Fprintln(stderr, "lanesim: -provider:", err)
		return 1
	}
	rep.Rates = &rates
	concOK := controllersMet(rep.Results)
	rep.OK = concOK && rates.OK
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "lanesim:", err)
			return 1
		}
	} else {
		printProvider(stdout, rep)
		fmt.Fprintln(stdout)
		printRates(stdout, rates)
	}
	if !concOK {
		fmt.Fprintln(stderr, "lanesim: -provider: a controller missed its targets (goodput >= 90% of the right fixed limit's, 429s <= a tenth of the too-high one's)")
	}
	if !rates.OK {
		fmt.Fprintln(stderr, "lanesim: -provider: the lanes missed their targets against the rate limits (>= 95% of the binding limit, at most one 429 in any minute)")
	}
	if !rep.OK {
		return 1
	}
	return 0
}

func printProvider(w io.Writer, rep providerReport) {
	c := rep.Config
	fmt.Fprintf(w, "provider: true limit %v (each a third of %v), drift ±%.0f%% over %v; calls take %v × (1 + %.1f·u⁴) ± %.0f%%, a 429 %v\n",
		c.Steps, c.Duration, 100*c.Drift, c.DriftPeriod, c.Base, c.Slow, 100*c.Jitter, c.Refuse)
	fmt.Fprintf(w, "fixed limits %d / %d / %d (right = the true limit's mean); controllers in [%d, %d] from %d; simulated time, seed %d\n\n",
		rep.Right/2, rep.Right, 2*rep.Right, c.Floor, c.Ceiling, c.Start, c.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lane\tgoodput/s\tvs right\t429 rate\tp50\tp99\tmean limit\t|limit-true|\tmoves\t")
	right := rep.Results[1].Goodput
	for _, r := range rep.Results {
		moves := "-"
		if r.Moves > 0 {
			moves = fmt.Sprint(r.Moves)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f%%\t%.2f%%\t%v\t%v\t%.1f\t%.1f\t%s\t\n", r.Name, r.Goodput, 100*r.Goodput/right,
			r.RefusedPc, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.MeanLimit, r.MeanGap, moves)
	}
	tw.Flush()
	verdict := "met"
	if !controllersMet(rep.Results) {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "\ntargets (each controller: goodput >= 90%% of fixed right, 429 rate <= a tenth of fixed too high): %s\n", verdict)
}
