package main

// The mixed workload (-mixed): a chat gateway whose work meets on one
// shared budget, through one session lane (one message at a time per
// session) and one global lane, so that both kinds of contention of issues
// 23 and 26 meet at once: cron storms beside users, and a tenant with 500
// threads beside one with 5.
//
// It has two scenarios (mixedConfig.TenantCron):
//
//   - the gateway (-mixed, the issues' scenario): the tenants send user
//     turns; the cron jobs are the gateway's own scheduled work, a group
//     of their own (cronGroup) at the lowest priority, fired in storms. So
//     "the users" are every tenant's user turns and "the small tenant" is
//     the small tenant's own traffic.
//   - every tenant's cron (-mixed-tenant-cron): every thread of a tenant
//     also sends heartbeats and runs a cron job of its own, in its tenant's
//     group. It shows what an order by priority first costs a tenant's own
//     low-priority work: its cron job waits for everyone's user turns.
//
// The same messages run six ways (mixedRuns):
//
//   - fifo: both lanes serve in arrival order;
//   - priorities: the global lane serves user turns before heartbeats
//     before cron jobs, aged so that the cron jobs still run;
//   - fair share: the global lane shares itself equally between the groups
//     (each tenant, and cron in the gateway), FIFO within each;
//   - split lanes: the old advice while a lane took one order, priorities
//     on the session lane and fair share on the global one;
//   - prio + fair, one lane: the global lane made with both orders, which
//     compose (semaphore's package doc): by aged priority, then by group
//     within a priority, then FIFO;
//   - the small tenant alone: its same messages with nobody else (no cron
//     in the gateway: cron jobs are not its traffic).
//
// Each thread has a session (a key of the session lane) per class, and each
// of the gateway's cron jobs one of its own, as a gateway runs cron jobs
// and heartbeats in sessions of their own: the classes meet on the global
// lane only. That is why the split lanes do not help the user turns:
// ordering a session's line orders one class of one thread, never a user
// turn against a cron job.
//
// The runs are a discrete-event simulation in simulated time: the lanes
// are the library's own (a keyedsem.Keyed and a semaphore.Weighted on a
// simulated clock), driven from one goroutine that joins their lines with
// Join and releases permits in event order; a goroutine per place only
// carries its permit back (simLine). So the same seed gives the same
// figures on any machine, and a test can hold the orders to their goals.

