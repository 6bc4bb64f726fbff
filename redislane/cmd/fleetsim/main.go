// Command fleetsim runs a fleet of processes contending for one
// redislane.Weighted and checks, from every process's log, that the capacity
// was never exceeded.
//
// It starts -procs copies of itself (children) against one Redis (by
// default a redis-server of its own on a free loopback port, persistence
// off). Each child runs -contenders goroutines that loop: acquire -weight
// permits, hold them for -hold, release. Each child logs every grant: the
// system-wide monotonic time when Acquire returned and when Release was
// called (or the lease ended, if earlier), the weight and the fencing
// token. The parent merges the logs and prints the most weight ever in use
// at once against the capacity, grants per second, acquire latency p50/p99,
// Redis calls per grant (counted by a go-redis hook in each child), and the
// Redis server's CPU time per grant (INFO cpu, read before and after the
// run), the bound that one Redis core puts on grants per second, beside
// the children's own CPU time per grant (read by each, from the go signal
// to its last grant's end). It exits with status 1 if the capacity was exceeded or a fencing token repeats.
//
// -quota B runs the fleet twice against the same Redis, in one run: first
// without quota, as above, then with every instance leasing
// the capacity in blocks of B (redislane.WithQuota) and granting from
// them in process; it prints both and the ratio of their grants per
// second. Under quota the fencing tokens are the blocks' (shared by the
// grants of a block), so they are not checked for uniqueness.
//
// -mode=uncontended instead runs one process, one goroutine, acquiring and
// releasing in a loop, and reports the p50 of acquire+release in Redis round
// trips (the p50 of a PING).
//
// -provider instead runs, in one process, a fake model provider with
// limits on calls in flight, requests and tokens per window and 429s with
// retry-after-ms, and three replicas calling it through
// lanehttp.Transport over redislane lanes (tokens settled after each
// call, cooldowns for the fleet): first with one budget shared through
// Redis, then with a budget of a third for each replica, under an uneven
// load and an even one. It prints what the provider counted, in real
// time with the provider's minute scaled down to -window, and exits with
// status 1 if a window held more than the budget allows (see provider.go).
//
// -adaptive instead runs, in one process, a fake provider with a hidden
// limit on calls in flight, and the same callers through an
// adaptive.Controller over a redislane.Fleet spread over 1 instance and
// then 3, in alternating rounds, and prints each size's refusal rate and
// their ratio (see adaptive.go).
//
//	go run ./cmd/fleetsim                       # 4 x 25, capacity 10, 5 s
//	go run ./cmd/fleetsim -procs 8 -duration 10s -json
//	go run ./cmd/fleetsim -mode uncontended
//	go run ./cmd/fleetsim -capacity 1000 -contenders 250 -quota 50
//	go run ./cmd/fleetsim -provider             # 4 rows of 8 s, 1 s windows
//	go run ./cmd/fleetsim -adaptive             # refusals of 1 and 3 instances, 3 rounds each
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

type config struct {
	Mode       string        `json:"mode"`
	Procs      int           `json:"procs"`
	Contenders int           `json:"contenders"`
	Capacity   int64         `json:"capacity"`
	Weight     int64         `json:"weight"`
	Hold       time.Duration `json:"hold_ns"`
	Duration   time.Duration `json:"duration_ns"`
	Lease      time.Duration `json:"lease_ns"`
	Quarantine time.Duration `json:"quarantine_ns"`
	Redis      string        `json:"redis"`
	OwnRedis   bool          `json:"own_redis"`
	Name       string        `json:"name"`
	Protocol   int           `json:"resp"`
	Quota      int64         `json:"quota,omitempty"`
	ChildProcs int           `json:"child_gomaxprocs,omitempty"` // GOMAXPROCS of each child (0: Go's default)
	cpuprofile string
}

