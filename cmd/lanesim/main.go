// Command lanesim simulates a chat gateway and shows what per-key lanes
// change: many channels and threads send messages, each handled with a
// simulated model latency, and the same traffic runs through
//
//   - global-1: one lane of capacity 1 for everybody, the serialising bug
//     (thread B waits for thread A although they share nothing),
//   - session+global: a keyed "session" lane (one message at a time per
//     thread, in order) and a shared "global" lane (-global calls at once),
//   - global only: the global lane alone, unordered (a thread's messages
//     run at once and out of order), and
//   - naive map: a map of one mutex per thread that drops idle entries (see
//     naiveMap), then the global lane: it lets two holders of one thread in.
//
// By default 64 threads share a global lane of 48, so the global lane is
// what caps the messages in flight (see defaultConfig).
//
// It prints a table of 100 columns at most: per run, the messages handled,
// the time, its share of the ideal schedule (a lower bound on the shortest
// makespan any scheduler could reach with the same seeded latencies, see
// bound.go), p50/p99 latency (arrival to done), the most messages in
// flight, the messages that ran beside another of their thread and the
// ones out of order (both must be 0 for the lanes); then a short legend
// and the figures in words. -v adds a second table: throughput, the most
// handlers of one thread at once, the timers' lateness, the per-thread
// map's entries and evictions, and the heap; -json has every figure. The
// last two runs (-defects, on by default) show the two wrong fixes
// breaking what the lanes keep.
//
// -scale runs the gateway at 10,000 threads and 100,000 messages through
// session + global (global-1 would take the whole work end to end, so it is
// not run). -mixed adds a chat gateway in simulated time: the user turns
// of a big tenant and a small one beside the gateway's own cron storms (a
// group of their own), on FIFO lanes, with priorities or fair share on the
// global lane, with the two on separate lanes, with the two composed on the
// global lane, and the small tenant alone, judged against issue 23's goal
// for the composed lane; -mixed-tenant-cron adds the same runs with every
// tenant's thread sending heartbeats and cron jobs of its own, which shows
// what priority first costs a tenant's own low-priority work (see
// mixed.go). -provider runs, instead, a model API whose
// real limit steps and drifts behind fixed limits and adaptive controllers
// (provider.go), then a model API with concurrency, requests-per-minute and
// tokens-per-minute limits and Retry-After on its 429s, called through
// lanequeue's lanes with tokens settled after each call and cooldowns,
// beside fixed limits and a naive retry loop (ratelimits.go). Its fleet
// version, three replicas sharing one budget through Redis in real time,
// is `go run ./cmd/fleetsim -provider` in the redislane module.
//
// The exit status is 1 if a run with a per-thread lane shows more than one
// handler at once for a thread, or an order violation, or if a message was
// lost or handled twice; 2 for bad flags.
//
//	go run ./cmd/lanesim
//	go run ./cmd/lanesim -v
//	go run ./cmd/lanesim -keys 256 -messages 16 -latency 5ms -global 32 -json
//	go run ./cmd/lanesim -scale
//	go run ./cmd/lanesim -mixed
//	go run ./cmd/lanesim -mixed-tenant-cron
//	go run ./cmd/lanesim -provider
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is one simulation's traffic and lanes.
type config struct {
	Keys     int           `json:"keys"`        // chat threads
	Channels int           `json:"channels"`    // channels the threads are spread over
	Messages int           `json:"messages"`    // messages per thread
	Latency  time.Duration `json:"latency_ns"`  // mean simulated model latency
	Jitter   float64       `json:"jitter"`      // latency varies by ± this fraction
	Gap      time.Duration `json:"gap_ns"`      // mean gap between a thread's messages (0: all queued at the start)
	Global   int64         `json:"global"`      // capacity of the global lane of session+global
	Duration time.Duration `json:"duration_ns"` // cap on each run
	Idle     time.Duration `json:"idle_ns"`     // idle timeout of the session lane's keys
	Seed     uint64        `json:"seed"`        // seed of the latencies and gaps
	Defects  bool          `json:"defects"`     // also run the global lane alone and the naive map
	Scale    bool          `json:"scale"`       // the scale run: session+global only
	Progress time.Duration `json:"-"`           // progress line period

	// model makes the simulated model call of one run through a lane of
	// the given capacity (1 for global-1, Global otherwise); nil: a timer
	// of the message's latency. A test puts a barrier there.
	model func(capacity int64) modelCall
}