import (
	"cmp"
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
// when a lane orders by priority: a user turn first, then a heartbeat,
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

// reps is how many times each run is made (mixedConfig.Reps).
func (mc *mixedConfig) reps() int { return max(mc.Reps, 1) }

// cronGroup is the fair-share group of the gateway's own cron jobs; no
// tenant may take its name.
const cronGroup = "cron"

// mixedConfig is the mixed workload and its lanes.
type mixedConfig struct {
	Tenants          []tenant      `json:"tenants"`
	Global           int64         `json:"global"`               // capacity of the global lane
	Window           time.Duration `json:"window_ns"`            // messages arrive over [0, Window)
	UserGap          time.Duration `json:"user_gap_ns"`          // mean gap between a thread's user turns (Poisson arrivals)
	UserLatency      time.Duration `json:"user_latency_ns"`      // mean model latency of a user turn
	HeartbeatEvery   time.Duration `json:"heartbeat_every_ns"`   // a thread's heartbeat period (its phase is random)
	HeartbeatLatency time.Duration `json:"heartbeat_latency_ns"` // mean latency of a heartbeat
	CronJobs         int           `json:"cron_jobs"`            // the gateway's cron jobs (not with TenantCron)
	CronFirst        time.Duration `json:"cron_first_ns"`        // every cron job fires at CronFirst,
	CronEvery        time.Duration `json:"cron_every_ns"`        // then every CronEvery: a cron storm each time
	CronLatency      time.Duration `json:"cron_latency_ns"`      // mean latency of a cron job
	Jitter           float64       `json:"jitter"`               // latencies vary uniformly by ± this fraction
	Aging            time.Duration `json:"aging_ns"`             // aging step of the priority order: +1 per step waited
	Seed             uint64        `json:"seed"`
	// Reps: each run is made Reps times, with the seeds Seed, Seed+1, ...,
	// and the figures are of every replication's messages pooled: the small
	// tenant sends about ten user turns a run, whose p99 alone would be its
	// slowest one. 0 is one.
	Reps int `json:"reps"`
	// TenantCron: every thread of a tenant sends user turns, heartbeats and
	// a cron job of its own, in its tenant's group (-mixed-tenant-cron);
	// otherwise the tenants send user turns and the gateway runs CronJobs
	// cron jobs in cronGroup (-mixed).
	TenantCron bool `json:"tenant_cron"`
}

// defaultMixed is the gateway scenario of -mixed. Over one simulated
// second 505 threads send about 1,000 user turns (10 ms) and the gateway
// fires its 505 cron jobs twice, two storms of 505 jobs (40 ms): 50
// slot-seconds of work for a global lane of 50, so each storm queues about
// half a second of work in front of whatever arrives after it. The aging
// step lets a cron job that has waited 1 s (two steps a class, two
// classes) tie a fresh user turn, which the storms never reach, so
// priorities do not make it wait longer than that. The heartbeats' figures
// are for the TenantCron scenario (tenantCronMixed).
func defaultMixed() mixedConfig {
	return mixedConfig{
		Tenants:          []tenant{{Name: "big", Threads: 500}, {Name: "small", Threads: 5}},
		Global:           50,
		Window:           time.Second,
		UserGap:          500 * time.Millisecond,
		UserLatency:      10 * time.Millisecond,
		HeartbeatEvery:   200 * time.Millisecond,
		HeartbeatLatency: 2 * time.Millisecond,
		CronJobs:         505,
		CronFirst:        100 * time.Millisecond,
		CronEvery:        500 * time.Millisecond,
		CronLatency:      40 * time.Millisecond,
		Jitter:           0.5,
		Aging:            500 * time.Millisecond,
		Seed:             1,
		Reps:             10,
	}
}

// tenantCronMixed is the scenario of -mixed-tenant-cron: mc's tenants, each
// thread of which also sends a heartbeat every HeartbeatEvery and runs a
// cron job of its own in its tenant's group. From defaultMixed: 2,500
// heartbeats (2 ms) more, the same 1,010 cron jobs, 55 slot-seconds.
func tenantCronMixed(mc mixedConfig) mixedConfig {
	mc.TenantCron, mc.CronJobs = true, 0
	return mc
}

func (mc *mixedConfig) validate() error {
	switch {
	case len(mc.Tenants) == 0, mc.Global < 1, mc.Window <= 0:
		return errors.New("mixed workload: tenants, a global capacity and a window are needed")
	case mc.UserGap <= 0, mc.HeartbeatEvery <= 0, mc.CronEvery <= 0, mc.CronFirst < 0, mc.Aging <= 0:
		return errors.New("mixed workload: gaps, periods and the aging step must be positive")
	case mc.Jitter < 0 || mc.Jitter > 1:
		return errors.New("mixed workload: jitter must be in [0, 1]")
	case mc.Reps < 0:
		return errors.New("mixed workload: replications must not be negative")
	case mc.CronJobs < 0, mc.TenantCron && mc.CronJobs != 0:
		return errors.New("mixed workload: the gateway's cron jobs must not be negative, and 0 when every tenant runs its own")
	}
	names := map[string]bool{cronGroup: true}
	for _, t := range mc.Tenants {
		if names[t.Name] || t.Threads < 0 {
			return fmt.Errorf("mixed workload: tenant %q: a tenant's name must be unique and not %q, its threads not negative", t.Name, cronGroup)
		}
		names[t.Name] = true
	}
	return nil
}

// source is who sends a part of a run's messages: a tenant, or the gateway
// with its cron jobs.
type source struct {
	Group   string // its fair-share group
	Index   int    // a tenant's index in mixedConfig.Tenants, len(Tenants) for the gateway's cron
	Threads int    // its threads, or cron jobs: one session per class each
	Classes []int  // the classes each thread sends
}

// tenant reports whether s is a tenant (rather than the gateway's cron).
func (s source) tenant(mc *mixedConfig) bool { return s.Index < len(mc.Tenants) }

// sources are who send in run: its tenants, and the gateway's cron jobs
// if the run has them and the scenario is the gateway's.
func (mc *mixedConfig) sources(run mixedRun) []source {
	classes := []int{classUser}
	if mc.TenantCron {
		classes = []int{classUser, classHeartbeat, classCron}
	}
	var src []source
	for _, t := range run.Tenants {
		src = append(src, source{Group: mc.Tenants[t].Name, Index: t, Threads: mc.Tenants[t].Threads, Classes: classes})
	}
	if run.Cron && !mc.TenantCron && mc.CronJobs > 0 {
		src = append(src, source{Group: cronGroup, Index: len(mc.Tenants), Threads: mc.CronJobs, Classes: []int{classCron}})
	}
	return src
}

// plan draws the messages of class c of thread i of s (see sessionPlan).
func (mc *mixedConfig) plan(s source, i, c int) []step {
	if !s.tenant(mc) {
		return mc.sessionPlan(cronSeedIndex, i, c)
	}
	return mc.sessionPlan(s.Index, i, c)
}

// cronSeedIndex stands for the gateway in the draws of its cron jobs' plans:
// an index no tenant has, the same however many tenants there are.
const cronSeedIndex = 1<<16 - 1

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

// order is the set of orders a lane is made with; 0 is FIFO.
type order uint8

const (
	byPriority  order = 1 << iota // semaphore.WithPriorities / keyedsem.WithPriorities, semaphore.Priority(class)
	byFairShare                   // semaphore.WithFairShare, semaphore.Group(tenant)
)

// mixedRun is one run of the mixed workload: the orders of its session
// and global lanes, the tenants that send (indexes into
// mixedConfig.Tenants), and whether the gateway's cron jobs run.
type mixedRun struct {
	Name    string
	Session order // byPriority or 0: a keyed lane has no fair share
	Global  order
	Tenants []int
	Cron    bool
}

// The names of the runs that the goal compares.
const (
	runFIFO     = "fifo"
	runPriority = "priorities"
	runFair     = "fair share"
	runSplit    = "split lanes"
	runComposed = "prio + fair, one lane"
)

// mixedRuns are the runs of -mixed: every tenant under each arrangement of
// orders, then the smallest tenant alone on FIFO lanes.
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
		{Name: runFIFO, Tenants: all, Cron: true},
		{Name: runPriority, Global: byPriority, Tenants: all, Cron: true},
		{Name: runFair, Global: byFairShare, Tenants: all, Cron: true},
		{Name: runSplit, Session: byPriority, Global: byFairShare, Tenants: all, Cron: true},
		{Name: runComposed, Global: byPriority | byFairShare, Tenants: all, Cron: true},
		{Name: mc.Tenants[small].Name + " alone", Tenants: []int{small}},
	}
}