// grant is one line of a child's log.
type grant struct {
	Start int64 `json:"s"` // Acquire returned (system monotonic ns)
	End   int64 `json:"e"` // Release called, or the lease ended if earlier
	W     int64 `json:"w"`
	Fence int64 `json:"f"`
	Lat   int64 `json:"l"` // acquire latency, ns
}

// childReport is the last line of a child's output.
type childReport struct {
	Grants   []grant `json:"grants"`
	Calls    int64   `json:"calls"`
	CPU      int64   `json:"cpu_ns"` // the process's CPU time from the go signal to the last grant's end
	Errors   int     `json:"errors"`
	LeaseEnd int     `json:"lease_ended"`
	Stats    redislane.Stats
}

// Result is what the parent prints with -json.
type Result struct {
	Config         config  `json:"config"`
	MaxInUse       int64   `json:"max_in_use"`
	Capacity       int64   `json:"capacity"`
	CapacityHeld   bool    `json:"capacity_held"`
	Leased         *Result `json:"leased,omitempty"`  // -quota: the run with quota leasing
	Speedup        float64 `json:"speedup,omitempty"` // -quota: its grants/s over this run's
	FencesUnique   bool    `json:"fences_unique"`
	Grants         int     `json:"grants"`
	GrantsPerSec   float64 `json:"grants_per_sec"`
	AcquireP50Ms   float64 `json:"acquire_p50_ms"`
	AcquireP99Ms   float64 `json:"acquire_p99_ms"`
	AcquireMaxMs   float64 `json:"acquire_max_ms"`
	CallsPerGrant  float64 `json:"redis_calls_per_grant"`
	Errors         int     `json:"errors"`
	LeasesEnded    int     `json:"leases_ended"`
	Handovers      uint64  `json:"handovers"`
	Polls          uint64  `json:"polls"`
	CycleP50Us     float64 `json:"uncontended_cycle_p50_us,omitempty"`
	PingP50Us      float64 `json:"ping_p50_us,omitempty"`
	CycleRoundTrip float64 `json:"uncontended_cycle_p50_round_trips,omitempty"`
	ScriptUs       float64 `json:"redis_usec_per_script,omitempty"`
	RedisCPUUs     float64 `json:"redis_cpu_usec_per_grant,omitempty"`
	RedisBound     float64 `json:"redis_bound_grants_per_sec,omitempty"`
	ClientCPUUs    float64 `json:"client_cpu_usec_per_grant,omitempty"` // the children's CPU time over the run, all of them, per grant
}

