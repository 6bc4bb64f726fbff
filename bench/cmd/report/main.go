// Command report runs the side-by-side benchmarks of bench/, feeds the
// output to benchstat, and regenerates docs/benchmarks.md and the charts
// docs/bench-*.svg from the medians of that one run. `make bench-report`
// calls it; run it from the bench/ directory:
//
//	go run ./cmd/report                          # -count 10, -benchtime 1s
//	COUNT=1 BENCHTIME=100ms go run ./cmd/report  # a quick check of the pipeline
//	go run ./cmd/report -raw results/bench.txt   # re-render from a saved run
//
// Flags take precedence over the environment (COUNT, BENCHTIME, BENCH,
// BENCHSTAT). The raw output of the run is kept in results/bench.txt, so
// that anyone can feed it to benchstat again.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// benchstatVersion pins the benchstat that reads the run (golang.org/x/perf
// has no tagged releases). BENCHSTAT overrides the whole package@version.
const benchstatVersion = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

type config struct {
	count     int
	benchtime string
	bench     string
	raw       string // existing output to render; empty: run the benchmarks
	out       string // where the raw output of a run goes
	docs      string
	benchstat string
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "report: "+format+"\n", args...) }
	count, err := strconv.Atoi(env("COUNT", "10"))
	if err != nil {
		log("COUNT: %v", err)
		os.Exit(2)
	}
	var c config
	flag.IntVar(&c.count, "count", count, "benchmark repetitions (-count); env COUNT")
	flag.StringVar(&c.benchtime, "benchtime", env("BENCHTIME", "1s"), "go test -benchtime; env BENCHTIME")
	flag.StringVar(&c.bench, "bench", env("BENCH", "."), "go test -bench regexp; env BENCH")
	flag.StringVar(&c.raw, "raw", "", "render this saved `go test -bench` output instead of running")
	flag.StringVar(&c.out, "out", filepath.Join("results", "bench.txt"), "file for the raw output of the run")
	flag.StringVar(&c.docs, "docs", filepath.Join("..", "docs"), "directory of benchmarks.md and the charts")
	flag.StringVar(&c.benchstat, "benchstat", env("BENCHSTAT", benchstatVersion), "benchstat package@version for go run")
	flag.Parse()
	if err := run(c, log); err != nil {
		log("%v", err)
		os.Exit(1)
	}
}

// info describes the run for the header of the report.
type info struct {
	machine, cpus, goVersion, commit, date, command, makeCommand string
	count                                                        int
	benchtime                                                    string
	quick                                                        bool
}

func run(c config, log func(string, ...any)) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run me from the bench/ directory (make bench-report does)")
	}
	in := gather(c)
	raw := c.raw
	if raw == "" {
		raw = c.out
		if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
			return err
		}
		log("running: %s", in.command)
		if err := runBenchmarks(c, raw, in); err != nil {
			return err
		}
	}
	f, err := os.Open(raw)
	if err != nil {
		return err
	}
	res, err := parse(f)
	f.Close()
	if err != nil {
		return err
	}
	if len(res.order) == 0 {
		return fmt.Errorf("%s holds no benchmark results", raw)
	}
	if c.raw != "" {
		in = in.from(res, c)
	}
	log("benchstat: go run %s -col /impl %s", c.benchstat, raw)
	// Only benchstat's standard output goes on the page: go run's own
	// messages ("go: downloading ...") go to standard error, shown on failure.
	var bsStderr bytes.Buffer
	bsCmd := exec.Command("go", "run", c.benchstat, "-col", "/impl", raw)
	bsCmd.Stderr = &bsStderr
	bs, bsErr := bsCmd.Output()
	if bsErr != nil {
		log("benchstat failed (%v); the report says so and goes on", bsErr)
		bs = append([]byte(fmt.Sprintf("benchstat failed: %v\n%s", bsErr, bsStderr.Bytes())), bs...)
	}
	if err := os.MkdirAll(c.docs, 0o755); err != nil {
		return err
	}
	files, err := charts(res, c.docs)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	vs := evaluate(res)
	doc := render(in, res, vs, string(bs), files, c)
	path := filepath.Join(c.docs, "benchmarks.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	var n [4]int
	for _, v := range vs {
		n[v.status]++
	}
	log("wrote %s and %s: targets met %d, not met %d, not measured %d, reported %d",
		path, strings.Join(files, ", "), n[met], n[notMet], n[missing], n[reported])
	return nil
}

func (c config) goTestArgs() []string {
	return []string{"test", "-run", "^$", "-bench", c.bench, "-benchmem",
		"-count", strconv.Itoa(c.count), "-benchtime", c.benchtime, "-timeout", "0", "."}
}

// coreBench is a benchmark of the core module's own, with no peer to
// compare with, whose figure a target needs: the run takes it with the
// same -count and -benchtime, from the core module's directory (..).
type coreBench struct {
	name string // the top-level name, without Benchmark: what -bench is matched against
	pkg  string // the package, relative to the core module's root
	// rows, if set, narrows the run to these sub-benchmarks: go test's
	// -bench levels below the top one, joined by "/" (empty: all of them).
	rows string
}