// laneOptions and callOptions are where the orders reach the lanes:
// everything else in the mixed workload is the same for every run.
func laneOptions(o order, aging time.Duration) []semaphore.Option {
	var opts []semaphore.Option
	if o&byPriority != 0 {
		opts = append(opts, semaphore.WithPriorities(aging))
	}
	if o&byFairShare != 0 {
		opts = append(opts, semaphore.WithFairShare(nil)) // equal shares
	}
	return opts
}

// callOptions returns where a message of class c in fair-share group g
// joins the line of a lane made with o (a lane refuses an option of an
// order it was not made with).
func callOptions(o order, c int, g string) []semaphore.AcquireOption {
	var opts []semaphore.AcquireOption
	if o&byPriority != 0 {
		opts = append(opts, semaphore.Priority(classInfo[c].Priority))
	}
	if o&byFairShare != 0 {
		opts = append(opts, semaphore.Group(g))
	}
	return opts
}

// String names the orders of o, for the table.
func (o order) String() string {
	switch o {
	case 0:
		return "fifo"
	case byPriority:
		return "prio"
	case byFairShare:
		return "fair"
	}
	return "prio+fair"
}

// mixedKey is a session: one class of work of one thread of one source
// (source.Index: a tenant, or the gateway's cron).
type mixedKey struct {
	Source, Class, Thread int
}

// latencyRow is the waits and latencies of one class or one tenant in one
// run. The wait is from a message's arrival to its global permit (its
// session's turn included); the latency adds its model call.
type latencyRow struct {
	Name    string        `json:"name"`
	Planned int           `json:"planned"` // messages the plan sends (0: not in this run)
	Handled int           `json:"handled"`
	Wait50  time.Duration `json:"wait_p50_ns"`
	Wait99  time.Duration `json:"wait_p99_ns"`
	P50     time.Duration `json:"p50_ns"` // latency
	P99     time.Duration `json:"p99_ns"`
}

// mixedResult is what one run of the mixed workload measured.
type mixedResult struct {
	Run     string                 `json:"run"`
	Session string                 `json:"session_order"`
	Global  string                 `json:"global_order"`
	Planned int                    `json:"planned"`
	Handled int                    `json:"handled"`
	Elapsed time.Duration          `json:"elapsed_ns"` // simulated: the last message's end
	Classes [numClasses]latencyRow `json:"classes"`
	Tenants []latencyRow           `json:"tenants"` // one per tenant of the config (the gateway's cron is in Classes only)
	// TenantClasses splits each tenant's row by class.
	TenantClasses   [][numClasses]latencyRow `json:"tenant_classes"`
	MaxPerKey       int32                    `json:"max_holders_per_session"`
	OrderViolations int64                    `json:"order_violations"`
	Miscounted      int                      `json:"miscounted_sessions"` // sessions with a message lost or handled twice
	MaxInFlight     int64                    `json:"max_in_flight"`
}

func (r mixedResult) ok() bool {
	return r.MaxPerKey <= 1 && r.OrderViolations == 0 && r.Miscounted == 0
}

// mixedClock is the simulation's time, for the lanes' aging. It is read
// from the places' goroutines too, hence atomic; the lanes of -mixed make
// no timer (no maximum wait, no idle timeout).
type mixedClock struct {
	start time.Time
	now   atomic.Int64
}

func (c *mixedClock) Now() time.Time { return c.start.Add(time.Duration(c.now.Load())) }
func (c *mixedClock) NewTimer(time.Duration) semaphore.Timer {
	panic("lanesim: -mixed: the simulated clock makes no timers")
}

// simGrant is a place's outcome, carried back by its goroutine.
type simGrant struct {
	msg int
	p   semaphore.Permit
	err error
}