func main() {
	var cfg config
	child := flag.Int("child", -1, "internal: run as child number n")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of each child to this path plus .<n> (-quota: the run with quota to this path plus -quota.<n>)")
	jsonOut := flag.Bool("json", false, "print the result as JSON")
	flag.StringVar(&cfg.Mode, "mode", "contended", "contended (a fleet of processes) or uncontended (one caller, round trips)")
	flag.IntVar(&cfg.Procs, "procs", 4, "processes")
	flag.IntVar(&cfg.Contenders, "contenders", 25, "goroutines per process")
	flag.Int64Var(&cfg.Capacity, "capacity", 10, "capacity of the semaphore")
	flag.Int64Var(&cfg.Weight, "weight", 1, "weight of each acquire")
	flag.DurationVar(&cfg.Hold, "hold", time.Millisecond, "how long a permit is held")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long the traffic runs")
	flag.DurationVar(&cfg.Lease, "lease", 2*time.Second, "lease of the permits")
	flag.DurationVar(&cfg.Quarantine, "quarantine", -1, "quarantine after the lane's state is created (default: 0 with a redis-server of its own, else the lease)")
	flag.StringVar(&cfg.Redis, "redis", "", "Redis address (default: start a redis-server of its own on a free loopback port)")
	flag.StringVar(&cfg.Name, "name", "", "lane name (default: a fresh one)")
	flag.IntVar(&cfg.Protocol, "resp", 3, "RESP version of the go-redis clients (2 or 3)")
	flag.IntVar(&cfg.ChildProcs, "child-gomaxprocs", 0, "GOMAXPROCS of each child process (0: Go's default, the machine's cores)")
	flag.Int64Var(&cfg.Quota, "quota", 0, "block of quota leasing (redislane.WithQuota): run without it, then with it, and compare (0: without only)")
	provider := flag.Bool("provider", false, "instead, a fake provider and three replicas calling it through lanehttp.Transport,\nwith a budget shared through Redis and one of a third per replica (see provider.go);\n-duration is then each row's (default 8s), -redis and -json apply")
	pc := defaultProv()
	flag.DurationVar(&pc.Window, "window", pc.Window, "-provider: the provider's window (its minute, scaled down)")
	flag.DurationVar(&pc.Margin, "margin", 33*time.Millisecond, "-provider: the fleet's lanes count a window this much longer than the provider's (default: redislane.DefaultWindow's two seconds in a minute, scaled to the 1s window)")
	flag.Int64Var(&pc.Requests, "rpw", pc.Requests, "-provider: the provider's requests per window (N)")
	flag.Int64Var(&pc.Tokens, "tpw", pc.Tokens, "-provider: the provider's tokens per window (T)")
	flag.Int64Var(&pc.Concurrency, "conc", pc.Concurrency, "-provider: the provider's calls in flight (C)")
	flag.IntVar(&pc.Busy, "busy", pc.Busy, "-provider: callers of the busy replica, uneven load")
	flag.IntVar(&pc.Even, "even", pc.Even, "-provider: callers of each replica, even load")
	flag.Uint64Var(&pc.Seed, "seed", pc.Seed, "-provider: seed of the calls' estimates and uses")
	ac := defaultAdaptiveConfig()
	adaptiveRun := flag.Bool("adaptive", false, "instead, 1 and then 3 instances sharing a redislane.Fleet moved by adaptive.Controller,\ncalling a fake provider of a hidden concurrency limit; compares their refusal rates (see adaptive.go);\n-duration is then each round's counted time (default 8s), -redis applies")
	flag.Int64Var(&ac.Limit, "limit", ac.Limit, "-adaptive: the provider's calls in flight")
	flag.IntVar(&ac.Callers, "callers", ac.Callers, "-adaptive: callers in all, spread over the instances")
	flag.DurationVar(&ac.Latency, "latency", ac.Latency, "-adaptive: a call's time at the provider")
	flag.IntVar(&ac.Rounds, "rounds", ac.Rounds, "-adaptive: rounds of each fleet size, alternating")
	flag.Parse()

	if *adaptiveRun {
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "duration" {
				ac.Measure = cfg.Duration
			}
		})
		ac.Redis = cfg.Redis
		rows, err := runAdaptive(ac)
		report(err, *jsonOut, struct {
			Rows    []adaptiveRow
			Verdict adaptiveVerdict
		}{rows, summarizeAdaptive(ac, rows)}, func() { printAdaptive(ac, rows) })
		return
	}

	if *provider {
		durSet := false
		flag.Visit(func(f *flag.Flag) { durSet = durSet || f.Name == "duration" })
		if durSet {
			pc.Duration = cfg.Duration
		}
		pc.Redis = cfg.Redis
		os.Exit(runProviderMain(pc, *jsonOut))
	}

	if *child >= 0 {
		if *cpuprofile != "" {
			f, err := os.Create(*cpuprofile + "." + strconv.Itoa(*child))
			if err == nil {
				_ = pprof.StartCPUProfile(f)
				defer pprof.StopCPUProfile()
			}
		}
		if err := runChild(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim child:", err)
			os.Exit(2)
		}
		return
	}
	cfg.cpuprofile = *cpuprofile
	res, err := runParent(&cfg)
	report(err, *jsonOut, res, func() { printResult(res) })
	for r := res; r != nil; r = r.Leased {
		if !r.CapacityHeld || !r.FencesUnique {
			os.Exit(1)
		}
	}
}

