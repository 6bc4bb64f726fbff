package adaptive_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// holder is a permit the state machine holds, with its grant time.
type holder struct {
	p     semaphore.Permit
	w     int64
	since time.Time
}

// TestControllerKeepsTheLaneSound drives a semaphore under a controller
// with random grants, releases with random outcomes, manual reports and
// clock moves, and checks after every step: the capacity lies in [floor,
// ceiling] and is the controller's limit; Available + Held == Capacity;
// Held is the weight of the permits the test holds (a shrink took
// nothing from them); and every permit releases exactly once.
func TestControllerKeepsTheLaneSound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		floor := rapid.Int64Range(1, 8).Draw(rt, "floor")
		ceiling := rapid.Int64Range(floor, 40).Draw(rt, "ceiling")
		start := rapid.Int64Range(0, 50).Draw(rt, "start")
		var opts []adaptive.Option
		clk := clock.NewFake(epoch)
		opts = append(opts, adaptive.WithClock(clk))
		if rapid.Bool().Draw(rt, "vegas") {
			opts = append(opts, adaptive.WithVegas(0.1, 0.25))
		} else {
			opts = append(opts, adaptive.WithAIMD(rapid.Int64Range(1, 3).Draw(rt, "increase"), rapid.Float64Range(0.5, 0.95).Draw(rt, "backoff")))
		}
		s := semaphore.New(start)
		c, err := adaptive.New(s, floor, ceiling, opts...)
		if err != nil {
			rt.Fatal(err)
		}
		var hs []holder
		check := func(step string) {
			st := s.Stats()
			if st.Capacity < floor || st.Capacity > ceiling {
				rt.Fatalf("after %s: capacity %d out of [%d, %d]", step, st.Capacity, floor, ceiling)
			}
			if l := c.Limit(); l != st.Capacity {
				rt.Fatalf("after %s: limit %d, capacity %d", step, l, st.Capacity)
			}
			if st.Available+st.Held != st.Capacity {
				rt.Fatalf("after %s: available %d + held %d != capacity %d", step, st.Available, st.Held, st.Capacity)
			}
			var w int64
			for _, h := range hs {
				w += h.w
			}
			if st.Held != w {
				rt.Fatalf("after %s: held %d, the holders hold %d", step, st.Held, w)
			}
		}
		outcome := rapid.SampledFrom([]adaptive.Outcome{adaptive.Success, adaptive.Success, adaptive.Overload, adaptive.Ignore})
		check("New")
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				w := rapid.Int64Range(1, 3).Draw(rt, "w")
				if p, ok := s.TryAcquire(w); ok {
					hs = append(hs, holder{p: p, w: w, since: clk.Now()})
				}
				check("acquire")
			},
			"fill": func(rt *rapid.T) {
				for {
					p, ok := s.TryAcquire(1)
					if !ok {
						break
					}
					hs = append(hs, holder{p: p, w: 1, since: clk.Now()})
				}
				check("fill")
			},
			"finish": func(rt *rapid.T) {
				if len(hs) == 0 {
					rt.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(hs)-1).Draw(rt, "i")
				h := hs[i]
				c.Report(outcome.Draw(rt, "outcome"), clk.Now().Sub(h.since))
				hs = append(hs[:i], hs[i+1:]...)
				if !h.p.Release() {
					rt.Fatal("a holder's permit did not release: it was taken from it")
				}
				if h.p.Release() {
					rt.Fatal("a permit released twice")
				}
				check("finish")
			},
			"report": func(rt *rapid.T) {
				n := rapid.IntRange(1, 60).Draw(rt, "n")
				o := outcome.Draw(rt, "outcome")
				rtt := time.Duration(rapid.Int64Range(-1, 3000).Draw(rt, "rtt ms")) * time.Millisecond
				for range n {
					c.Report(o, rtt)
				}
				check(fmt.Sprintf("%d reports", n))
			},
			"advance": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.Int64Range(1, 2000).Draw(rt, "ms")) * time.Millisecond)
				check("advance")
			},
		})
		for _, h := range hs {
			if !h.p.Release() {
				rt.Fatal("a holder's permit did not release at the end")
			}
		}
		hs = nil
		check("the end")
		if s.Stats().Available != s.Capacity() {
			rt.Fatal("permits missing at the end")
		}
	})
}