// simLine drives one lane from the simulation's goroutine. A place is
// taken with the lane's Join, in event order, and a goroutine waits on it
// and sends its permit to grants. The lane decides its grants inside Join
// and Release, so after either, held() less the grants received is the
// number of grants made and not yet received: collect takes exactly those,
// in message order, before simulated time moves on. No goroutine's timing
// reaches the order.
type simLine struct {
	name   string
	held   func() int64 // the lane's Stats().Held
	mine   int64        // grants received and not released
	grants chan simGrant
	wg     sync.WaitGroup
}

func newSimLine(name string, messages int, held func() int64) *simLine {
	return &simLine{name: name, held: held, grants: make(chan simGrant, messages)}
}

// wait has a goroutine wait on msg's place (wait is its Wait).
func (l *simLine) wait(msg int, wait func(context.Context) (semaphore.Permit, error)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		p, err := wait(context.Background())
		l.grants <- simGrant{msg: msg, p: p, err: err} // buffered for every message: never blocks
	}()
}

// collect returns the grants made since the last collect, by message. A
// grant the lane counted that does not come within a minute is a bug in
// this driver or the lane, reported rather than waited for forever.
func (l *simLine) collect() ([]simGrant, error) {
	n := l.held() - l.mine
	if n <= 0 {
		return nil, nil
	}
	got := make([]simGrant, 0, n)
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for int64(len(got)) < n {
		select {
		case g := <-l.grants:
			if g.err != nil {
				return nil, fmt.Errorf("%s lane: message %d: %w", l.name, g.msg, g.err)
			}
			got = append(got, g)
		case <-deadline.C:
			return nil, fmt.Errorf("%s lane: counted %d grants, %d came back within a minute", l.name, n, len(got))
		}
	}
	l.mine += n
	slices.SortFunc(got, func(a, b simGrant) int { return cmp.Compare(a.msg, b.msg) })
	return got, nil
}

// release gives p back to the lane.
func (l *simLine) release(p semaphore.Permit) {
	if p.Release() {
		l.mine--
	}
}

// simEvent is a message's arrival or the end of its model call, at
// simulated time at; tie orders events of one instant (the cron storms).
type simEvent struct {
	at   time.Duration
	tie  uint64
	msg  int
	done bool
}

// simEventBefore orders events by (at, tie, msg): a total order, so a seed
// gives the same run.
func simEventBefore(a, b *simEvent) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.msg < b.msg
}

// mix64 is SplitMix64's finaliser: the tie of a message's arrival, drawn
// from the seed and the message alone, so that a cron storm's jobs join the
// lines in a seeded random order, the same in every run.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// mixedSamples are the waits and latencies of a run's messages by source
// (the tenants, then the gateway's cron) and class.
type mixedSamples struct {
	waits, lats [][numClasses][]time.Duration
}

// simulateMixed runs the mixed workload of mc as run says, in simulated
// time, once per replication (mixedConfig.Reps), and reports what it saw,
// the messages of every replication pooled. An error is a lane that
// refused the configuration or a message, which would otherwise go
// uncounted.
func simulateMixed(mc mixedConfig, run mixedRun) (mixedResult, error) {
	if err := mc.validate(); err != nil {
		return mixedResult{}, err
	}
	var (
		r   mixedResult
		all mixedSamples
	)
	for k := range mc.reps() {
		one := mc
		one.Seed = mc.Seed + uint64(k)
		got, s, err := simulateOnce(one, run)
		if err != nil {
			return got, err
		}
		if k == 0 {
			r, all = got, s
			continue
		}
		r.Planned += got.Planned
		r.Handled += got.Handled
		r.Elapsed = max(r.Elapsed, got.Elapsed)
		r.MaxPerKey = max(r.MaxPerKey, got.MaxPerKey)
		r.OrderViolations += got.OrderViolations
		r.Miscounted += got.Miscounted
		r.MaxInFlight = max(r.MaxInFlight, got.MaxInFlight)
		for c := range numClasses {
			r.Classes[c].Planned += got.Classes[c].Planned
		}
		for t := range r.Tenants {
			r.Tenants[t].Planned += got.Tenants[t].Planned
			for c := range numClasses {
				r.TenantClasses[t][c].Planned += got.TenantClasses[t][c].Planned
			}
		}
		for src := range all.waits {
			for c := range numClasses {
				all.waits[src][c] = append(all.waits[src][c], s.waits[src][c]...)
				all.lats[src][c] = append(all.lats[src][c], s.lats[src][c]...)
			}
		}
	}
	r.fill(mc, all)
	return r, nil
}