// report ends a run: an error exits with status 2; otherwise v is printed
// as JSON, or text prints it for people.
func report(err error, asJSON bool, v any, text func()) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim:", err)
		os.Exit(2)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	text()
}

func runParent(cfg *config) (*Result, error) {
	if cfg.Procs < 1 || cfg.Contenders < 1 || cfg.Capacity < 1 || cfg.Weight < 1 || cfg.Weight > cfg.Capacity {
		return nil, errors.New("need procs, contenders, capacity >= 1 and 1 <= weight <= capacity")
	}
	if cfg.Redis == "" {
		srv, err := redistest.Start()
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		cfg.Redis, cfg.OwnRedis = srv.Addr, true
	}
	if cfg.Quarantine < 0 {
		cfg.Quarantine = cfg.Lease
		if cfg.OwnRedis {
			cfg.Quarantine = 0 // a fresh server: no holder can predate it
		}
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("fleetsim-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	if cfg.Mode == "uncontended" {
		return runUncontended(cfg)
	}
	if cfg.Mode != "contended" {
		return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	if cfg.Quota > 0 {
		leased := *cfg
		base := *cfg
		base.Quota = 0
		res, err := runFleet(&base)
		if err != nil {
			return nil, err
		}
		leased.Name += "-quota"
		if leased.cpuprofile != "" {
			leased.cpuprofile += "-quota" // the run without keeps its own profiles
		}
		if res.Leased, err = runFleet(&leased); err != nil {
			return nil, err
		}
		if res.GrantsPerSec > 0 {
			res.Speedup = res.Leased.GrantsPerSec / res.GrantsPerSec
		}
		return res, nil
	}
	return runFleet(cfg)
}

// runFleet runs the contended fleet once.
func runFleet(cfg *config) (*Result, error) {
	// Create the lane's state (and sit out its quarantine) before the clock
	// starts.
	if err := warmUp(cfg); err != nil {
		return nil, err
	}

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	procs := make([]*proc, cfg.Procs)
	for i := range procs {
		cmd := exec.Command(exe, "-child", strconv.Itoa(i),
			"-redis", cfg.Redis, "-name", cfg.Name,
			"-contenders", strconv.Itoa(cfg.Contenders),
			"-capacity", strconv.FormatInt(cfg.Capacity, 10), "-weight", strconv.FormatInt(cfg.Weight, 10),
			"-hold", cfg.Hold.String(), "-duration", cfg.Duration.String(),
			"-lease", cfg.Lease.String(), "-quarantine", cfg.Quarantine.String(),
			"-cpuprofile", cfg.cpuprofile, "-resp", strconv.Itoa(cfg.Protocol),
			"-quota", strconv.FormatInt(cfg.Quota, 10))
		cmd.Stderr = os.Stderr
		if cfg.ChildProcs > 0 {
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cfg.ChildProcs))
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &proc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
		procs[i] = p
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	for i, p := range procs { // wait until every child is connected
		line, err := p.out.ReadString('\n')
		if err != nil || line != "ready\n" {
			return nil, fmt.Errorf("child %d did not start: %q %v", i, line, err)
		}
	}
	rc, _ := newClient(cfg)
	defer rc.Close()
	cpu0 := redisCPU(rc)
	for _, p := range procs {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			return nil, err
		}
	}
	reports := make([]childReport, len(procs))
	for i, p := range procs {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("child %d: %v", i, err)
		}
		if err := json.Unmarshal(line, &reports[i]); err != nil {
			return nil, fmt.Errorf("child %d: bad report: %v", i, err)
		}
		if err := p.cmd.Wait(); err != nil {
			return nil, fmt.Errorf("child %d: %v", i, err)
		}
	}
	res := summarize(cfg, reports)
	if cpu0 > 0 && res.Grants > 0 {
		// The children are done: what Redis spent since the go signal was
		// spent on this run's calls (and on nothing else, on a server of
		// its own).
		res.RedisCPUUs = (redisCPU(rc) - cpu0) * 1e6 / float64(res.Grants)
		if res.RedisCPUUs > 0 {
			res.RedisBound = 1e6 / res.RedisCPUUs
		}
	}
	return res, nil
}