// provider is a deterministic provider for the settle tests: each round
// trip the lane's whole capacity is used, the calls above truth are
// refused, and the calls take base, or with slow, base*(1+in-flight/truth)
// from knee on (it slows before it refuses).
type provider struct {
	truth, knee int64
	slow        bool
}

func (p provider) round(clk *clock.Fake, s *semaphore.Weighted, c *adaptive.Controller) {
	const base = time.Second
	n := s.Capacity()
	rtt := base
	if p.slow && n > p.knee {
		rtt = time.Duration(float64(base) * (1 + float64(min(n, p.truth)-p.knee)/float64(p.truth-p.knee)))
	}
	clk.Advance(rtt)
	for i := range n {
		if i >= p.truth {
			c.Report(adaptive.Overload, rtt/10)
		} else {
			c.Report(adaptive.Success, rtt)
		}
	}
}

// TestAIMDSettlesWithinTheBound: after the true limit T steps, AIMD with
// increase a and backoff b brings the limit L into its band [min(T,
// floor(b*(T+1))), T+a] within ceil((T-L)/a) round trips up, or
// ceil(ln(L/(T+a))/ln(1/b)) down, plus one (the bound of the package
// docs), and stays in it.
func TestAIMDSettlesWithinTheBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const floor, ceiling = 1, 1000
		a := rapid.Int64Range(1, 4).Draw(rt, "increase")
		b := rapid.Float64Range(0.5, 0.95).Draw(rt, "backoff")
		clk := clock.NewFake(epoch)
		s := semaphore.New(rapid.Int64Range(floor, 400).Draw(rt, "start"))
		c, err := adaptive.New(s, floor, ceiling, adaptive.WithClock(clk), adaptive.WithAIMD(a, b))
		if err != nil {
			rt.Fatal(err)
		}
		for step := range 3 {
			truth := rapid.Int64Range(2, 400).Draw(rt, fmt.Sprintf("truth %d", step))
			l := s.Capacity()
			lo, hi := min(truth, int64(b*float64(truth+1))), truth+a
			bound := 1
			switch {
			case l < lo:
				bound += int((lo - l + a - 1) / a)
			case l > hi:
				bound += int(math.Ceil(math.Log(float64(l)/float64(hi)) / math.Log(1/b)))
				if step > 0 {
					bound += 2 // a growth at the step's first round trip, and its cut (see the package docs)
				}
			}
			settle(rt, clk, s, c, provider{truth: truth}, lo, hi, bound)
		}
	})
}

// TestAIMDStaysInItsBandOverALongRun: with increase 4 and backoff 0.5
// against a true limit of 3, the exact limit after each cut nears 4 from
// below (3.5, 3.75, ...). Kept as one float64 it reached 4 after about a
// hundred round trips, and the growth from it set 8, above the band [2,
// 7] (rapid's seed 6316751663063651574 of the test above found it).
func TestAIMDStaysInItsBandOverALongRun(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(1)
	c, err := adaptive.New(s, 1, 1000, adaptive.WithClock(clk), adaptive.WithAIMD(4, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	p := provider{truth: 3}
	for c.Stats().Windows < 3 { // 1 -> 5 -> 2: into the band
		p.round(clk, s, c)
	}
	for c.Stats().Windows < 400 {
		p.round(clk, s, c)
		if l := s.Capacity(); l < 2 || l > 7 {
			t.Fatalf("limit %d after %d round trips, outside [2, 7]", l, c.Stats().Windows)
		}
	}
}

// TestAIMDHugeIncreaseGrowsToTheCeiling: an increase near MaxInt64 is
// 2^63 as a float64, which int64() turned into MinInt64 on amd64, so a
// growth set the floor (found by review of the integer part kept apart).
func TestAIMDHugeIncreaseGrowsToTheCeiling(t *testing.T) {
	for _, inc := range []int64{math.MaxInt64, math.MaxInt64 - 100, 1 << 62} {
		clk := clock.NewFake(epoch)
		s := semaphore.New(50)
		c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk), adaptive.WithAIMD(inc, 0.5))
		if err != nil {
			t.Fatal(err)
		}
		provider{truth: 1000}.round(clk, s, c) // a round trip fully used, no refusal: a growth
		if got := s.Capacity(); got != 100 {
			t.Errorf("increase %d: capacity %d after a growth from 50, want the ceiling 100 (stats %+v)", inc, got, c.Stats())
		}
	}
}

