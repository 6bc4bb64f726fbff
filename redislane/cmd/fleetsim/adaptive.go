package main

// The -adaptive run: does an adaptive limit shared by a fleet refuse as
// little as one instance's own? A fake provider, in process, admits at
// most Limit calls at once (a limit the callers do not know) and refuses
// the rest at once with adaptive.ErrOverload, the way a 429 reaches a
// controller. The same number of callers, each calling it in a loop
// through an adaptive.Controller over a redislane.Fleet, is spread over
// 1 instance and then over 3 (each instance its own go-redis client, its
// own Fleet of one name and its own Controller with the default options;
// the fleet's elected leader moves the limit). Rounds alternate 1 and 3
// on a fresh lane each, in the order 1, 3, 3, 1, 1, 3, ..., so that both
// meet the same machine and a drift of it falls on both; the figure is
// the ratio of the medians of the two refusal rates (the share of calls
// refused), counted after a warm-up in which the limit finds the
// provider's.
//
// It measures in real time (calls take Latency, slept), so it is a
// benchmark, not a test: the figures, with the command, are in
// docs/benchmarks-fleet.md.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// adaptiveConfig is the -adaptive run's settings.
type adaptiveConfig struct {
	Redis    string        // address; "" starts a redis-server of its own
	Limit    int64         // the provider's calls in flight
	Ceiling  int64         // the controllers' ceiling (the fleet's starting limit)
	Callers  int           // callers in all, spread over the instances
	Latency  time.Duration // one call's time at the provider
	Warm     time.Duration // not counted: the limit finds the provider's
	Measure  time.Duration // counted
	Rounds   int           // rounds of each fleet size
	Replicas []int         // the fleet sizes compared, the first the baseline
}

func defaultAdaptiveConfig() adaptiveConfig {
	return adaptiveConfig{
		Limit: 20, Ceiling: 64, Callers: 48, Latency: 20 * time.Millisecond,
		Warm: 3 * time.Second, Measure: 8 * time.Second, Rounds: 3, Replicas: []int{1, 3},
	}
}

// adaptiveRow is one round of one fleet size.
type adaptiveRow struct {
	Replicas  int
	Calls     int64   // calls that reached the provider while counted
	Refused   int64   // of them, refused
	PerSecond float64 // calls answered a second
	MaxFlight int64   // most calls in flight at the provider, refused ones included
	Limit     int64   // the fleet's limit at the end
}

func (r adaptiveRow) rate() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Refused) / float64(r.Calls)
}

// provider is the fake provider: at most limit calls at once.
type provider struct {
	limit    int64
	latency  time.Duration
	inFlight atomic.Int64
	peak     atomic.Int64
	counting atomic.Bool
	calls    atomic.Int64
	refused  atomic.Int64
}

var errRefused = fmt.Errorf("%w: 429 Too Many Requests", adaptive.ErrOverload)