// redisCPU returns the CPU time the Redis server has used (INFO cpu,
// system and user), in seconds, or 0 if it cannot tell.
func redisCPU(rc *redis.Client) float64 {
	info, err := rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				sum += x
			}
		}
	}
	return sum
}

func newClient(cfg *config) (*redis.Client, *redistest.Calls) {
	rc := redis.NewClient(&redis.Options{Addr: cfg.Redis, DisableIdentity: true, PoolSize: 64, Protocol: cfg.Protocol, ContextTimeoutEnabled: true})
	cc := &redistest.Calls{}
	rc.AddHook(cc)
	return rc, cc
}

func newWeighted(cfg *config, rc redis.UniversalClient) (*redislane.Weighted, error) {
	opts := []redislane.Option{redislane.WithLease(cfg.Lease), redislane.WithQuarantine(cfg.Quarantine)}
	if cfg.Quota > 0 {
		opts = append(opts, redislane.WithQuota(cfg.Quota))
	}
	return redislane.NewWeighted(rc, cfg.Name, cfg.Capacity, opts...)
}

func warmUp(cfg *config) error {
	rc, _ := newClient(cfg)
	defer rc.Close()
	s, err := newWeighted(cfg, rc)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Quarantine+30*time.Second)
	defer cancel()
	p, err := s.Acquire(ctx, 1)
	if err != nil {
		return fmt.Errorf("warm-up acquire: %w", err)
	}
	p.Release()
	return nil
}

func runChild(cfg config) error {
	rc, cc := newClient(&cfg)
	defer rc.Close()
	s, err := newWeighted(&cfg, rc)
	if err != nil {
		return err
	}
	defer s.Close()
	// Dial, load and subscribe before the clock starts: one grant (the
	// parent made the lane and sat out its quarantine), so that the first
	// grants of the run do not wait for a connection or a subscription.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	p, err := s.Acquire(wctx, 1)
	wcancel()
	if err != nil {
		return fmt.Errorf("warm-up acquire: %w", err)
	}
	p.Release()
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("no go signal: %q %v", line, err)
	}

	// Each contender's record is made before the clock starts and merged
	// after it stops, so that the clients' CPU figure is the lane's and the
	// contenders', not the harness's bookkeeping.
	locals := make([][]grant, cfg.Contenders)
	for i := range locals {
		locals[i] = make([]grant, 0, 1<<12)
	}
	cpu0 := processCPU()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	calls0 := cc.Commands()
	var (
		mu       sync.Mutex
		errs     int
		leaseEnd int
		wg       sync.WaitGroup
	)
	for i := range cfg.Contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := locals[i]
			var e, le int
			for ctx.Err() == nil {
				t0 := redistest.Now()
				p, err := s.Acquire(ctx, cfg.Weight)
				if err != nil {
					if ctx.Err() == nil {
						e++
					}
					continue
				}
				start := redistest.Now()
				time.Sleep(cfg.Hold) // the work the permit protects
				end := redistest.Now()
				if left := time.Until(p.Deadline()); left < 0 {
					end += int64(left)
					le++
				}
				p.Release()
				local = append(local, grant{Start: start, End: end, W: p.Weight(), Fence: p.Fence(), Lat: start - t0})
			}
			locals[i] = local
			mu.Lock()
			errs += e
			leaseEnd += le
			mu.Unlock()
		}()
	}
	wg.Wait()
	cpu := processCPU() - cpu0
	calls := cc.Commands() - calls0
	s.Close()
	var grants []grant
	for _, l := range locals {
		grants = append(grants, l...)
	}
	rep := childReport{Grants: grants, Calls: calls, CPU: cpu, Errors: errs, LeaseEnd: leaseEnd, Stats: s.Stats()}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := json.NewEncoder(w).Encode(rep); err != nil {
		return err
	}
	return w.Flush()
}