// modelCall is a handler's simulated model call: it reports whether the
// call finished (false: ctx ended first).
type modelCall func(ctx context.Context, latency time.Duration) bool

// defaultConfig is the traffic and lanes of a plain `lanesim`: 64 threads of
// 8 messages, all queued at the start, so that every thread has a message
// ready until near the end, and a global lane of 48, below those 64: the
// global lane is what caps the messages in flight (48 run, 16 threads wait
// for it), which the summary under the table says.
//
// Why 48 and not 16 or 32, which bind harder: the naive map's defect shows
// only when its second holder of a thread gets a global permit before the
// first holder ends. With 64 threads over a capacity of 32, a message
// waits about one model latency for its global permit, and the second
// holder rarely overlaps the first (a handful of 512 messages, none with
// 16); with 48, the wait is a third of a latency, and the defect shows in
// about a fifth of the messages, as the global lane alone does too.
func defaultConfig() config {
	return config{
		Keys: 64, Channels: 4, Messages: 8, Latency: 2 * time.Millisecond, Jitter: 0.5,
		Global: 48, Duration: 20 * time.Second, Seed: 1, Defects: true, Progress: 250 * time.Millisecond,
	}
}

// threadKey names a chat thread: a struct key, no string building.
type threadKey struct {
	Channel string
	Thread  int
}

var channelNames = []string{"telegram", "slack", "discord", "whatsapp", "signal", "matrix", "email", "sms"}

func (c config) key(i int) threadKey {
	return threadKey{Channel: channelNames[i%c.Channels], Thread: i / c.Channels}
}

// mode is one way through the queue.
type mode struct {
	Name   string
	Lanes  []string
	PerKey bool // the lanes serialise each thread: the guarantees must hold
	Naive  bool // a naiveMap's lock per thread first
}

// capacity is the capacity of m's global lane: 1 for global-1, the global
// lane's otherwise.
func (m mode) capacity(cfg config) int64 {
	if slices.Contains(m.Lanes, "serial") {
		return 1
	}
	return cfg.Global
}

var (
	modeGlobal1 = mode{Name: "global-1 (bug)", Lanes: []string{"serial"}, PerKey: true}
	modeSession = mode{Name: "session+global", Lanes: []string{"session", "global"}, PerKey: true}
	modeUnsafe  = mode{Name: "global only", Lanes: []string{"global"}, PerKey: false}
	modeNaive   = mode{Name: "naive map+global", Lanes: []string{"global"}, Naive: true}
)

// result is what one run measured.
type result struct {
	Mode            string        `json:"mode"`
	PerKey          bool          `json:"per_key"`
	Messages        int           `json:"messages"`
	Handled         int           `json:"handled"`
	Incomplete      int           `json:"incomplete"` // cut off by -duration
	Elapsed         time.Duration `json:"elapsed_ns"`
	Throughput      float64       `json:"throughput"` // messages per second
	P50             time.Duration `json:"p50_ns"`
	P99             time.Duration `json:"p99_ns"`
	MaxPerKey       int32         `json:"max_holders_per_key"`
	DoubleHolders   int64         `json:"double_holders"` // messages started while another of their thread ran
	OrderViolations int64         `json:"order_violations"`
	MaxGlobal       int64         `json:"max_in_flight"`
	KeysAlive       int           `json:"keys_alive"` // per-thread entries after the run (session lane, naive map; -1: none)
	Evictions       uint64        `json:"evictions"`
	EvictedUnder    int           `json:"evicted_under"`      // naive map: of the evictions, entries a caller waited for
	HeapBytes       uint64        `json:"heap_bytes"`         // live heap after the run and a GC
	Miscounted      int           `json:"miscounted_threads"` // threads with a message lost or handled twice

	// The yardstick: Bound is the ideal schedule's lower bound on the
	// seeded latencies (see bound), Efficiency = Bound / Elapsed.
	Bound      time.Duration `json:"bound_ns"`
	Efficiency float64       `json:"efficiency"`
	// Overshoot is the mean time a handler's simulated model call (a Go
	// timer) lasted beyond its seeded latency: the timer's granularity,
	// not the lanes'. NetEfficiency is the efficiency against the bound
	// of the work as it really lasted, which leaves that out.
	Overshoot     time.Duration `json:"sleep_overshoot_ns"`
	NetEfficiency float64       `json:"net_efficiency"`
}