func (p *provider) call(ctx context.Context) error {
	n := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		m := p.peak.Load()
		if n <= m || p.peak.CompareAndSwap(m, n) {
			break
		}
	}
	counting := p.counting.Load()
	if counting {
		p.calls.Add(1)
	}
	if n > p.limit {
		if counting {
			p.refused.Add(1)
		}
		return errRefused
	}
	t := time.NewTimer(p.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runAdaptive runs every round and returns them in the order run.
func runAdaptive(cfg adaptiveConfig) ([]adaptiveRow, error) {
	if cfg.Limit < 1 || cfg.Ceiling < cfg.Limit || cfg.Callers < 1 || cfg.Latency <= 0 || cfg.Measure <= 0 || cfg.Rounds < 1 || len(cfg.Replicas) == 0 {
		return nil, errors.New("-adaptive needs limit >= 1, ceiling >= limit, callers >= 1, latency and duration > 0, rounds >= 1")
	}
	for _, r := range cfg.Replicas {
		if r < 1 || r > cfg.Callers {
			return nil, fmt.Errorf("-adaptive: %d replicas for %d callers", r, cfg.Callers)
		}
	}
	if cfg.Redis == "" {
		srv, err := redistest.Start()
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		cfg.Redis = srv.Addr
	}
	var rows []adaptiveRow
	for round := 0; round < cfg.Rounds; round++ {
		sizes := slices.Clone(cfg.Replicas)
		if round%2 == 1 {
			slices.Reverse(sizes) // 1, 3, 3, 1, 1, 3, ...: drift falls on both
		}
		for _, r := range sizes {
			row, err := adaptiveRound(cfg, r, fmt.Sprintf("fleetsim:adaptive:%d:%d:%d", time.Now().UnixNano(), round, r))
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// adaptiveRound runs cfg.Callers callers over replicas instances of a
// fleet lane name.
func adaptiveRound(cfg adaptiveConfig, replicas int, name string) (adaptiveRow, error) {
	p := &provider{limit: cfg.Limit, latency: cfg.Latency}
	type instance struct {
		rc  *redis.Client
		f   *redislane.Fleet
		ctl *adaptive.Controller
	}
	insts := make([]instance, 0, replicas)
	defer func() {
		for _, in := range insts {
			in.f.Close()
			in.rc.Close()
		}
	}()
	for i := 0; i < replicas; i++ {
		rc := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: true, PoolSize: cfg.Callers + 4})
		f, err := redislane.NewFleet(rc, name, cfg.Ceiling, redislane.WithLease(5*time.Second), redislane.WithQuarantine(0))
		if err != nil {
			rc.Close()
			return adaptiveRow{}, err
		}
		ctl, err := adaptive.New(redislane.AsBudget(f), 1, cfg.Ceiling)
		if err != nil {
			f.Close()
			rc.Close()
			return adaptiveRow{}, err
		}
		insts = append(insts, instance{rc, f, ctl})
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Callers)
	for i := 0; i < cfg.Callers; i++ {
		ctl := insts[i%replicas].ctl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := ctl.Do(ctx, 1, p.call)
				if err != nil && !errors.Is(err, adaptive.ErrOverload) && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(cfg.Warm)
	p.peak.Store(0)
	p.counting.Store(true)
	start := time.Now()
	time.Sleep(cfg.Measure)
	p.counting.Store(false)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return adaptiveRow{}, fmt.Errorf("%d replicas: a call failed: %w", replicas, err)
	}
	calls, refused := p.calls.Load(), p.refused.Load()
	return adaptiveRow{
		Replicas: replicas, Calls: calls, Refused: refused,
		PerSecond: float64(calls-refused) / elapsed.Seconds(),
		MaxFlight: p.peak.Load(), Limit: insts[0].f.Capacity(),
	}, nil
}

// adaptiveVerdict is the median refusal rate of each fleet size and the
// ratio of each to the first (the baseline).
type adaptiveVerdict struct {
	Replicas []int
	Median   []float64
	Ratio    []float64
}

func summarizeAdaptive(cfg adaptiveConfig, rows []adaptiveRow) adaptiveVerdict {
	v := adaptiveVerdict{Replicas: cfg.Replicas}
	for _, r := range cfg.Replicas {
		var rates []float64
		for _, row := range rows {
			if row.Replicas == r {
				rates = append(rates, row.rate())
			}
		}
		v.Median = append(v.Median, median(rates))
	}
	for _, m := range v.Median {
		ratio := 1.0 // neither refused anything
		switch {
		case v.Median[0] > 0:
			ratio = m / v.Median[0]
		case m > 0:
			ratio = math.Inf(1)
		}
		v.Ratio = append(v.Ratio, ratio)
	}
	return v
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printAdaptive(cfg adaptiveConfig, rows []adaptiveRow) {
	fmt.Printf("fleetsim -adaptive: a provider that admits %d calls at once (%v each), %d callers through adaptive.Controller over redislane.Fleet (ceiling %d), %v counted after %v\n",
		cfg.Limit, cfg.Latency, cfg.Callers, cfg.Ceiling, cfg.Measure, cfg.Warm)
	fmt.Printf("  %-9s %-10s %-9s %-8s %-12s %-10s %s\n", "replicas", "calls", "refused", "rate", "answered/s", "peak", "limit at end")
	for _, r := range rows {
		fmt.Printf("  %-9d %-10d %-9d %-8s %-12.0f %-10d %d\n", r.Replicas, r.Calls, r.Refused,
			fmt.Sprintf("%.2f%%", 100*r.rate()), r.PerSecond, r.MaxFlight, r.Limit)
	}
	v := summarizeAdaptive(cfg, rows)
	for i, r := range v.Replicas {
		fmt.Printf("  %d replica(s): median refusal rate %.2f%%", r, 100*v.Median[i])
		if i > 0 {
			fmt.Printf(", %.2fx that of %d", v.Ratio[i], v.Replicas[0])
		}
		fmt.Println()
	}
}