// coreBenches are run after the harness: adaptive's report, the cost of
// reporting an outcome (issue 16); and semaphore's in-package rows that
// issue 27 judges against their own FIFO or untimed row, the histograms
// on and off and the priorities beside FIFO, at capacity 1 and 32
// goroutines (the other rows of those benchmarks are in
// docs/benchmarks-policies.md).
var coreBenches = []coreBench{
	{name: "Report", pkg: "./adaptive/"},
	{name: "Timings", pkg: "./semaphore/", rows: "^case=cap1-g32$/^hist=(off|on)$"},
	{name: "Priorities", pkg: "./semaphore/", rows: "ctx=/^cap=1$/^g=32$"},
}

// pattern is b's -bench argument.
func (b coreBench) pattern() string {
	p := "^Benchmark" + b.name + "$"
	if b.rows != "" {
		p += "/" + b.rows
	}
	return p
}

// coreRuns returns the go test arguments of the core benchmarks that the
// run's -bench selects: those whose name its first level matches, as go
// test matches it, with the Benchmark prefix (the default "." selects them
// all).
func (c config) coreRuns() [][]string {
	first, _, _ := strings.Cut(c.bench, "/")
	re, err := regexp.Compile(first)
	if err != nil {
		return nil // go test reports the bad regexp
	}
	var out [][]string
	for _, b := range coreBenches {
		if re.MatchString("Benchmark" + b.name) {
			out = append(out, []string{"test", "-run", "^$", "-bench", b.pattern(), "-benchmem",
				"-count", strconv.Itoa(c.count), "-benchtime", c.benchtime, "-timeout", "0", b.pkg})
		}
	}
	return out
}

// command is the run's commands as a shell line, from bench/.
func (c config) command() string {
	cmd := "cd bench && go " + shellJoin(c.goTestArgs())
	for _, args := range c.coreRuns() {
		cmd += " && (cd .. && go " + shellJoin(args) + ")"
	}
	return cmd
}

// runBenchmarks runs the harness, streaming its output to stderr and to
// the file raw, after lines that record the facts of the run.
func runBenchmarks(c config, raw string, in info) error {
	f, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, kv := range [][2]string{
		{"machine", in.machine}, {"cpus", in.cpus}, {"go", in.goVersion}, {"commit", in.commit},
		{"date", in.date}, {"count", strconv.Itoa(c.count)}, {"benchtime", c.benchtime},
		{"bench", c.bench}, {"command", in.command},
	} {
		fmt.Fprintf(f, "lanes-%s: %s\n", kv[0], kv[1])
	}
	cmd := exec.Command("go", c.goTestArgs()...)
	cmd.Stdout = io.MultiWriter(f, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -bench: %w", err)
	}
	for _, args := range c.coreRuns() {
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Stdout = io.MultiWriter(f, os.Stderr)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go test -bench %s: %w", args[len(args)-1], err)
		}
	}
	return f.Close()
}

func gather(c config) info {
	in := info{
		count:     c.count,
		benchtime: c.benchtime,
		date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		cpus:      strconv.Itoa(runtime.NumCPU()),
		machine:   "unknown",
	}
	if out, err := exec.Command("nproc").Output(); err == nil {
		in.cpus = strings.TrimSpace(string(out))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				in.machine = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		in.goVersion = strings.TrimSpace(string(out))
	}
	in.commit = "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		in.commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			in.commit += "-dirty"
		}
	}
	in.command = c.command()
	in.makeCommand = fmt.Sprintf("make bench-report COUNT=%d BENCHTIME=%s", c.count, c.benchtime)
	if c.bench != "." {
		in.makeCommand += " BENCH='" + c.bench + "'"
	}
	d, err := time.ParseDuration(c.benchtime)
	in.quick = c.count < 10 || (err == nil && d < time.Second) || c.bench != "."
	return in
}

// from returns the facts of the run recorded in a saved output, in place
// of those of the rendering (an output saved without them is taken as a
// quick check of unknown settings).
func (in info) from(r *results, c config) info {
	m := r.meta
	get := func(k, def string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return def
	}
	in.machine, in.cpus, in.goVersion = get("machine", in.machine), get("cpus", in.cpus), get("go", in.goVersion)
	in.commit, in.date = get("commit", "unknown"), get("date", "unknown")
	in.command = get("command", "unknown (rendered from "+c.raw+")")
	in.count = r.maxCount()
	in.benchtime = get("benchtime", "unknown")
	bench := get("bench", ".")
	in.makeCommand = fmt.Sprintf("make bench-report COUNT=%d BENCHTIME=%s", in.count, in.benchtime)
	d, err := time.ParseDuration(in.benchtime)
	in.quick = in.count < 10 || err != nil || d < time.Second || bench != "."
	return in
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$*?[]|() ") {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
