package main

// The mixed workload (-mixed): a gateway's three kinds of work, from two
// tenants of very different sizes, through one session lane (one message at
// a time per session) and one global lane, run four ways:
//
//   - fifo: both lanes serve in arrival order;
//   - priorities: the global lane serves user turns before heartbeats
//     before cron jobs, with aging, so that a cron storm does not hold up the
//     user waiting for an answer, and the cron jobs still run;
//   - fair share: the global lane shares itself between the tenants, FIFO
//     within each, so that the tenant with 500 threads cannot take every
//     slot from the tenant with 5;
//   - the small tenant alone: its same traffic with nobody else, the
//     yardstick of fair share.
//
// Each thread has a session (a key of the session lane) per class, as a
// gateway runs cron jobs and heartbeats in sessions of their own: the
// classes meet on the global lane only, which the cron storms overload.
// (Had a user turn shared its thread's session with a cron job, it would
// wait behind that job whatever its priority: the session is taken before
// the global lane.) Priorities and fair share are separate runs because
// one semaphore takes one ordering policy.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// The classes of work, in the order of the tables.
const (
	classUser = iota
	classHeartbeat
	classCron
	numClasses
)

// classInfo names each class and gives the priority its messages ask for
// when the lanes order by priority: a user turn first, then a heartbeat,
// then a cron job.
var classInfo = [numClasses]struct {
	Name     string
	Priority int
}{
	{"user turn", 2},
	{"heartbeat", 1},
	{"cron job", 0},
}

// tenant is a customer of the gateway with Threads conversations.
type tenant struct {
	Name    string `json:"name"`
	Threads int    `json:"threads"`
}

// mixedConfig is the mixed workload and its lanes.
type mixedConfig struct {
	Tenants          []tenant      `json:"tenants"`
	Global           int64         `json:"global"`               // capacity of the global lane
	Window           time.Duration `json:"window_ns"`            // messages arrive over [0, Window)
	UserGap          time.Duration `json:"user_gap_ns"`          // mean gap between a thread's user turns (Poisson arrivals)
	UserLatency      time.Duration `json:"user_latency_ns"`      // mean model latency of a user turn
	HeartbeatEvery   time.Duration `json:"heartbeat_every_ns"`   // a thread's heartbeat period (its phase is random)
	HeartbeatLatency time.Duration `json:"heartbeat_latency_ns"` // mean latency of a heartbeat
	CronFirst        time.Duration `json:"cron_first_ns"`        // every thread's cron job fires at CronFirst,
	CronEvery        time.Duration `json:"cron_every_ns"`        // then every CronEvery: a cron storm each time
	CronLatency      time.Duration `json:"cron_latency_ns"`      // mean latency of a cron job
	Jitter           float64       `json:"jitter"`               // latencies vary uniformly by ± this fraction
	Aging            time.Duration `json:"aging_ns"`             // aging step of the priority policy: +1 per step waited
	Seed             uint64        `json:"seed"`
	Duration         time.Duration `json:"duration_ns"` // cap on each run
	Progress         time.Duration `json:"-"`           // progress line period
}

// defaultMixed is the workload of -mixed. Over one second 505 threads send
// about 1,000 user turns (10 ms), 2,500 heartbeats (2 ms) and, in two
// storms, 1,010 cron jobs (40 ms): 55 slot-seconds of work for a global
// lane of 50, so each storm queues about half a second of work in front of
// whatever arrives after it. The aging step lets a cron job that has waited
// 1 s (two steps a class, two classes) tie a fresh user turn, which the
// storms never reach, so priorities do not make it wait longer than that.
func defaultMixed() mixedConfig {
	return mixedConfig{
		Tenants:          []tenant{{Name: "big", Threads: 500}, {Name: "small", Threads: 5}},
		Global:           50,
		Window:           time.Second,
		UserGap:          500 * time.Millisecond,
		UserLatency:      10 * time.Millisecond,
		HeartbeatEvery:   200 * time.Millisecond,
		HeartbeatLatency: 2 * time.Millisecond,
		CronFirst:        100 * time.Millisecond,
		CronEvery:        500 * time.Millisecond,
		CronLatency:      40 * time.Millisecond,
		Jitter:           0.5,
		Aging:            500 * time.Millisecond,
		Seed:             1,
		Duration:         20 * time.Second,
		Progress:         250 * time.Millisecond,
	}
}