// simulateOnce runs the mixed workload of mc once with mc.Seed.
func simulateOnce(mc mixedConfig, run mixedRun) (mixedResult, mixedSamples, error) {
	clk := &mixedClock{start: time.Unix(0, 0)}
	sessionOpts := []keyedsem.Option{keyedsem.WithIdleTimeout(0), keyedsem.WithClock(clk)}
	if run.Session&byPriority != 0 {
		sessionOpts = append(sessionOpts, keyedsem.WithPriorities(mc.Aging))
	}
	if run.Session&^byPriority != 0 {
		return mixedResult{}, mixedSamples{}, fmt.Errorf("%s: a session lane orders by priority only", run.Name)
	}
	globalOpts := append(laneOptions(run.Global, mc.Aging), semaphore.WithClock(clk))
	if err := keyedsem.Validate(sessionOpts...); err != nil {
		return mixedResult{}, mixedSamples{}, err
	}
	if err := semaphore.Validate(mc.Global, globalOpts...); err != nil {
		return mixedResult{}, mixedSamples{}, err
	}
	sessions := keyedsem.New[mixedKey](sessionOpts...)
	global := semaphore.New(mc.Global, globalOpts...)

	// The plan: every message, by session, in arrival order within each.
	type session struct {
		key      mixedKey
		running  int32 // messages holding the session's global permit
		lastDone int   // seq of the last message ended
		handled  int
		planned  int
	}
	type message struct {
		session, seq     int // seq: 1, 2, ... within the session
		arrival          time.Duration
		latency          time.Duration
		granted          time.Duration // the global permit
		sOpts, gOpts     []semaphore.AcquireOption
		sPermit, gPermit semaphore.Permit
	}
	r := mixedResult{
		Run:           run.Name,
		Session:       run.Session.String(),
		Global:        run.Global.String(),
		Tenants:       make([]latencyRow, len(mc.Tenants)),
		TenantClasses: make([][numClasses]latencyRow, len(mc.Tenants)),
	}
	var (
		ss     []session
		msgs   []message
		events = minHeap[simEvent]{before: simEventBefore}
	)
	for _, src := range mc.sources(run) {
		for i := range src.Threads {
			for _, c := range src.Classes {
				steps := mc.plan(src, i, c)
				if len(steps) == 0 {
					continue
				}
				sOpts := callOptions(run.Session, c, "")
				gOpts := callOptions(run.Global, c, src.Group)
				for k, st := range steps {
					id := uint64(src.Index)<<40 | uint64(i)<<16 | uint64(c)<<12 | uint64(k)
					events.push(simEvent{at: st.At, tie: mix64(mc.Seed ^ mix64(id)), msg: len(msgs)})
					msgs = append(msgs, message{session: len(ss), seq: k + 1, arrival: st.At, latency: st.Latency, sOpts: sOpts, gOpts: gOpts})
				}
				ss = append(ss, session{key: mixedKey{Source: src.Index, Class: c, Thread: i}, planned: len(steps)})
				r.Classes[c].Planned += len(steps)
				if src.tenant(&mc) {
					r.Tenants[src.Index].Planned += len(steps)
					r.TenantClasses[src.Index][c].Planned += len(steps)
				}
				r.Planned += len(steps)
			}
		}
	}

	sLine := newSimLine("session", len(msgs), func() int64 { return sessions.Stats().Held })
	gLine := newSimLine("global", len(msgs), func() int64 { return global.Stats().Held })
	defer func() {
		// Every place is granted by the end of a run that ends well; after
		// an error, closing fails the rest, so no goroutine outlives it.
		sessions.Close()
		global.Close()
		sLine.wg.Wait()
		gLine.wg.Wait()
	}()
	var (
		now     time.Duration
		running int64
		// waits and lats by source (the tenants, then the gateway's cron)
		// and class.
		waits, lats = make([][numClasses][]time.Duration, len(mc.Tenants)+1), make([][numClasses][]time.Duration, len(mc.Tenants)+1)
	)
	// onGlobal: messages granted the global lane start their model call.
	onGlobal := func() error {
		got, err := gLine.collect()
		if err != nil {
			return err
		}
		for _, g := range got {
			m := &msgs[g.msg]
			s := &ss[m.session]
			m.gPermit, m.granted = g.p, now
			s.running++
			r.MaxPerKey = max(r.MaxPerKey, s.running)
			if m.seq != s.lastDone+1 {
				r.OrderViolations++
			}
			running++
			r.MaxInFlight = max(r.MaxInFlight, running)
			events.push(simEvent{at: now + m.latency, msg: g.msg, done: true})
		}
		return nil
	}
	// onSession: messages granted their session join the global line.
	onSession := func() error {
		got, err := sLine.collect()
		if err != nil {
			return err
		}
		for _, g := range got {
			m := &msgs[g.msg]
			m.sPermit = g.p
			pl, err := global.Join(1, m.gOpts...)
			if err != nil {
				return fmt.Errorf("%s: global lane: %w", run.Name, err)
			}
			gLine.wait(g.msg, pl.Wait)
			if err := onGlobal(); err != nil {
				return err
			}
		}
		return nil
	}
	for events.len() > 0 {
		e := events.pop()
		now = e.at
		clk.now.Store(int64(now))
		m := &msgs[e.msg]
		s := &ss[m.session]
		if !e.done { // an arrival: the message joins its session's line
			pl, err := sessions.Join(s.key, m.sOpts...)
			if err != nil {
				return r, mixedSamples{}, fmt.Errorf("%s: session lane: %w", run.Name, err)
			}
			sLine.wait(e.msg, pl.Wait)
			if err := onSession(); err != nil {
				return r, mixedSamples{}, err
			}
			continue
		}
		// The end of a model call: the global permit, then the session.
		s.running--
		s.lastDone = max(s.lastDone, m.seq)
		s.handled++
		running--
		r.Handled++
		r.Elapsed = now
		t, c := s.key.Source, s.key.Class
		waits[t][c] = append(waits[t][c], m.granted-m.arrival)
		lats[t][c] = append(lats[t][c], now-m.arrival)
		gLine.release(m.gPermit)
		if err := onGlobal(); err != nil {
			return r, mixedSamples{}, err
		}
		sLine.release(m.sPermit)
		if err := onSession(); err != nil {
			return r, mixedSamples{}, err
		}
	}
	for i := range ss {
		if ss[i].handled != ss[i].planned {
			r.Miscounted++
		}
	}
	return r, mixedSamples{waits: waits, lats: lats}, nil
}