// ok reports whether the run kept the guarantees it claims: every message
// handled at most once (all of them unless cut), and for a per-thread lane
// one handler at a time per thread, in order.
func (r result) ok() bool {
	return r.Miscounted == 0 && (!r.PerKey || (r.MaxPerKey <= 1 && r.OrderViolations == 0))
}

// tracker watches the handlers of one thread: how many run at once, and
// whether each message starts only after the previous one finished.
type tracker struct {
	inFlight atomic.Int32
	max      atomic.Int32
	lastDone atomic.Int64 // sequence number of the last message finished (0: none)
	overlaps atomic.Int64 // messages started while another of the thread ran
	handled  atomic.Int32 // messages handled to the end
	worked   atomic.Int64 // their handlers' time, as measured (ns)
}

// start records that message seq (1, 2, ...) starts, and reports whether
// that breaks the order (the previous message has not finished).
func (t *tracker) start(seq int64) (violation bool) {
	n := t.inFlight.Add(1)
	for m := t.max.Load(); n > m && !t.max.CompareAndSwap(m, n); m = t.max.Load() {
	}
	if n > 1 {
		t.overlaps.Add(1)
	}
	return t.lastDone.Load() != seq-1
}

// finish records that message seq finished.
func (t *tracker) finish(seq int64) {
	for d := t.lastDone.Load(); seq > d && !t.lastDone.CompareAndSwap(d, seq); d = t.lastDone.Load() {
	}
	t.inFlight.Add(-1)
}

// message is one message of a thread.
type message struct {
	seq     int64
	arrival time.Time
	latency time.Duration
}

