// Command lockbench compares per-key distributed locks on one redis-server:
// lanes' redislane.Keyed (per-key capacity 1), go-redsync/redsync and
// bsm/redislock, one after another, with the same contenders, and prints one
// table.
//
// It starts a redis-server of its own on a free loopback port (persistence
// off) unless -redis is given. For each lock it starts -procs copies of
// itself (children), each with its own go-redis client and lock instance
// and -contenders goroutines that loop: lock the one key, hold it for
// -hold, unlock. The parent merges the children's logs and prints, per lock:
// grants per second, the p50 and p99 of the wait, the longest wait (also
// counting the waits still going on when the run ends), Redis commands sent
// per grant (a go-redis hook on every client), the most holders at once
// (an oracle over every process's log: it must never exceed 1) and how many
// contenders got no grant at all. It exits with status 1 if a lock let two
// holders in.
//
//	go run ./cmd/lockbench                                   # 4 x 25, hold 10 ms, 10 s per lock
//	go run ./cmd/lockbench -impls lanes,redsync -duration 3s
//	go run ./cmd/lockbench -inproc                           # goroutine groups instead of processes
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/bench/redispeers/lockbench"
	"github.com/sessionlane/lanes/redislane/redistest"
)

func main() {
	var cfg lockbench.Config
	child := flag.Bool("child", false, "internal: run one group of -impl and report it on stdout")
	implName := flag.String("impl", "", "internal: the lock of a child")
	impls := flag.String("impls", "", "comma-separated locks to run (default: all): "+strings.Join(names(), ","))
	inproc := flag.Bool("inproc", false, "run the groups as goroutine groups of this process instead of processes")
	flag.IntVar(&cfg.Groups, "procs", 4, "processes (groups of contenders)")
	flag.IntVar(&cfg.Contenders, "contenders", 25, "contenders per process")
	flag.DurationVar(&cfg.Hold, "hold", 10*time.Millisecond, "how long a holder keeps the lock")
	flag.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "lease (lanes) or expiry (redsync, redislock) of the lock")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long each lock runs")
	flag.StringVar(&cfg.Addr, "redis", "", "Redis address (default: start a redis-server of its own)")
	flag.StringVar(&cfg.Key, "key", "", "internal: the key of a child's run")
	flag.Parse()

	if *child {
		if err := runChild(*implName, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "lockbench child:", err)
			os.Exit(2)
		}
		return
	}
	ok, err := runParent(cfg, *impls, *inproc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func names() []string {
	var ns []string
	for _, im := range lockbench.Impls() {
		ns = append(ns, im.Name)
	}
	return ns
}

func runParent(cfg lockbench.Config, implList string, inproc bool) (bool, error) {
	var impls []lockbench.Impl
	if implList == "" {
		impls = lockbench.Impls()
	} else {
		for _, n := range strings.Split(implList, ",") {
			im, err := lockbench.ImplByName(strings.TrimSpace(n))
			if err != nil {
				return false, err
			}
			impls = append(impls, im)
		}
	}
	own := ""
	if cfg.Addr == "" {
		srv, err := redistest.Start()
		if err != nil {
			return false, err
		}
		defer srv.Stop()
		cfg.Addr, own = srv.Addr, " (own redis-server)"
	}
	how := "processes"
	if inproc {
		how = "goroutine groups"
	}
	fmt.Printf("lockbench: %d %s x %d contenders on one key, hold %v, TTL %v, %v per lock, redis %s%s\n",
		cfg.Groups, how, cfg.Contenders, cfg.Hold, cfg.TTL, cfg.Duration, cfg.Addr, own)
	printFacts(cfg.Addr)
	fmt.Println()

	var results []lockbench.Result
	ok := true
	for _, im := range impls {
		c := cfg
		c.Key = fmt.Sprintf("lockbench-%s-%d-%d", im.Name, os.Getpid(), time.Now().UnixNano())
		var r lockbench.Result
		var err error
		if inproc {
			r, err = lockbench.RunInProcess(im, c)
		} else {
			r, err = runProcs(im, c)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", im.Name, err)
		}
		results = append(results, r)
		ok = ok && r.Exclusive()
	}
	fmt.Printf("load average after the runs: %s\n\n", loadavg())
	if err := lockbench.WriteTable(os.Stdout, results); err != nil {
		return false, err
	}
	return ok, nil
}

// printFacts prints what a reader needs to weigh the figures: machine, Go,
// commit, Redis, date, and how busy the machine was.
func printFacts(addr string) {
	fmt.Printf("machine: %s, %d CPUs, GOMAXPROCS %d; load average before: %s\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	fmt.Printf("go: %s %s/%s; commit: %s; redis-server %s; %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, commit(), redisVersion(addr), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return runtime.GOARCH
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	// The results that make bench-redis is writing do not count as a change.
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--",
		":(top)", ":(top,exclude)bench/results").Output()
	if err == nil && len(st) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

func redisVersion(addr string) string {
	rc := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rc.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// runProcs runs one lock with cfg.Groups children and merges their logs.
func runProcs(im lockbench.Impl, cfg lockbench.Config) (lockbench.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return lockbench.Result{}, err
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	procs := make([]*proc, cfg.Groups)
	for i := range procs {
		cmd := exec.Command(exe, "-child", "-impl", im.Name, "-redis", cfg.Addr, "-key", cfg.Key,
			"-contenders", strconv.Itoa(cfg.Contenders), "-procs", strconv.Itoa(cfg.Groups),
			"-hold", cfg.Hold.String(), "-ttl", cfg.TTL.String(), "-duration", cfg.Duration.String())
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return lockbench.Result{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return lockbench.Result{}, err
		}
		if err := cmd.Start(); err != nil {
			return lockbench.Result{}, err
		}
		procs[i] = &proc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	for i, p := range procs { // every child connected and warmed up
		line, err := p.out.ReadString('\n')
		if err != nil || line != "ready\n" {
			return lockbench.Result{}, fmt.Errorf("child %d did not start: %q %v", i, line, err)
		}
	}
	for _, p := range procs {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			return lockbench.Result{}, err
		}
	}
	reps := make([]lockbench.GroupReport, len(procs))
	for i, p := range procs {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			return lockbench.Result{}, fmt.Errorf("child %d: %v", i, err)
		}
		if err := json.Unmarshal(line, &reps[i]); err != nil {
			return lockbench.Result{}, fmt.Errorf("child %d: bad report: %v", i, err)
		}
		if err := p.cmd.Wait(); err != nil {
			return lockbench.Result{}, fmt.Errorf("child %d: %v", i, err)
		}
	}
	return lockbench.Summarize(im, cfg, reps), nil
}

// runChild is one process of a run: one group, started by the parent's
// "go" line, reported as one JSON line.
func runChild(implName string, cfg lockbench.Config) error {
	im, err := lockbench.ImplByName(implName)
	if err != nil {
		return err
	}
	g, err := lockbench.NewGroup(im, cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("no go signal: %q %v", line, err)
	}
	rep := g.Run()
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := json.NewEncoder(w).Encode(rep); err != nil {
		return err
	}
	return w.Flush()
}