func (mc *mixedConfig) validate() error {
	switch {
	case len(mc.Tenants) == 0, mc.Global < 1, mc.Window <= 0, mc.Duration <= 0:
		return errors.New("mixed workload: tenants, a global capacity, a window and a duration are needed")
	case mc.UserGap <= 0, mc.HeartbeatEvery <= 0, mc.CronEvery <= 0, mc.CronFirst < 0:
		return errors.New("mixed workload: gaps and periods must be positive")
	case mc.Jitter < 0 || mc.Jitter > 1:
		return errors.New("mixed workload: jitter must be in [0, 1]")
	}
	return nil
}

// sessionPlan draws the messages of class c of thread i of tenant t, in
// arrival order. The draw depends on (seed, t, i, c) only, so the small
// tenant sends the same messages alone as beside the big one.
func (mc *mixedConfig) sessionPlan(t, i, c int) []step {
	rng := rand.New(rand.NewPCG(mc.Seed, uint64(t)<<40|uint64(i)<<8|uint64(c)))
	latency := func(mean time.Duration) time.Duration {
		return time.Duration(float64(mean) * (1 + mc.Jitter*(2*rng.Float64()-1)))
	}
	exp := func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(mc.UserGap)) }
	var steps []step
	switch c {
	case classUser:
		for at := exp(); at < mc.Window; at += exp() {
			steps = append(steps, step{At: at, Latency: latency(mc.UserLatency)})
		}
	case classHeartbeat:
		for at := time.Duration(rng.Float64() * float64(mc.HeartbeatEvery)); at < mc.Window; at += mc.HeartbeatEvery {
			steps = append(steps, step{At: at, Latency: latency(mc.HeartbeatLatency)})
		}
	case classCron:
		for at := mc.CronFirst; at < mc.Window; at += mc.CronEvery {
			steps = append(steps, step{At: at, Latency: latency(mc.CronLatency)})
		}
	}
	return steps
}

// policy is how the lanes of a mixed run order their waiters.
type policy int

const (
	policyFIFO policy = iota
	policyPriority
	policyFairShare
)

func (p policy) String() string {
	return [...]string{"fifo", "priorities", "fair share"}[p]
}

// laneOptions returns the options of the session lane and of the global
// lane under policy p. It is one of the two places (with turnOpts) where
// the policies reach the lanes; everything else in the mixed workload is
// the same for every policy.
//
// Priorities order the global lane (semaphore.WithPriorities with the
// mode's aging step); fair share makes it a fair lane (simulateMixed,
// through lanequeue's NewFairLane, the tenant a function of the key).
func laneOptions(p policy, mc mixedConfig) (session []keyedsem.Option, global []semaphore.Option) {
	if p == policyPriority {
		// keyedsem.WithPriorities on the session lane would change nothing
		// here: each session carries one class.
		global = []semaphore.Option{semaphore.WithPriorities(mc.Aging)}
	}
	return nil, global
}

// turnOpts returns the AcquireAll options of a message of class c from
// tenant t under policy p: where it joins the line of a lane that orders
// its waiters.
func turnOpts(p policy, c int, t tenant) []semaphore.AcquireOption {
	if p == policyPriority {
		return []semaphore.AcquireOption{semaphore.Priority(classInfo[c].Priority)}
	}
	return nil // fair share: the fair lane takes the tenant from the key
}

// mixedRun is one run of the mixed workload: a policy, and the tenants
// that send (indexes into mixedConfig.Tenants).
type mixedRun struct {
	Name    string
	Policy  policy
	Tenants []int
}

// mixedRuns are the runs of -mixed: every tenant under each policy, then
// the smallest tenant alone on FIFO lanes.
func mixedRuns(mc mixedConfig) []mixedRun {
	all := make([]int, len(mc.Tenants))
	small := 0
	for i, t := range mc.Tenants {
		all[i] = i
		if t.Threads < mc.Tenants[small].Threads {
			small = i
		}
	}
	return []mixedRun{
		{Name: policyFIFO.String(), Policy: policyFIFO, Tenants: all},
		{Name: policyPriority.String(), Policy: policyPriority, Tenants: all},
		{Name: policyFairShare.String(), Policy: policyFairShare, Tenants: all},
		{Name: mc.Tenants[small].Name + " alone", Policy: policyFIFO, Tenants: []int{small}},
	}
}