// simulate runs the traffic of cfg through the lanes of m and reports what
// it saw. progress, if not nil, gets a progress line every cfg.Progress.
func simulate(ctx context.Context, cfg config, m mode, progress io.Writer) result {
	ks := keyedsem.New[threadKey](keyedsem.WithIdleTimeout(cfg.Idle))
	q := lanequeue.New[threadKey]()
	defer q.Close()
	for _, err := range []error{
		q.Add("session", lanequeue.NewKeyedLane(ks)),
		q.Add("global", lanequeue.NewGlobalLane[threadKey](semaphore.New(cfg.Global))),
		q.Add("serial", lanequeue.NewGlobalLane[threadKey](semaphore.New(1))),
	} {
		if err != nil {
			panic(err) // fixed names and a capacity checked by run
		}
	}
	lanes, err := q.Lanes(m.Lanes...) // resolved once, shared by every reader
	if err != nil {
		panic(err) // the modes name the lanes added above
	}
	var naive *naiveMap[threadKey]
	if m.Naive {
		naive = newNaiveMap[threadKey]()
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()

	total := cfg.Keys * cfg.Messages
	trackers := make([]tracker, cfg.Keys)
	var (
		violations atomic.Int64
		handled    atomic.Int64
		inFlight   atomic.Int64
		maxFlight  atomic.Int64
		mu         sync.Mutex
		latencies  = make([]time.Duration, 0, total)
		workers    sync.WaitGroup
		readers    sync.WaitGroup
	)
	yardstick := planBound(&cfg, cfg.Global)
	var overshoot atomic.Int64 // sum over handled messages (ns)
	call := modelCall(sleep)
	if cfg.model != nil {
		call = cfg.model(m.capacity(cfg))
	}
	start := time.Now()
	stopProgress := startProgress(progress, cfg.Progress, m.Name, total, &handled, &inFlight)

	for i := range cfg.Keys {
		key, tr := cfg.key(i), &trackers[i]
		plan := cfg.plan(i)
		inbox := make(chan message, cfg.Messages)
		users := func() { // the thread's users
			defer close(inbox)
			for s := 1; s <= cfg.Messages; s++ {
				gap, st := plan.next()
				if gap > 0 && !sleep(ctx, gap) {
					return
				}
				inbox <- message{seq: int64(s), arrival: time.Now(), latency: st.Latency}
			}
		}
		if cfg.Gap == 0 {
			// Everything is queued at the start: no goroutine to wait
			// for, so that 10,000 threads are all queued as fast as
			// the loop runs (the inbox holds every message).
			users()
		} else {
			readers.Add(1)
			go func() {
				defer readers.Done()
				users()
			}()
		}
		readers.Add(1)
		go func() { // the gateway's reader for the thread
			defer readers.Done()
			for msg := range inbox {
				unlock := func() {}
				if naive != nil {
					unlock = naive.lock(key)
				}
				t, err := q.AcquireAll(ctx, key, lanes)
				if err != nil {
					unlock()
					continue // cut off by -duration: counted as incomplete
				}
				workers.Add(1)
				go func() { // the handler owns the ticket
					defer workers.Done()
					defer unlock()
					defer t.Release()
					n := inFlight.Add(1)
					for mx := maxFlight.Load(); n > mx && !maxFlight.CompareAndSwap(mx, n); mx = maxFlight.Load() {
					}
					if tr.start(msg.seq) {
						violations.Add(1)
					}
					began := time.Now()
					done := call(ctx, msg.latency) // the model call
					took := time.Since(began)
					tr.finish(msg.seq)
					inFlight.Add(-1)
					if !done {
						return
					}
					lat := time.Since(msg.arrival)
					tr.handled.Add(1)
					tr.worked.Add(int64(took))
					overshoot.Add(int64(took - msg.latency))
					handled.Add(1)
					mu.Lock()
					latencies = append(latencies, lat)
					mu.Unlock()
				}()
			}
		}()
	}
	readers.Wait()
	workers.Wait()
	elapsed := time.Since(start)
	cut := ctx.Err() != nil
	stopProgress()

	r := result{
		Mode:            m.Name,
		PerKey:          m.PerKey,
		Messages:        total,
		Handled:         int(handled.Load()),
		Elapsed:         elapsed,
		OrderViolations: violations.Load(),
		MaxGlobal:       maxFlight.Load(),
		KeysAlive:       -1,
	}
	r.Incomplete = total - r.Handled
	if elapsed > 0 {
		r.Throughput = float64(r.Handled) / elapsed.Seconds()
	}
	slices.Sort(latencies)
	r.P50, r.P99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	measured := bound{G: cfg.Global}
	for i := range trackers {
		tr := &trackers[i]
		r.MaxPerKey = max(r.MaxPerKey, tr.max.Load())
		r.DoubleHolders += tr.overlaps.Load()
		if n := int(tr.handled.Load()); n > cfg.Messages || (!cut && n != cfg.Messages) {
			r.Miscounted++
		}
		w := time.Duration(tr.worked.Load())
		measured.Longest, measured.Work = max(measured.Longest, w), measured.Work+w
	}
	r.Bound = yardstick.Value()
	r.Efficiency = efficiency(r.Bound, elapsed)
	if r.Handled > 0 {
		r.Overshoot = time.Duration(overshoot.Load() / int64(r.Handled))
	}
	// Both are lower bounds of this run (its sleeps last at least their
	// latencies, its arrivals come no earlier than planned); the measured
	// one leaves out the arrival gaps, so take the larger.
	r.NetEfficiency = efficiency(max(r.Bound, measured.Value()), elapsed)
	if slices.Contains(m.Lanes, "session") {
		st := ks.Stats()
		r.KeysAlive, r.Evictions = ks.Len(), st.Evicted
	}
	if naive != nil {
		alive, evicted, under := naive.len()
		r.KeysAlive, r.Evictions, r.EvictedUnder = alive, uint64(evicted), under
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.HeapBytes = ms.HeapAlloc
	return r
}

// sleep waits d, or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	return clock.Sleep(ctx, d, nil)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// startProgress writes a progress line to w every period, overwriting it
// with \r, until the returned function is called (which clears the line).
func startProgress(w io.Writer, period time.Duration, name string, total int, handled, inFlight *atomic.Int64) (stop func()) {
	if w == nil || period <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				fmt.Fprintf(w, "\r%-78s\r", "")
				return
			case <-tick.C:
				fmt.Fprintf(w, "\r%-16s %6d/%d handled, %4d in flight, %6.1fs", name, handled.Load(), total, inFlight.Load(), time.Since(start).Seconds())
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// report is the -json output.
type report struct {
	Config  config       `json:"config"`
	Bound   bound        `json:"bound"` // the terms of the ideal schedule's bound
	Results []result     `json:"results"`
	Speedup float64      `json:"speedup"`                     // session+global throughput / global-1 throughput (0: global-1 not run)
	Mixed   *mixedReport `json:"mixed,omitempty"`             // the gateway scenario
	Tenant  *mixedReport `json:"mixed_tenant_cron,omitempty"` // every tenant's cron (-mixed-tenant-cron)
	OK      bool         `json:"ok"`
}

// scaleDefaults are what -scale gives the flags not set on the command
// line: 10,000 threads of 10 messages, all queued at the start, and a global
// capacity that makes the ideal schedule about 5 s at 20,000 messages a
// second, which two cores sustain with room to spare. The latency is a
// trade: a Go timer wakes its sleeper late (0.5 ms on a quiet machine, a
// few ms on a busy one), which costs lateness/latency of the ideal, while
// the run's last messages end spread over one latency, which costs about
// latency/2 of the 5 s; 100 ms keeps both near 1%. Microsecond work would
// measure the timer, not the lanes.
var scaleDefaults = map[string]string{
	"keys": "10000", "messages": "10", "latency": "100ms", "global": "2000", "duration": "2m", "defects": "false",
}

const usageHead = `lanesim: simulated chat traffic through per-thread lanes, the serialising bug and two wrong fixes.

usage: lanesim [flags]

Simulates a chat gateway: threads on channels send messages, each handled by
a simulated model call (a timer of the seeded latency), through one global
lane of capacity 1 (the serialising bug: slow), through a per-thread session
lane plus a global lane (the fix), and, with -defects (the default), through
the two wrong fixes: the global lane alone (a thread's messages run at once
and out of order) and a naive map of one mutex per thread that drops idle
entries (it lets two holders of one thread in: a caller waiting for an
entry's mutex is not counted, so the entry is dropped under it and the
thread's next caller makes a new one). -scale runs it at 10,000 threads;
-mixed adds a chat gateway in simulated time: the user turns of unequal tenants
beside the gateway's cron storms, under priorities, fair share and the two
composed; -mixed-tenant-cron adds the tenants sending cron jobs of their own.

`

const legend = `
the table (-v adds a second one; -json has every figure):
  run           global-1 (bug), session+global (the fix), global only, naive map+global (the
                two wrong fixes, with -defects)
  handled       messages handled within -duration (a line under the table counts the rest)
  time          the run's makespan: from the first message queued to the last done
  of ideal      ideal time / time: the run against the ideal schedule (below)
  p50, p99      latency, from a message's arrival to the end of its handler
  in flight     most handlers seen at once: at most -global, 1 for global-1; when there are
                more threads than -global, the global lane fills up and caps the run
  two at once   messages started while another message of their thread ran (0 for
                global-1 and session+global)
  out of order  messages started before the previous one of their thread ended (0 for those two)
the second table (-v):
  msgs/s          throughput
  max per thread  most handlers seen at once for one thread (1 for global-1 and session+global)
  timer lateness  how long a simulated model call lasted beyond its seeded latency, on
                  average: the Go timer's lateness on this machine, not the lanes'
  keys left       per-thread entries after the run (session lane, naive map)
  evictions       per-thread entries dropped
  heap            live heap after the run and a GC

the ideal schedule: the shortest makespan any scheduler could reach with the
run's seeded latencies, a thread's messages one after the other in order and
at most -global at once, is NP-hard to compute; lanesim uses the standard
LOWER bound on it, max(the slowest thread's messages back to back, total work
/ global). So "of ideal" is at most 100% for a mode that keeps per-thread
order, and near 100% means hardly any schedule could do better. "global only"
and the naive map break that order and may beat the first term. A line under
the table also gives session+global's share on the work as the sleeps really
lasted, which leaves the timer's lateness out.

-mixed: a chat gateway. Each thread of a tenant has a session (a key of the
session lane) for its user turns; the gateway's own cron jobs, in a fair-share
group of their own ("cron"), have a session each; all of them share one global
lane, which two cron storms overload. It runs in simulated time on the
library's lanes: the same seed, the same figures; each run is made 10 times
(seeds -seed to -seed+9) and the messages pooled, since the small tenant sends
about ten user turns a run. Runs: fifo; priorities (the global lane serves
user turns, then heartbeats, then cron jobs, with aging so that cron jobs
still run); fair share (the global lane shares itself equally between the
groups, each tenant and cron, FIFO within each); split lanes (the old advice:
priorities on the session lane, fair share on the global one); prio + fair,
one lane (the global lane made with both: by priority, then by group, then
FIFO); the small tenant alone. Cells are the p99 wait, arrival to global
permit, per class and per tenant (a tenant's own messages). The goal (issue
23): on the one lane, the user turns' p99 wait (all tenants') and the small
tenant's each at most 1.2x the better of priorities alone and fair share
alone: PASS or MISS; then the small tenant's p50 wait, where fair share within
the user turns' band shows. Older targets, on latency: user turns' p99 with
priorities at most half of fifo's; the small tenant's p99 with fair share at
most twice its p99 alone. A missed goal or target is reported, not an exit
status of 1.
-mixed-tenant-cron: the same runs and goal, with every thread of a tenant
also sending heartbeats and a cron job of its own, in its tenant's group, so
that the small tenant's p99 covers its own cron jobs, which priority first
puts behind everyone's user turns; it adds the small tenant's waits by class.
`

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lanesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := defaultConfig()
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "chat threads (keys)")
	fs.IntVar(&cfg.Channels, "channels", cfg.Channels, fmt.Sprintf("channels the threads are spread over (1-%d)", len(channelNames)))
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "messages per thread")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "mean simulated model latency per message")
	fs.Float64Var(&cfg.Jitter, "jitter", cfg.Jitter, "latency varies uniformly by ± this fraction (0-1)")
	fs.DurationVar(&cfg.Gap, "gap", cfg.Gap, "mean gap between a thread's messages (0: all queued at the start)")
	fs.Int64Var(&cfg.Global, "global", cfg.Global, "capacity of the global lane (session+global, global only, naive map)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "cap on the run time of each configuration")
	fs.DurationVar(&cfg.Idle, "idle", cfg.Idle, "idle timeout of the session lane's keys (0: drop a key as soon as nobody uses it)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the simulated latencies and gaps")
	fs.BoolVar(&cfg.Defects, "defects", cfg.Defects, "also run the two wrong fixes: the global lane alone (unordered) and the naive map\n(two holders)")
	fs.BoolVar(&cfg.Scale, "scale", false, "the scale run: -keys 10000 -messages 10 -latency 100ms -global 2000 -duration 2m\n-defects=false (flags given explicitly win), without global-1")
	mixed := fs.Bool("mixed", false, "then a chat gateway (simulated time): user turns of a tenant with 500 threads\nand one with 5 beside the gateway's cron storms, on FIFO lanes, with priorities,\nwith fair share, with the two on separate lanes, with the two composed on one\nlane, and the small tenant alone")
	tenantCron := fs.Bool("mixed-tenant-cron", false, "also (implies -mixed) the same runs with every tenant's threads sending\nheartbeats and cron jobs of their own, in the tenant's group")
	provider := fs.Bool("provider", false, "instead, a model API whose real limit steps and drifts, behind fixed limits\nand adaptive controllers; then one with concurrency, requests and tokens per\nminute limits and Retry-After, behind the lanes, fixed limits and a naive retry\nloop (simulated time, see provider.go and ratelimits.go)")
	more := fs.Bool("v", false, "also a second table: throughput, the most handlers of one thread at once, the\ntimers' lateness, the per-thread map's entries and evictions, the heap")
	asJSON := fs.Bool("json", false, "print the results as JSON (every figure)")
	quiet := fs.Bool("quiet", false, "no progress line (there is one only when stderr is a terminal)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), legend)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lanesim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *provider {
		// The provider's runs take only these: any other flag would be
		// ignored, a run other than the one asked for.
		var other []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "provider", "seed", "json", "quiet":
			default:
				other = append(other, "-"+f.Name)
			}
		})
		if len(other) > 0 {
			fmt.Fprintf(stderr, "lanesim: %s: not used with -provider, which takes -seed and -json\n", strings.Join(other, ", "))
			return 2
		}
		return runProvider(cfg.Seed, *asJSON, stdout, stderr)
	}
	if cfg.Scale {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range scaleDefaults {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					panic(err) // the defaults above parse
				}
			}
		}
	}
	for _, c := range []struct {
		bad  bool
		flag string
		want string
	}{
		{cfg.Keys < 1, "-keys", "must be at least 1"},
		{cfg.Messages < 1, "-messages", "must be at least 1"},
		{cfg.Global < 1, "-global", "must be at least 1"},
		{cfg.Duration <= 0, "-duration", "must be positive"},
		{cfg.Latency <= 0, "-latency", "must be positive (the ideal schedule is measured in it)"},
		{cfg.Gap < 0, "-gap", "must not be negative"},
		{cfg.Idle < 0, "-idle", "must not be negative"},
	} {
		if c.bad {
			fmt.Fprintf(stderr, "lanesim: %s %s\n", c.flag, c.want)
			return 2
		}
	}
	switch {
	case cfg.Channels < 1 || cfg.Channels > len(channelNames):
		fmt.Fprintf(stderr, "lanesim: -channels must be in [1, %d]\n", len(channelNames))
		return 2
	case cfg.Jitter < 0 || cfg.Jitter > 1:
		fmt.Fprintln(stderr, "lanesim: -jitter must be in [0, 1]")
		return 2
	}
	progress := progressTo(stderr, *quiet)
	ctx := context.Background()
	rep := simulateAll(ctx, cfg, progress)
	if *mixed || *tenantCron {
		mc := defaultMixed()
		mc.Seed = cfg.Seed
		mr, err := simulateMixedAll(mc)
		if err != nil {
			fmt.Fprintln(stderr, "lanesim: -mixed:", err)
			return 1
		}
		rep.Mixed = &mr
		rep.OK = rep.OK && mr.OK
		if *tenantCron {
			tr, err := simulateMixedAll(tenantCronMixed(mc))
			if err != nil {
				fmt.Fprintln(stderr, "lanesim: -mixed-tenant-cron:", err)
				return 1
			}
			rep.Tenant = &tr
			rep.OK = rep.OK && tr.OK
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "lanesim:", err)
			return 1
		}
	} else {
		printTable(stdout, rep, *more)
		for _, mr := range []*mixedReport{rep.Mixed, rep.Tenant} {
			if mr != nil {
				fmt.Fprintln(stdout)
				printMixed(stdout, *mr)
			}
		}
	}
	if !rep.OK {
		fmt.Fprintln(stderr, "lanesim: FAIL: a per-thread lane let a thread run twice at once or out of order, or a message was lost or handled twice")
		return 1
	}
	return 0
}