func summarize(cfg *config, reports []childReport) *Result {
	var all []grant
	var calls, cpu int64
	res := &Result{Config: *cfg, Capacity: cfg.Capacity}
	for _, r := range reports {
		all = append(all, r.Grants...)
		calls += r.Calls
		cpu += r.CPU
		res.Errors += r.Errors
		res.LeasesEnded += r.LeaseEnd
		res.Handovers += r.Stats.Handovers
		res.Polls += r.Stats.Polls
	}
	res.Grants = len(all)
	res.GrantsPerSec = float64(len(all)) / cfg.Duration.Seconds()
	res.MaxInUse = maxInUse(all)
	res.CapacityHeld = res.MaxInUse <= cfg.Capacity
	res.FencesUnique = cfg.Quota > 0 || fencesUnique(all) // under quota, a block's grants share its fence
	if len(all) > 0 {
		res.CallsPerGrant = float64(calls) / float64(len(all))
		res.ClientCPUUs = float64(cpu) / 1e3 / float64(len(all))
		lat := make([]int64, len(all))
		for i, g := range all {
			lat[i] = g.Lat
		}
		slices.Sort(lat)
		res.AcquireP50Ms = float64(redistest.Percentile(lat, 0.50)) / 1e6
		res.AcquireP99Ms = float64(redistest.Percentile(lat, 0.99)) / 1e6
		res.AcquireMaxMs = float64(lat[len(lat)-1]) / 1e6
	}
	return res
}

// maxInUse is the oracle over every process's grants (see redistest.MaxInUse).
func maxInUse(gs []grant) int64 {
	spans := make([]redistest.Span, len(gs))
	for i, g := range gs {
		spans[i] = redistest.Span{Start: g.Start, End: g.End, W: g.W}
	}
	return redistest.MaxInUse(spans)
}

func fencesUnique(gs []grant) bool {
	seen := make(map[int64]bool, len(gs))
	for _, g := range gs {
		if seen[g.Fence] {
			return false
		}
		seen[g.Fence] = true
	}
	return true
}

func runUncontended(cfg *config) (*Result, error) {
	rc, cc := newClient(cfg)
	defer rc.Close()
	s, err := newWeighted(cfg, rc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	for range 100 { // load the scripts, warm the connection
		p, err := s.Acquire(ctx, cfg.Weight)
		if err != nil {
			return nil, err
		}
		p.Release()
		if err := rc.Ping(ctx).Err(); err != nil {
			return nil, err
		}
	}
	var cycles, pings []int64
	_ = rc.ConfigResetStat(ctx).Err()
	calls0 := cc.Commands()
	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		t0 := time.Now()
		p, err := s.Acquire(ctx, cfg.Weight)
		if err != nil {
			return nil, err
		}
		p.Release()
		t1 := time.Now()
		if err := rc.Ping(ctx).Err(); err != nil {
			return nil, err
		}
		cycles = append(cycles, int64(t1.Sub(t0)))
		pings = append(pings, int64(time.Since(t1)))
	}
	calls := cc.Commands() - calls0 - int64(len(pings))
	scriptUs := evalshaMicros(ctx, rc)
	slices.Sort(cycles)
	slices.Sort(pings)
	res := &Result{Config: *cfg, Capacity: cfg.Capacity, CapacityHeld: true, FencesUnique: true, Grants: len(cycles)}
	res.GrantsPerSec = float64(len(cycles)) / cfg.Duration.Seconds()
	res.CallsPerGrant = float64(calls) / float64(len(cycles))
	res.CycleP50Us = float64(redistest.Percentile(cycles, 0.5)) / 1e3
	res.PingP50Us = float64(redistest.Percentile(pings, 0.5)) / 1e3
	res.CycleRoundTrip = res.CycleP50Us / res.PingP50Us
	res.MaxInUse = cfg.Weight
	res.ScriptUs = scriptUs
	return res, nil
}