// mixedKey is a session: one class of work of one thread of one tenant.
type mixedKey struct {
	Tenant, Class, Thread int
}

// latencyRow is the latency of one class or one tenant in one run.
type latencyRow struct {
	Name    string        `json:"name"`
	Planned int           `json:"planned"` // messages the plan sends (0: not in this run)
	Handled int           `json:"handled"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
}

// mixedResult is what one run of the mixed workload measured.
type mixedResult struct {
	Run             string                 `json:"run"`
	Policy          string                 `json:"policy"`
	Wired           bool                   `json:"wired"` // false: the policy reached no lane yet (see laneOptions), the lanes were FIFO
	Planned         int                    `json:"planned"`
	Handled         int                    `json:"handled"`
	Elapsed         time.Duration          `json:"elapsed_ns"`
	Classes         [numClasses]latencyRow `json:"classes"`
	Tenants         []latencyRow           `json:"tenants"` // one per tenant of the config
	MaxPerKey       int32                  `json:"max_holders_per_session"`
	OrderViolations int64                  `json:"order_violations"`
	Miscounted      int                    `json:"miscounted_sessions"` // sessions with a message lost or handled twice
	MaxInFlight     int64                  `json:"max_in_flight"`
}

func (r mixedResult) ok() bool {
	return r.MaxPerKey <= 1 && r.OrderViolations == 0 && r.Miscounted == 0
}

// simulateMixed runs the mixed workload of mc as run says and reports what
// it saw. An error is a lane that refused the configuration or a message,
// which would otherwise go uncounted.
func simulateMixed(ctx context.Context, mc mixedConfig, run mixedRun, progress io.Writer) (mixedResult, error) {
	if err := mc.validate(); err != nil {
		return mixedResult{}, err
	}
	sessionOpts, globalOpts := laneOptions(run.Policy, mc)
	q := lanequeue.New[mixedKey]()
	defer q.Close()
	sessionOpts = append([]keyedsem.Option{keyedsem.WithIdleTimeout(0)}, sessionOpts...)
	if err := keyedsem.Validate(sessionOpts...); err != nil {
		return mixedResult{}, err
	}
	if err := q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[mixedKey](sessionOpts...))); err != nil {
		return mixedResult{}, err
	}
	global := lanequeue.NewGlobalLane[mixedKey]
	if run.Policy == policyFairShare {
		// The global lane serves its waiters by tenant, equal shares: the
		// tenant is a function of the key.
		tenant := func(k mixedKey) string { return mc.Tenants[k.Tenant].Name }
		globalOpts = append([]semaphore.Option{semaphore.WithFairShare(nil)}, globalOpts...)
		global = func(s *semaphore.Weighted) lanequeue.Lane[mixedKey] { return lanequeue.NewFairLane(s, tenant) }
	}
	if err := semaphore.Validate(mc.Global, globalOpts...); err != nil {
		return mixedResult{}, err
	}
	if err := q.Add("global", global(semaphore.New(mc.Global, globalOpts...))); err != nil {
		return mixedResult{}, err
	}
	lanes, err := q.Lanes("session", "global")
	if err != nil {
		panic(err) // the lanes added above
	}

	type session struct {
		key   mixedKey
		steps []step
		opts  []semaphore.AcquireOption
		tr    tracker
	}
	r := mixedResult{
		Run:     run.Name,
		Policy:  run.Policy.String(),
		Wired:   run.Policy == policyFIFO || run.Policy == policyFairShare || len(sessionOpts)+len(globalOpts) > 0,
		Tenants: make([]latencyRow, len(mc.Tenants)),
	}
	var sessions []session
	for _, t := range run.Tenants {
		for i := range mc.Tenants[t].Threads {
			for c := range numClasses {
				steps := mc.sessionPlan(t, i, c)
				if len(steps) == 0 {
					continue
				}
				sessions = append(sessions, session{key: mixedKey{Tenant: t, Class: c, Thread: i}, steps: steps,
					opts: turnOpts(run.Policy, c, mc.Tenants[t])})
				r.Classes[c].Planned += len(steps)
				r.Tenants[t].Planned += len(steps)
				r.Planned += len(steps)
			}
		}
	}

	ctx, cancel := context.WithTimeout(ctx, mc.Duration)
	defer cancel()
	var (
		handled, inFlight, maxFlight, violations atomic.Int64
		failed                                   atomic.Int64
		firstErr                                 atomic.Pointer[error]
		mu                                       sync.Mutex
		lats                                     = make([][numClasses][]time.Duration, len(mc.Tenants))
		readers, workers                         sync.WaitGroup
	)
	start := time.Now()
	stopProgress := startProgress(progress, mc.Progress, "mixed: "+run.Name, r.Planned, &handled, &inFlight)
	for si := range sessions {
		s := &sessions[si]
		inbox := make(chan message, len(s.steps))
		readers.Add(2)
		go func() { // the session's arrivals, each at its planned time
			defer readers.Done()
			defer close(inbox)
			for k, st := range s.steps {
				if !sleep(ctx, time.Until(start.Add(st.At))) {
					return
				}
				inbox <- message{seq: int64(k + 1), arrival: time.Now(), latency: st.Latency}
			}
		}()
		go func() { // the gateway's reader for the session
			defer readers.Done()
			for msg := range inbox {
				t, err := q.AcquireAll(ctx, s.key, lanes, s.opts...)
				if err != nil {
					if ctx.Err() == nil { // not the -duration cap: a lane refused
						failed.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				workers.Add(1)
				go func() { // the handler owns the ticket
					defer workers.Done()
					defer t.Release()
					n := inFlight.Add(1)
					for mx := maxFlight.Load(); n > mx && !maxFlight.CompareAndSwap(mx, n); mx = maxFlight.Load() {
					}
					if s.tr.start(msg.seq) {
						violations.Add(1)
					}
					done := sleep(ctx, msg.latency)
					s.tr.finish(msg.seq)
					inFlight.Add(-1)
					if !done {
						return
					}
					lat := time.Since(msg.arrival)
					s.tr.handled.Add(1)
					handled.Add(1)
					mu.Lock()
					lats[s.key.Tenant][s.key.Class] = append(lats[s.key.Tenant][s.key.Class], lat)
					mu.Unlock()
				}()
			}
		}()
	}
	readers.Wait()
	workers.Wait()
	r.Elapsed = time.Since(start)
	cut := ctx.Err() != nil
	stopProgress()
	if n := failed.Load(); n > 0 {
		return mixedResult{}, fmt.Errorf("%s: %d messages refused, the first: %w", run.Name, n, *firstErr.Load())
	}

	r.Handled = int(handled.Load())
	r.OrderViolations = violations.Load()
	r.MaxInFlight = maxFlight.Load()
	for i := range sessions {
		s := &sessions[i]
		r.MaxPerKey = max(r.MaxPerKey, s.tr.max.Load())
		if n := int(s.tr.handled.Load()); n > len(s.steps) || (!cut && n != len(s.steps)) {
			r.Miscounted++
		}
	}
	for c := range numClasses {
		var all []time.Duration
		for t := range mc.Tenants {
			all = append(all, lats[t][c]...)
		}
		r.Classes[c].fill(classInfo[c].Name, all)
	}
	for t := range mc.Tenants {
		var all []time.Duration
		for c := range numClasses {
			all = append(all, lats[t][c]...)
		}
		r.Tenants[t].fill(mc.Tenants[t].Name, all)
	}
	return r, nil
}

// fill names the row and sets its count and percentiles from lats.
func (row *latencyRow) fill(name string, lats []time.Duration) {
	slices.Sort(lats)
	row.Name, row.Handled = name, len(lats)
	row.P50, row.P99 = percentile(lats, 0.50), percentile(lats, 0.99)
}

// mixedReport is every run of the mixed workload, and the two figures the
// policies are judged by.
type mixedReport struct {
	Config  mixedConfig   `json:"config"`
	Results []mixedResult `json:"results"`
	// UserP99Ratio is the user turns' p99 with priorities over their p99
	// on FIFO lanes (the target: at most 0.5). SmallP99Ratio is the
	// smallest tenant's p99 with fair share over its p99 alone (the
	// target: at most 2). 0 when a run handled none.
	UserP99Ratio  float64 `json:"user_p99_priorities_over_fifo"`
	SmallP99Ratio float64 `json:"small_p99_fair_share_over_alone"`
	Small         string  `json:"small_tenant"`
	OK            bool    `json:"ok"` // every run kept the per-session guarantees
}

// simulateMixedAll runs every run of mixedRuns(mc) in turn.
func simulateMixedAll(ctx context.Context, mc mixedConfig, progress io.Writer) (mixedReport, error) {
	runs := mixedRuns(mc)
	rep := mixedReport{Config: mc, OK: true}
	for _, run := range runs {
		r, err := simulateMixed(ctx, mc, run, progress)
		if err != nil {
			return rep, err
		}
		rep.Results = append(rep.Results, r)
		rep.OK = rep.OK && r.ok()
	}
	fifo, pri, fair, alone := rep.Results[0], rep.Results[1], rep.Results[2], rep.Results[3]
	small := runs[3].Tenants[0]
	rep.Small = mc.Tenants[small].Name
	rep.UserP99Ratio = ratio(pri.Classes[classUser].P99, fifo.Classes[classUser].P99)
	rep.SmallP99Ratio = ratio(fair.Tenants[small].P99, alone.Tenants[small].P99)
	return rep, nil
}

func ratio(a, b time.Duration) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func printMixed(w io.Writer, rep mixedReport) {
	mc := rep.Config
	var ts []string
	for _, t := range mc.Tenants {
		ts = append(ts, fmt.Sprintf("%s (%d threads)", t.Name, t.Threads))
	}
	fmt.Fprintf(w, "lanesim -mixed: tenants %s, each thread with a session for its user turns, one for its heartbeats, one for its cron jobs; global capacity %d\n",
		strings.Join(ts, " and "), mc.Global)
	fmt.Fprintf(w, "over %v: user turns every %v on average (Poisson) of %v, heartbeats every %v of %v, every thread's cron job at %v and every %v after (a storm) of %v; latencies ±%.0f%%\n\n",
		mc.Window, mc.UserGap, mc.UserLatency, mc.HeartbeatEvery, mc.HeartbeatLatency, mc.CronFirst, mc.CronEvery, mc.CronLatency, mc.Jitter*100)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "run\thandled\ttime")
	for c := range numClasses {
		fmt.Fprintf(tw, "\t%s", classInfo[c].Name)
	}
	for _, t := range mc.Tenants {
		fmt.Fprintf(tw, "\t%s", t.Name)
	}
	fmt.Fprintln(tw, "\tmax/session\torder viol.\tin flight\t")
	cell := func(row latencyRow) string {
		if row.Planned == 0 {
			return "-"
		}
		s := short(row.P50) + " / " + short(row.P99)
		if row.Handled != row.Planned {
			s += fmt.Sprintf(" (%d of %d)", row.Handled, row.Planned)
		}
		return s
	}
	for _, r := range rep.Results {
		name := r.Run
		if !r.Wired {
			name += " (not wired: FIFO)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s", name, r.Handled, short(r.Elapsed))
		for _, row := range r.Classes {
			fmt.Fprintf(tw, "\t%s", cell(row))
		}
		for _, row := range r.Tenants {
			fmt.Fprintf(tw, "\t%s", cell(row))
		}
		fmt.Fprintf(tw, "\t%d\t%d\t%d\t\n", r.MaxPerKey, r.OrderViolations, r.MaxInFlight)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ncells: latency p50 / p99, from a message's arrival to the end of its handler.")
	verdict := func(got, want float64) string {
		switch {
		case got == 0:
			return "no figure"
		case got <= want:
			return "met"
		}
		return "not met"
	}
	fifo, pri, fair, alone := rep.Results[0], rep.Results[1], rep.Results[2], rep.Results[3]
	small := slices.IndexFunc(mc.Tenants, func(t tenant) bool { return t.Name == rep.Small })
	fmt.Fprintf(w, "user turns' p99: %s with priorities, %s fifo: %.2fx (target at most 0.5x): %s\n",
		short(pri.Classes[classUser].P99), short(fifo.Classes[classUser].P99), rep.UserP99Ratio, verdict(rep.UserP99Ratio, 0.5))
	fmt.Fprintf(w, "%s tenant's p99: %s with fair share, %s alone: %.2fx (target at most 2x): %s\n",
		rep.Small, short(fair.Tenants[small].P99), short(alone.Tenants[small].P99), rep.SmallP99Ratio, verdict(rep.SmallP99Ratio, 2))
	if !pri.Wired || !fair.Wired {
		fmt.Fprintln(w, "(a run marked \"not wired\" ran FIFO lanes: laneOptions and turnOpts do not pass that policy to the lanes yet)")
	}
	if rep.OK {
		fmt.Fprintln(w, "sessions: at most 1 handler per session at once, 0 order violations, every message handled once: OK")
	}
}
