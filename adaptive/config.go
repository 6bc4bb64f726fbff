package adaptive

import (
	"fmt"
	"math"

	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/semaphore"
)

// algorithm is the rule that turns a round trip's outcomes into a limit.
type algorithm uint8

const (
	algAIMD algorithm = iota
	algVegas
)

func (a algorithm) String() string {
	if a == algVegas {
		return "vegas"
	}
	return "aimd"
}

// config holds the settings that the options set; immutable after New.
type config struct {
	floor, ceiling int64
	initial        int64 // initialSet false: the target's capacity, brought into range
	initialSet     bool
	alg            algorithm
	algs           int     // algorithm options given (at most one)
	increase       float64 // AIMD: added per round trip
	backoff        float64 // both: the factor of a decrease on overload
	alpha, beta    float64 // vegas: the band of queueing, fractions of the limit
	minWindow      int64   // samples per round trip at least
	classify       func(error) Outcome
	clock          semaphore.Clock
}

// Option configures a [Controller] made by [New]. Options are applied in
// order and checked together: a value out of range, or a nil Option, makes
// New return an error, never a clamped setting.
type Option func(*config)

// WithAIMD chooses additive increase, multiplicative decrease (the default,
// with increase 1 and backoff 0.9): the first [Overload] of work admitted
// since the last decrease multiplies the limit by backoff at once (the
// rest of its burst, admitted before, is not counted); a round trip
// without one, during which the target was at least half used, adds
// increase. Use it for providers that refuse (429, 503)
// rather than slow down. increase must be at least 1 and backoff in
// [0.5, 1).
func WithAIMD(increase int64, backoff float64) Option {
	return func(c *config) {
		c.alg, c.increase, c.backoff = algAIMD, float64(increase), backoff
		c.algs++
	}
}

// WithVegas chooses the latency-based algorithm: it estimates the share of
// the limit that waits inside the provider, queue = 1 - baseline/latency,
// from the round trip's mean latency and the baseline (the lowest mean
// latency seen, smoothed, which rises slowly to follow a provider that
// gets slower for good). Below alpha the limit grows by limit*(alpha-queue) (at least
// 1); above beta it shrinks by limit*(queue-beta) (at most a quarter); an
// [Overload] multiplies it by backoff (0.9) at once, as AIMD does. Use it for
// providers that slow down before they refuse, and start it at a light
// load (see the package docs). 0 < alpha < beta < 1; the defaults are 0.1
// and 0.25.
func WithVegas(alpha, beta float64) Option {
	return func(c *config) {
		c.alg, c.alpha, c.beta = algVegas, alpha, beta
		c.algs++
	}
}

// WithInitial sets the limit the controller starts from (default: the
// target's capacity at New, brought into [floor, ceiling]). It must lie in
// [floor, ceiling].
func WithInitial(n int64) Option { return func(c *config) { c.initial, c.initialSet = n, true } }

// WithMinWindow sets the fewest reports that make a round trip (default
// 1): a round trip is max(limit, n) reports, so that at a small limit the
// latency of a round trip is a mean over n pieces of work rather than
// over one or two, and the limit grows at most once per n reports (an
// overload still lowers it at once). n must be in [1, 1<<20], the most
// reports a round trip counts. (A round trip of limit reports
// assumes work of one permit each; for work of w permits, a round trip of
// the lane is about limit/w reports, and the controller decides about
// once per w of them.)
func WithMinWindow(n int64) Option { return func(c *config) { c.minWindow = n } }

// WithClassifier sets how [Controller.Do] and [Controller.Observe] turn the
// work's error into an [Outcome] (default [Classify]). It is called once
// per report, from the goroutine that reports, and must be safe for
// concurrent use; nil is refused.
func WithClassifier(f func(error) Outcome) Option {
	return func(c *config) { c.classify = f }
}

// WithClock sets the clock of the controller (tests and simulations pass a
// fake one): it times the work in Do, the round trips, and the overloads
// against the last decrease. It must be safe for concurrent use; nil means
// the system clock.
func WithClock(cl semaphore.Clock) Option { return func(c *config) { c.clock = cl } }