// TestVegasSettlesWithinTheBound: with a provider that only refuses,
// vegas grows by a share alpha per round trip, so it reaches T from L
// within ceil(ln(T/L)/ln(1+alpha)) round trips (and at most T-L), and
// comes down as AIMD with backoff 0.9 does; its band is [min(T,
// floor(0.9*(T+1))), floor(T+1+max(1, alpha*(T+1)))].
func TestVegasSettlesWithinTheBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const floor, ceiling, alpha, backoff = 1, 1000, 0.1, 0.9
		clk := clock.NewFake(epoch)
		s := semaphore.New(rapid.Int64Range(floor, 400).Draw(rt, "start"))
		c, err := adaptive.New(s, floor, ceiling, adaptive.WithClock(clk), adaptive.WithVegas(alpha, 0.25))
		if err != nil {
			rt.Fatal(err)
		}
		for step := range 3 {
			truth := rapid.Int64Range(2, 400).Draw(rt, fmt.Sprintf("truth %d", step))
			l := s.Capacity()
			lo := min(truth, int64(backoff*float64(truth+1)))
			hi := int64(float64(truth+1) + max(1, alpha*float64(truth+1)))
			bound := 1
			switch {
			case l < lo:
				bound += min(int(lo-l), int(math.Ceil(math.Log(float64(lo)/float64(l))/math.Log(1+alpha))))
			case l > hi:
				bound += int(math.Ceil(math.Log(float64(l)/float64(hi)) / math.Log(1/backoff)))
				if step > 0 {
					bound += 2 // a growth at the step's first round trip, and its cut (see the package docs)
				}
			}
			settle(rt, clk, s, c, provider{truth: truth}, lo, hi, bound)
		}
	})
}

// settle runs the provider until the limit is in [lo, hi], fails if that
// takes more than bound of the controller's round trips (windows decided:
// after an overload a round trip spans several of the provider's rounds,
// see windowFor), then checks that it stays there for 40 more.
func settle(rt *rapid.T, clk *clock.Fake, s *semaphore.Weighted, c *adaptive.Controller, p provider, lo, hi int64, bound int) {
	from := s.Capacity()
	start := c.Stats().Windows
	for s.Capacity() < lo || s.Capacity() > hi {
		if n := c.Stats().Windows - start; n >= uint64(bound) {
			rt.Fatalf("truth %d: from %d, not in [%d, %d] after %d round trips (at %d)", p.truth, from, lo, hi, n, s.Capacity())
		}
		p.round(clk, s, c)
	}
	start = c.Stats().Windows
	for c.Stats().Windows-start < 40 {
		p.round(clk, s, c)
		if l := s.Capacity(); l < lo || l > hi {
			rt.Fatalf("truth %d: settled in [%d, %d], then left it for %d after %d round trips", p.truth, lo, hi, l, c.Stats().Windows-start)
		}
	}
}

// TestVegasStopsBeforeTheRefusals: against a provider whose latency rises
// from a knee on (twice the base at its limit T), vegas settles where the
// queueing it estimates is within [alpha, beta], below T, and from then on
// sees no refusal at all (AIMD, blind to latency, keeps probing into
// them). It starts at or below the knee, as the docs ask: started in the
// slow region, it would take the slow latency for the provider's own.
func TestVegasStopsBeforeTheRefusals(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		truth := rapid.Int64Range(20, 300).Draw(rt, "truth")
		p := provider{truth: truth, knee: truth / 2, slow: true}
		clk := clock.NewFake(epoch)
		s := semaphore.New(rapid.Int64Range(1, p.knee).Draw(rt, "start"))
		c, err := adaptive.New(s, 1, 1000, adaptive.WithClock(clk), adaptive.WithVegas(0.1, 0.25))
		if err != nil {
			rt.Fatal(err)
		}
		for range 200 {
			p.round(clk, s, c)
		}
		before := c.Stats().Overloads
		for range 100 {
			p.round(clk, s, c)
			if l := s.Capacity(); l > truth || l <= p.knee {
				rt.Fatalf("limit %d, outside (knee %d, truth %d]", l, p.knee, truth)
			}
		}
		if n := c.Stats().Overloads - before; n > 0 {
			rt.Fatalf("%d refusals after settling", n)
		}
	})
}
