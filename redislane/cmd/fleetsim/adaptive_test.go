package main

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
)

// TestAdaptiveRunCountsAtTheProvider runs -adaptive briefly, 1 and 2
// instances: every round counts calls at the provider, the controllers
// keep the calls in flight near the provider's limit (the fleet's limit
// at most its ceiling, and the provider's peak under it), and each row
// says how many instances it had.
func TestAdaptiveRunCountsAtTheProvider(t *testing.T) {
	srv := startRedis(t)
	cfg := defaultAdaptiveConfig()
	cfg.Redis = srv.Addr
	cfg.Limit, cfg.Ceiling, cfg.Callers = 4, 8, 8
	cfg.Latency, cfg.Warm, cfg.Measure = 5*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond
	cfg.Rounds, cfg.Replicas = 1, []int{1, 2}
	type result struct {
		rows []adaptiveRow
		err  error
	}
	got := make(chan result, 1)
	go func() {
		rows, err := runAdaptive(cfg)
		got <- result{rows, err}
	}()
	var res result
	select {
	case res = <-got:
	case <-time.After(time.Minute):
		t.Fatal("runAdaptive did not return within a minute")
	}
	rows, err := res.rows, res.err
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for i, r := range rows {
		assert.Equal(t, cfg.Replicas[i], r.Replicas)
		assert.Positive(t, r.Calls, "row %d counted no call", i)
		assert.LessOrEqual(t, r.Refused, r.Calls)
		assert.LessOrEqual(t, r.Limit, cfg.Ceiling)
		// The fleet's permits bound the calls in flight: the provider sees
		// at most the ceiling at once, whatever the controllers do.
		assert.LessOrEqual(t, r.MaxFlight, cfg.Ceiling, "row %d", i)
	}
}

// TestAdaptiveRunRefusesBadInput: a configuration that cannot run is an
// error, not a hang or an empty table.
func TestAdaptiveRunRefusesBadInput(t *testing.T) {
	for _, mut := range []func(*adaptiveConfig){
		func(c *adaptiveConfig) { c.Limit = 0 },
		func(c *adaptiveConfig) { c.Ceiling = c.Limit - 1 },
		func(c *adaptiveConfig) { c.Callers = 0 },
		func(c *adaptiveConfig) { c.Rounds = 0 },
		func(c *adaptiveConfig) { c.Replicas = []int{1, 100} },
		func(c *adaptiveConfig) { c.Replicas = nil },
	} {
		cfg := defaultAdaptiveConfig()
		cfg.Redis = "127.0.0.1:1" // never reached
		mut(&cfg)
		_, err := runAdaptive(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

// TestSummarizeAdaptive: the verdict is the median refusal rate of each
// fleet size over its rounds, and its ratio to the first size's.
func TestSummarizeAdaptive(t *testing.T) {
	cfg := adaptiveConfig{Replicas: []int{1, 3}}
	rows := []adaptiveRow{
		{Replicas: 1, Calls: 1000, Refused: 10}, // 1%
		{Replicas: 3, Calls: 1000, Refused: 30}, // 3%
		{Replicas: 1, Calls: 1000, Refused: 2},  // 0.2%
		{Replicas: 3, Calls: 1000, Refused: 1},  // 0.1%
		{Replicas: 1, Calls: 1000, Refused: 4},  // 0.4%
		{Replicas: 3, Calls: 500, Refused: 3},   // 0.6%
	}
	v := summarizeAdaptive(cfg, rows)
	assert.InDelta(t, 0.004, v.Median[0], 1e-12)
	assert.InDelta(t, 0.006, v.Median[1], 1e-12)
	assert.InDelta(t, 1.5, v.Ratio[1], 1e-9)

	none := summarizeAdaptive(cfg, []adaptiveRow{{Replicas: 1, Calls: 10}, {Replicas: 3, Calls: 10}})
	assert.Equal(t, 1.0, none.Ratio[1], "neither refused: the same")
	worse := summarizeAdaptive(cfg, []adaptiveRow{{Replicas: 1, Calls: 10}, {Replicas: 3, Calls: 10, Refused: 1}})
	assert.True(t, math.IsInf(worse.Ratio[1], 1), "the baseline refused none, the fleet some")
}

// TestProviderRefusesOverItsLimit: the fake provider admits limit calls
// at once and refuses the next with an overload the controller counts.
func TestProviderRefusesOverItsLimit(t *testing.T) {
	p := &provider{limit: 1, latency: time.Microsecond}
	p.counting.Store(true)
	require.NoError(t, p.call(context.Background()), "alone, within the limit")
	p.inFlight.Store(1) // a call in flight
	err := p.call(context.Background())
	assert.True(t, errors.Is(err, adaptive.ErrOverload), "over the limit: %v", err)
	assert.Equal(t, adaptive.Overload, adaptive.Classify(err))
	assert.Equal(t, int64(1), p.inFlight.Load(), "a refused call leaves")
	assert.Equal(t, int64(2), p.calls.Load())
	assert.Equal(t, int64(1), p.refused.Load())
	assert.Equal(t, int64(2), p.peak.Load())
}