// configure applies opts and checks the result: the one place where a
// controller's settings are checked.
func (c *config) configure(t Target, floor, ceiling int64, opts []Option) error {
	c.floor, c.ceiling, c.minWindow = floor, ceiling, 1
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("adaptive: option %d is nil: %w", i, semaphore.ErrInvalidConfig)
		}
		o(c)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("adaptive: "+format+": %w", append(a, semaphore.ErrInvalidConfig)...)
	}
	switch {
	case nilptr.Is(t): // also a (*semaphore.Weighted)(nil), whose Capacity would panic
		return bad("nil target")
	case floor < 1:
		return bad("floor %d: must be at least 1 (a capacity of 0 admits no work, so nothing would ever raise it)", floor)
	case ceiling < floor:
		return bad("ceiling %d below floor %d", ceiling, floor)
	case ceiling > semaphore.MaxCapacity:
		return bad("ceiling %d above semaphore.MaxCapacity (%d)", ceiling, int64(semaphore.MaxCapacity))
	case c.initialSet && (c.initial < floor || c.initial > ceiling):
		return bad("WithInitial(%d) out of range [%d, %d]", c.initial, floor, ceiling)
	case c.algs > 1:
		return bad("one of WithAIMD and WithVegas at most")
	case c.alg == algAIMD && !(c.increase >= 1):
		return bad("WithAIMD: increase %v must be at least 1", c.increase)
	case !(c.backoff >= 0.5 && c.backoff < 1):
		return bad("WithAIMD: backoff %v out of range [0.5, 1)", c.backoff)
	case c.alg == algVegas && !(c.alpha > 0 && c.alpha < c.beta && c.beta < 1):
		return bad("WithVegas(%v, %v): need 0 < alpha < beta < 1", c.alpha, c.beta)
	case c.minWindow < 1 || c.minWindow > maxWindow:
		return bad("WithMinWindow(%d): must be in [1, %d]", c.minWindow, maxWindow)
	case c.classify == nil:
		return bad("WithClassifier(nil)")
	}
	return nil
}

// baselineRise is the share of the gap to a round trip's mean latency by
// which the vegas baseline rises each round trip when that mean is above
// it. A controller that works well spends its time near the limit, where
// latency is above the provider's own, so the baseline must rise slowly
// or queueing passes for the provider's speed and the limit creeps up to
// the 429s: in lanesim -provider, 1/128 gave 4.3% refusals (as many as
// AIMD), 1/2048 0.3% at the same goodput. The price: a provider that got
// slower for good is followed over a few thousand round trips (its 429s
// still cut the limit meanwhile).
const baselineRise = 1.0 / 2048

// baselineFall is the share of the gap by which the baseline falls to a
// round trip's mean latency below it. Taking the minimum outright (1)
// takes the luckiest round trip's noise for the provider's speed, and the
// limit then settles low: lanesim -provider's ten-minute runs kept 94% of
// the right fixed limit's goodput with 1, 99% with 1/4, which still
// finds a lower latency within a few round trips.
const baselineFall = 1.0 / 4

// decide returns the limit after a round trip, as its integer part and
// its fraction (see Controller.frac), and the reason if it moves:
// overloaded says the round trip had a fresh Overload, timed that it had
// successes to take the latency of, used that the target was at least
// half used. The caller brings the limit into [floor, ceiling]. It runs
// under c.mu.
func (cfg *config) decide(c *Controller, overloaded, timed, used bool) (int64, float64, Reason) {
	if overloaded {
		n, f := split(c.exact() * cfg.backoff)
		return n, f, ReasonOverload
	}
	if cfg.alg == algAIMD {
		if used {
			// Compared as floats: an increase near MaxInt64 is 2^63 as a
			// float64, which int64() does not convert on every platform.
			if cfg.increase >= float64(cfg.ceiling-c.capNow) {
				return cfg.ceiling, 0, ReasonGrowth
			}
			return c.capNow + int64(cfg.increase), c.frac, ReasonGrowth
		}
		return c.capNow, c.frac, ReasonNone
	}
	if !timed {
		return c.capNow, c.frac, ReasonNone
	}
	l := c.exact()
	rtt := c.lastRTT
	switch {
	case c.baseline == 0:
		c.baseline = rtt
	case rtt < c.baseline:
		c.baseline += (rtt - c.baseline) * baselineFall
	default:
		c.baseline += (rtt - c.baseline) * baselineRise
	}
	queue := 0.0
	if rtt > 0 {
		queue = 1 - c.baseline/rtt
	}
	switch {
	case queue < cfg.alpha && used:
		n, f := split(l + math.Max(1, l*(cfg.alpha-queue)))
		return n, f, ReasonGrowth
	case queue > cfg.beta:
		n, f := split(l - math.Min(l/4, math.Max(1, l*(queue-cfg.beta))))
		return n, f, ReasonLatency
	}
	return c.capNow, c.frac, ReasonNone
}

// split returns a limit's integer part and fraction. A limit past the
// range of int64 is cut to MaxCapacity, above any ceiling.
func split(x float64) (int64, float64) {
	if !(x < semaphore.MaxCapacity) {
		return semaphore.MaxCapacity, 0
	}
	n := math.Floor(x)
	return int64(n), x - n
}