// simulateAll runs every mode of cfg in turn: global-1 (not at scale, where
// it would take the whole work end to end), session+global, and with
// cfg.Defects the global lane alone and the naive map.
func simulateAll(ctx context.Context, cfg config, progress io.Writer) report {
	var modes []mode
	if !cfg.Scale {
		modes = append(modes, modeGlobal1)
	}
	modes = append(modes, modeSession)
	if cfg.Defects {
		modes = append(modes, modeUnsafe, modeNaive)
	}
	rep := report{Config: cfg, Bound: planBound(&cfg, cfg.Global), OK: true}
	for _, m := range modes {
		r := simulate(ctx, cfg, m, progress)
		rep.Results = append(rep.Results, r)
		rep.OK = rep.OK && r.ok()
	}
	g1, sg := rep.find(modeGlobal1.Name), rep.find(modeSession.Name)
	if g1 != nil && sg != nil && g1.Throughput > 0 {
		rep.Speedup = sg.Throughput / g1.Throughput
	}
	return rep
}

// find returns the result of the mode named, or nil.
func (rep *report) find(name string) *result {
	for i := range rep.Results {
		if rep.Results[i].Mode == name {
			return &rep.Results[i]
		}
	}
	return nil
}

// short formats d with three significant digits or so.
func short(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0fµs", float64(d)/1e3)
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// width is the widest line the table and the lines around it take: a
// terminal of 100 columns shows them unwrapped.
const width = 100

// para writes text as one paragraph, wrapped at spaces to lines of at most
// width columns (runes), the lines after the first prefixed with indent.
func para(w io.Writer, indent, text string) {
	line, prefix := "", ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = prefix + word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width:
			fmt.Fprintln(w, line)
			prefix = indent
			line = prefix + word
		default:
			line += " " + word
		}
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

// printTable writes the runs of rep: a table of what a newcomer checks
// first (time, latency, the global lane's use, the per-thread guarantees),
// a short legend, and what the figures say in words. more adds a second
// table with the rest (throughput, timer lateness, the per-thread map's
// entries, the heap); -json has every figure.
func printTable(w io.Writer, rep report, more bool) {
	c := rep.Config
	arrive := "all queued at the start"
	if c.Gap > 0 {
		arrive = fmt.Sprintf("a mean %v apart", c.Gap)
	}
	para(w, "  ", fmt.Sprintf("lanesim: %d chat threads on %d channels, %d messages each (%d), %s.",
		c.Keys, c.Channels, c.Messages, c.Keys*c.Messages, arrive))
	para(w, "  ", fmt.Sprintf("Each message is a simulated model call of %v ±%.0f%%; the global lane allows %d at once.",
		c.Latency, c.Jitter*100, c.Global))
	b := rep.Bound
	work := b.Work
	if b.G > 0 {
		work /= time.Duration(b.G)
	}
	para(w, "  ", fmt.Sprintf("Ideal schedule: at least %s (slowest thread alone: %s; all the work over %d at once: %s).",
		short(b.Value()), short(b.Longest), b.G, short(work)))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\thandled\ttime\tof ideal\tp50\tp99\tin flight\ttwo at once\tout of order")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n",
			r.Mode, r.Handled, short(r.Elapsed), percent(r.Efficiency), short(r.P50), short(r.P99),
			r.MaxGlobal, r.DoubleHolders, r.OrderViolations)
	}
	tw.Flush()
	fmt.Fprintln(w)
	para(w, "", tableLegend)
	if more {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "run\tmsgs/s\tmax per thread\ttimer lateness\tkeys left\tevictions\theap")
		for _, r := range rep.Results {
			keys, ev := "-", "-"
			if r.KeysAlive >= 0 {
				keys, ev = fmt.Sprint(r.KeysAlive), fmt.Sprint(r.Evictions)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%d\t%s\t%s\t%s\t%.1f MiB\n",
				r.Mode, r.Throughput, r.MaxPerKey, short(r.Overshoot), keys, ev, float64(r.HeapBytes)/(1<<20))
		}
		tw.Flush()
		fmt.Fprintln(w)
		para(w, "", moreLegend)
	}
	fmt.Fprintln(w)
	for _, r := range rep.Results {
		if r.Incomplete > 0 {
			para(w, "  ", fmt.Sprintf("%s: %d of %d messages handled; -duration cut the rest off.", r.Mode, r.Handled, r.Messages))
		}
		if r.Miscounted > 0 {
			para(w, "  ", fmt.Sprintf("%s: %d threads lost a message or handled one twice.", r.Mode, r.Miscounted))
		}
	}
	sg := rep.find(modeSession.Name)
	if sg != nil {
		switch {
		case int64(c.Keys) <= c.Global:
			para(w, "  ", fmt.Sprintf("global lane: at most %d in flight of capacity %d: %d threads never fill it (-global below %d does).",
				sg.MaxGlobal, c.Global, c.Keys, c.Keys))
		case sg.MaxGlobal == c.Global:
			para(w, "  ", fmt.Sprintf("global lane: at most %d in flight of capacity %d, though %d threads had work: it capped the run.",
				sg.MaxGlobal, c.Global, c.Keys))
		default:
			para(w, "  ", fmt.Sprintf("global lane: at most %d in flight of capacity %d, with %d threads.", sg.MaxGlobal, c.Global, c.Keys))
		}
	}
	if u := rep.find(modeUnsafe.Name); u != nil {
		para(w, "  ", fmt.Sprintf("global only: %d messages ran beside another of their thread, %d out of order.",
			u.DoubleHolders, u.OrderViolations))
	}
	if n := rep.find(modeNaive.Name); n != nil {
		para(w, "  ", fmt.Sprintf("naive map: %d messages ran beside another of their thread; %d of %d evictions hit a waiter.",
			n.DoubleHolders, n.EvictedUnder, n.Evictions))
	}
	if sg != nil && sg.Incomplete == 0 {
		para(w, "  ", fmt.Sprintf("session+global: %s of the ideal schedule, %s leaving out timer lateness (%s a message).",
			percent(sg.Efficiency), percent(sg.NetEfficiency), short(sg.Overshoot)))
	}
	if rep.Speedup > 0 {
		para(w, "  ", fmt.Sprintf("session+global: %.1fx the throughput of global-1 (ideal: min(threads, global) = %d).",
			rep.Speedup, min(int64(c.Keys), c.Global)))
	} else if c.Scale {
		para(w, "  ", fmt.Sprintf("global-1 is not run at scale: one message at a time, it would take the whole work, %s.", short(b.Work)))
	}
	if rep.OK {
		para(w, "  ", "per-thread lanes: one handler per thread at a time, in order, every message handled once: OK")
	}
}

// tableLegend follows the table; -h has the long one.
const tableLegend = `time: first message queued to last done. of ideal: ideal time ÷ time.
p50, p99: a message's wait plus its model call. in flight: most messages handled at once. two at
once: messages started while another of their thread ran. out of order: messages started before
their thread's previous one ended. -v: more columns; -h: more on each.`

// moreLegend follows -v's second table.
const moreLegend = `msgs/s: messages handled per second. max per thread: most handlers of one
thread at once. timer lateness: how much longer a model call's timer took than its latency, on
average (this machine's timers, not the lanes). keys left: per-thread entries after the run
(session lane, naive map); evictions: entries dropped. heap: live heap after the run and a GC.`