// fill sets r's rows from the samples s of mc's messages.
func (r *mixedResult) fill(mc mixedConfig, s mixedSamples) {
	for c := range numClasses {
		var w, l []time.Duration
		for t := range s.waits {
			w, l = append(w, s.waits[t][c]...), append(l, s.lats[t][c]...)
		}
		r.Classes[c].fill(classInfo[c].Name, w, l)
	}
	for t := range mc.Tenants {
		var w, l []time.Duration
		for c := range numClasses {
			w, l = append(w, s.waits[t][c]...), append(l, s.lats[t][c]...)
			r.TenantClasses[t][c].fill(classInfo[c].Name, s.waits[t][c], s.lats[t][c])
		}
		r.Tenants[t].fill(mc.Tenants[t].Name, w, l)
	}
}

// fill names the row and sets its count and percentiles from its waits
// and latencies.
func (row *latencyRow) fill(name string, waits, lats []time.Duration) {
	slices.Sort(waits)
	slices.Sort(lats)
	row.Name, row.Handled = name, len(lats)
	row.Wait50, row.Wait99 = percentile(waits, 0.50), percentile(waits, 0.99)
	row.P50, row.P99 = percentile(lats, 0.50), percentile(lats, 0.99)
}

// composedGoal is issue 23's goal for the composed lane: the user turns'
// p99 wait (every tenant's) and the small tenant's (all its own messages),
// each at most this times the better of what priorities alone and fair
// share alone give it.
const composedGoal = 1.2

// goalFigure is one class's p99 wait on the composed lane against the
// best of either order alone.
type goalFigure struct {
	What     string        `json:"what"`
	Composed time.Duration `json:"composed_p99_wait_ns"`
	Best     time.Duration `json:"best_alone_p99_wait_ns"`
	BestRun  string        `json:"best_alone_run"`
	Ratio    float64       `json:"ratio"` // Composed / Best; 1 when both are 0
	Met      bool          `json:"met"`
}

// judge compares composed with the better of pri and fair.
func judge(what string, composed, pri, fair time.Duration) goalFigure {
	g := goalFigure{What: what, Composed: composed, Best: pri, BestRun: runPriority}
	if fair < pri {
		g.Best, g.BestRun = fair, runFair
	}
	switch {
	case composed == 0:
		g.Ratio = 1 // no wait at all: nothing does better
		if g.Best > 0 {
			g.Ratio = 0
		}
	case g.Best == 0:
		g.Ratio = -1 // a wait where an order alone has none: no ratio, missed
	default:
		g.Ratio = float64(composed) / float64(g.Best)
	}
	g.Met = g.Ratio >= 0 && g.Ratio <= composedGoal
	return g
}

// mixedReport is every run of the mixed workload, and the figures the
// orders are judged by.
type mixedReport struct {
	Config  mixedConfig   `json:"config"`
	Results []mixedResult `json:"results"`
	Small   string        `json:"small_tenant"`
	// Users and SmallTenant: the composed lane against issue 23's goal
	// (composedGoal); Goal: both met.
	Users       goalFigure `json:"users"`
	SmallTenant goalFigure `json:"small"`
	Goal        bool       `json:"goal_met"`
	// UserP99Ratio is the user turns' p99 latency with priorities over
	// their p99 on FIFO lanes (the target: at most 0.5). SmallP99Ratio is
	// the smallest tenant's p99 latency with fair share over its p99 alone
	// (the target: at most 2). 0 when a run handled none.
	UserP99Ratio  float64 `json:"user_p99_priorities_over_fifo"`
	SmallP99Ratio float64 `json:"small_p99_fair_share_over_alone"`
	OK            bool    `json:"ok"` // every run kept the per-session guarantees
}

