package main

import (
	"math/rand/v2"
	"time"
)

// step is one message of a thread as the seed draws it: when it reaches the
// gateway (from the start of the run) and how long its model call lasts.
type step struct {
	At      time.Duration
	Latency time.Duration
}

// threadPlan draws the messages of one thread from the seed, in order. The
// simulation and the yardstick draw from it alike, so the bound is computed
// on exactly the latencies and gaps the run is given, without keeping
// 100,000 of them in memory.
type threadPlan struct {
	cfg *config
	rng *rand.Rand
	at  time.Duration // arrival of the last message drawn
	n   int           // messages drawn
}

func (c *config) plan(i int) threadPlan {
	return threadPlan{cfg: c, rng: rand.New(rand.NewPCG(c.Seed, uint64(i)))}
}

// next draws the thread's next message: the gap since the previous one (0
// for the first, or with -gap 0) and the step.
func (p *threadPlan) next() (gap time.Duration, s step) {
	p.n++
	if p.cfg.Gap > 0 && p.n > 1 {
		gap = time.Duration(p.rng.ExpFloat64() * float64(p.cfg.Gap))
	}
	p.at += gap
	j := 1 + p.cfg.Jitter*(2*p.rng.Float64()-1)
	return gap, step{At: p.at, Latency: time.Duration(float64(p.cfg.Latency) * j)}
}

// bound is the yardstick of a run: a lower bound on the shortest makespan
// any schedule could reach with the run's messages, given that a thread's
// messages run one after the other in order (none before it arrives) and
// that at most G run at once. Finding the shortest makespan itself is
// NP-hard in general (it contains scheduling chains on parallel machines);
// the bound is the standard one:
//
//	max(the longest thread's chain, total work / G)
//
// where a thread's chain is when its last message would finish if it never
// waited for the global lane (with -gap 0, the sum of its latencies): no
// schedule beats its slowest thread, nor G handlers busy all the time.
//
// It is tight in the two regimes lanesim runs. With G at least the number
// of threads the shortest makespan is the chain itself. With -gap 0 any
// schedule that never leaves a slot idle while a message is ready ends
// within work/G + the longest chain (Graham's list-scheduling argument), so
// at 10,000 threads, where the chain is a few percent of work/G, the bound
// is within those few percent of the optimum. So efficiency = bound /
// makespan is at most 100% for every mode that keeps per-thread order, and
// near 100% means that hardly any schedule could have done better.
type bound struct {
	G       int64         `json:"global"`
	Longest time.Duration `json:"longest_thread_ns"` // the longest thread's chain
	Work    time.Duration `json:"work_ns"`           // the sum of every latency
}

// addThread adds one thread's messages, in order.
func (b *bound) addThread(steps []step) {
	var done time.Duration
	for _, s := range steps {
		done = max(done, s.At) + s.Latency
		b.Work += s.Latency
	}
	b.Longest = max(b.Longest, done)
}

// Value is the bound itself.
func (b bound) Value() time.Duration {
	if b.G < 1 {
		return b.Longest
	}
	return max(b.Longest, b.Work/time.Duration(b.G))
}

// idealBound is the bound of the given threads' messages with at most g
// running at once.
func idealBound(threads [][]step, g int64) time.Duration {
	b := bound{G: g}
	for _, t := range threads {
		b.addThread(t)
	}
	return b.Value()
}

// planBound computes the bound of cfg's traffic for global capacity g.
func planBound(cfg *config, g int64) bound {
	b := bound{G: g}
	steps := make([]step, cfg.Messages)
	for i := range cfg.Keys {
		p := cfg.plan(i)
		for s := range steps {
			_, steps[s] = p.next()
		}
		b.addThread(steps)
	}
	return b
}

// efficiency is bound / elapsed, 0 for a run that took no time.
func efficiency(b, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(b) / float64(elapsed)
}