// evalshaMicros returns the server's time per EVALSHA (INFO commandstats),
// or 0 if it cannot tell.
func evalshaMicros(ctx context.Context, rc *redis.Client) float64 {
	info, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				x, _ := strconv.ParseFloat(v, 64)
				return x
			}
		}
	}
	return 0
}

func printResult(r *Result) {
	printRun(r)
	if r.Leased != nil {
		fmt.Println()
		printRun(r.Leased)
		fmt.Printf("\nquota leasing (block %d): %.0f grants/s against %.0f/s without it: %.1fx\n",
			r.Leased.Config.Quota, r.Leased.GrantsPerSec, r.GrantsPerSec, r.Speedup)
	}
}

func printRun(r *Result) {
	c := r.Config
	own := ""
	if c.OwnRedis {
		own = " (own redis-server)"
	}
	if c.Mode == "uncontended" {
		fmt.Printf("fleetsim uncontended: 1 caller, weight %d, capacity %d, %v, redis %s%s\n", c.Weight, c.Capacity, c.Duration, c.Redis, own)
		fmt.Printf("  acquire+release p50: %.1f µs = %.2f round trips (PING p50 %.1f µs)\n", r.CycleP50Us, r.CycleRoundTrip, r.PingP50Us)
		fmt.Printf("  cycles: %d (%.0f/s), Redis calls per cycle: %.2f; time in Redis per script call: %.1f µs\n",
			r.Grants, r.GrantsPerSec, r.CallsPerGrant, r.ScriptUs)
		return
	}
	quota := ""
	if c.Quota > 0 {
		quota = fmt.Sprintf(", quota block %d", c.Quota)
	}
	if c.ChildProcs > 0 {
		quota += fmt.Sprintf(", GOMAXPROCS %d per process", c.ChildProcs)
	}
	fmt.Printf("fleetsim: %d procs x %d contenders, capacity %d, weight %d, hold %v, lease %v, %v%s, redis %s%s\n",
		c.Procs, c.Contenders, c.Capacity, c.Weight, c.Hold, c.Lease, c.Duration, quota, c.Redis, own)
	verdict := "OK"
	if !r.CapacityHeld {
		verdict = "EXCEEDED"
	}
	fmt.Printf("  most weight in use at once: %d of capacity %d  %s\n", r.MaxInUse, r.Capacity, verdict)
	fmt.Printf("  grants: %d (%.0f/s)\n", r.Grants, r.GrantsPerSec)
	fmt.Printf("  acquire latency: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", r.AcquireP50Ms, r.AcquireP99Ms, r.AcquireMaxMs)
	fmt.Printf("  Redis calls per grant: %.2f (grants handed over by pub/sub: %d; waits ended by the timer: %d)\n", r.CallsPerGrant, r.Handovers, r.Polls)
	fences := fmt.Sprint(r.FencesUnique)
	if c.Quota > 0 {
		fences = "not checked (a block's grants share its token)"
	}
	fmt.Printf("  fencing tokens unique: %s; acquire errors: %d; leases ended before release: %d\n", fences, r.Errors, r.LeasesEnded)
	if r.ClientCPUUs > 0 {
		fmt.Printf("  clients' CPU per grant: %.2f µs (all %d processes, over the run)\n", r.ClientCPUUs, c.Procs)
	}
	if r.RedisCPUUs > 0 {
		fmt.Printf("  Redis CPU per grant: %.1f µs, so one busy Redis core would give at most %.0f grants/s at this cost\n", r.RedisCPUUs, r.RedisBound)
	}
}