// simulateMixedAll runs every run of mixedRuns(mc) in turn and judges
// them.
func simulateMixedAll(mc mixedConfig) (mixedReport, error) {
	runs := mixedRuns(mc)
	rep := mixedReport{Config: mc}
	for _, run := range runs {
		r, err := simulateMixed(mc, run)
		if err != nil {
			return rep, err
		}
		rep.Results = append(rep.Results, r)
	}
	rep.Small = mc.Tenants[runs[len(runs)-1].Tenants[0]].Name
	rep.judge()
	return rep, nil
}

// judge sets the report's figures from its results: the composed lane
// against the goal, the older targets and OK.
func (rep *mixedReport) judge() {
	rep.OK = true
	for _, r := range rep.Results {
		rep.OK = rep.OK && r.ok()
	}
	fifo, pri, fair, composed, alone := rep.find(runFIFO), rep.find(runPriority), rep.find(runFair), rep.find(runComposed), rep.Results[len(rep.Results)-1]
	small := rep.small()
	rep.Users = judge("user turns'", composed.Classes[classUser].Wait99, pri.Classes[classUser].Wait99, fair.Classes[classUser].Wait99)
	rep.SmallTenant = judge(rep.Small+" tenant's", composed.Tenants[small].Wait99, pri.Tenants[small].Wait99, fair.Tenants[small].Wait99)
	rep.Goal = rep.Users.Met && rep.SmallTenant.Met
	rep.UserP99Ratio = ratio(pri.Classes[classUser].P99, fifo.Classes[classUser].P99)
	rep.SmallP99Ratio = ratio(fair.Tenants[small].P99, alone.Tenants[small].P99)
}

// small is the small tenant's index in the config.
func (rep *mixedReport) small() int {
	return slices.IndexFunc(rep.Config.Tenants, func(t tenant) bool { return t.Name == rep.Small })
}

// find returns the result of the run named; the runs of mixedRuns are all
// there.
func (rep *mixedReport) find(name string) *mixedResult {
	for i := range rep.Results {
		if rep.Results[i].Run == name {
			return &rep.Results[i]
		}
	}
	panic("lanesim: -mixed: no run " + name)
}

func ratio(a, b time.Duration) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func printMixed(w io.Writer, rep mixedReport) {
	mc := rep.Config
	var ts, groups []string
	for _, t := range mc.Tenants {
		ts = append(ts, fmt.Sprintf("%s (%d threads)", t.Name, t.Threads))
		groups = append(groups, t.Name)
	}
	seeds := fmt.Sprintf("seed %d", mc.Seed)
	if mc.reps() > 1 {
		seeds = fmt.Sprintf("each run made %d times (seeds %d to %d), the messages pooled", mc.reps(), mc.Seed, mc.Seed+uint64(mc.reps())-1)
	}
	if mc.TenantCron {
		para(w, "  ", fmt.Sprintf("lanesim -mixed-tenant-cron, every tenant's cron: tenants %s; each thread has a session for its user turns, one for its heartbeats, one for its cron jobs, all in its tenant's group; global capacity %d.",
			strings.Join(ts, " and "), mc.Global))
		para(w, "  ", fmt.Sprintf("Over %v: user turns every %v on average (Poisson) of %v, heartbeats every %v of %v, every thread's cron job at %v and every %v after (a storm) of %v; latencies ±%.0f%%. Priorities: user turn %d, heartbeat %d, cron job %d, aging step %v. Fair share: equal shares for %s. Simulated time, %s.",
			mc.Window, mc.UserGap, mc.UserLatency, mc.HeartbeatEvery, mc.HeartbeatLatency, mc.CronFirst, mc.CronEvery, mc.CronLatency, mc.Jitter*100,
			classInfo[classUser].Priority, classInfo[classHeartbeat].Priority, classInfo[classCron].Priority, mc.Aging, strings.Join(groups, " and "), seeds))
	} else {
		groups = append(groups, cronGroup)
		para(w, "  ", fmt.Sprintf("lanesim -mixed, a chat gateway: tenants %s send user turns, a session per thread; the gateway runs %d cron jobs of its own in group %q, a session per job; global capacity %d.",
			strings.Join(ts, " and "), mc.CronJobs, cronGroup, mc.Global))
		para(w, "  ", fmt.Sprintf("Over %v: user turns every %v on average (Poisson) of %v; every cron job at %v and every %v after (a storm) of %v; latencies ±%.0f%%. Priorities: user turn %d, cron job %d, aging step %v. Fair share: equal shares for %s. Simulated time, %s.",
			mc.Window, mc.UserGap, mc.UserLatency, mc.CronFirst, mc.CronEvery, mc.CronLatency, mc.Jitter*100,
			classInfo[classUser].Priority, classInfo[classCron].Priority, mc.Aging, strings.Join(groups, ", "), seeds))
	}
	fmt.Fprintln(w)
	// The classes some run sends: the gateway's tenants send no heartbeats.
	var classes []int
	for c := range numClasses {
		if slices.ContainsFunc(rep.Results, func(r mixedResult) bool { return r.Classes[c].Planned > 0 }) {
			classes = append(classes, c)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "run\tsession\tglobal\thandled")
	for _, c := range classes {
		fmt.Fprintf(tw, "\t%s", classInfo[c].Name)
	}
	for _, t := range mc.Tenants {
		fmt.Fprintf(tw, "\t%s", t.Name)
	}
	fmt.Fprintln(tw)
	cell := func(row latencyRow) string {
		if row.Planned == 0 {
			return "-"
		}
		s := short(row.Wait99)
		if row.Handled != row.Planned {
			s += fmt.Sprintf(" (%d of %d)", row.Handled, row.Planned)
		}
		return s
	}
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d", r.Run, r.Session, r.Global, r.Handled)
		for _, c := range classes {
			fmt.Fprintf(tw, "\t%s", cell(r.Classes[c]))
		}
		for _, row := range r.Tenants {
			fmt.Fprintf(tw, "\t%s", cell(row))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)
	mine := "every class of its threads"
	if !mc.TenantCron {
		mine = "its user turns; the cron jobs are the gateway's own"
	}
	para(w, "", fmt.Sprintf("cells: p99 wait, from a message's arrival to its global permit (its session's turn included); -json has p50, the latencies and the messages in flight. A tenant's column is its own messages (%s). session, global: the orders each lane was made with. split lanes: the old advice while a lane took one order (priorities on the session lane, fair share on the global one); a session carries one class, so its order never puts a user turn before a cron job.", mine))
	fmt.Fprintln(w)
	verdict := func(g goalFigure) string {
		r := fmt.Sprintf("%.2fx", g.Ratio)
		if g.Ratio < 0 {
			r = "no ratio"
		}
		v := "PASS"
		if !g.Met {
			v = "MISS"
		}
		return fmt.Sprintf("%s p99 wait: %s on one lane, %s at best alone (%s): %s: %s",
			g.What, short(g.Composed), short(g.Best), g.BestRun, r, v)
	}
	para(w, "  ", fmt.Sprintf("goal (issue 23): on the one lane with priorities and fair share, each p99 wait at most %.1fx the best that either order alone gives it.", composedGoal))
	para(w, "  ", verdict(rep.Users))
	para(w, "  ", verdict(rep.SmallTenant))
	small := rep.small()
	p50 := func(run string) string { return short(rep.find(run).Tenants[small].Wait50) }
	why := ""
	if !mc.TenantCron {
		why = " (its p99 is mostly a wait for any permit while a storm's cron jobs hold them all, which no order shortens)"
	}
	para(w, "  ", fmt.Sprintf("%s tenant's p50 wait: %s on one lane, %s with priorities alone, %s with fair share alone%s.",
		rep.Small, p50(runComposed), p50(runPriority), p50(runFair), why))
	if mc.TenantCron {
		byClass := func(r *mixedResult) string {
			var cs []string
			for _, row := range r.TenantClasses[small] {
				cs = append(cs, short(row.Wait99))
			}
			return strings.Join(cs, " / ")
		}
		var names []string
		for _, ci := range classInfo {
			names = append(names, ci.Name)
		}
		para(w, "  ", fmt.Sprintf("%s tenant's p99 wait by class (%s): %s on one lane; %s with priorities alone; %s with fair share alone.",
			rep.Small, strings.Join(names, " / "), byClass(rep.find(runComposed)), byClass(rep.find(runPriority)), byClass(rep.find(runFair))))
	}
	if !rep.SmallTenant.Met {
		para(w, "  ", "On one lane the priority comes first and fair share orders each priority's line: a message of the small tenant in a lower class waits for every group's higher classes (and for older messages aged up), which fair share alone lets it pass. That is the order's design: the cost falls on a tenant's own low-priority work.")
	}
	target := func(got, want float64) string {
		switch {
		case got == 0:
			return "no figure"
		case got <= want:
			return "met"
		}
		return "not met"
	}
	fifo, pri, fair, alone := rep.find(runFIFO), rep.find(runPriority), rep.find(runFair), rep.Results[len(rep.Results)-1]
	para(w, "  ", fmt.Sprintf("user turns' p99 latency: %s with priorities, %s fifo: %.2fx (target at most 0.5x): %s.",
		short(pri.Classes[classUser].P99), short(fifo.Classes[classUser].P99), rep.UserP99Ratio, target(rep.UserP99Ratio, 0.5)))
	para(w, "  ", fmt.Sprintf("%s tenant's p99 latency: %s with fair share, %s alone: %.2fx (target at most 2x): %s.",
		rep.Small, short(fair.Tenants[small].P99), short(alone.Tenants[small].P99), rep.SmallP99Ratio, target(rep.SmallP99Ratio, 2)))
	if rep.OK {
		para(w, "  ", "sessions: at most 1 holder per session at once, 0 order violations, every message handled once: OK")
	}
}
