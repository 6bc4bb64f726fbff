package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is a fragment of `go test -bench` output in the harness's naming.
const sample = `goos: linux
goarch: amd64
pkg: github.com/sessionlane/lanes/bench
BenchmarkSemaphore/ctx=bg/scenario=uncontended/impl=lanes-2   	100	 10.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=uncontended/impl=lanes-2   	100	 12.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=uncontended/impl=lanes-2   	100	 50.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=uncontended/impl=xsync-2   	100	 20.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap8-g2/impl=lanes-2       	100	 30.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap8-g2/impl=xsync-2       	100	 20.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap8-g4/impl=lanes-2       	100	 25.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkKeyedMemory/scenario=idle-100k/impl=lanes-idle0-2    	1	 5000000 ns/op	 0.04 B/key	 100 B/op	 3 allocs/op
BenchmarkGateway/cs=sleep50us/impl=global-2   	100	 1000000 ns/op	 1000 cs-µs	 1000 ops/s	 1.0 parallel	 0 B/op	 0 allocs/op
BenchmarkGateway/cs=sleep50us/impl=lanes-queue-2   	100	 5000 ns/op	 300 cs-µs	 200000 ops/s	 60.0 parallel	 0 B/op	 0 allocs/op
PASS
`

func TestParseKeepsEverySampleAndTakesMedians(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if r.procs != 2 {
		t.Errorf("procs = %d, want 2", r.procs)
	}
	name := "Semaphore/ctx=bg/scenario=uncontended/impl=lanes"
	if n := r.count(name, "ns/op"); n != 3 {
		t.Fatalf("%d samples of %s, want 3", n, name)
	}
	if m, _ := r.median(name, "ns/op"); m != 12 {
		t.Errorf("median = %v, want 12 (the middle sample, not the mean)", m)
	}
	if m, _ := r.median("KeyedMemory/scenario=idle-100k/impl=lanes-idle0", "B/key"); m != 0.04 {
		t.Errorf("B/key median = %v, want 0.04", m)
	}
	if got := r.values("Semaphore/ctx=bg/", "scenario"); strings.Join(got, ",") != "uncontended,cap8-g2,cap8-g4" {
		t.Errorf("scenarios in run order = %v", got)
	}
}

func TestTargetsAreComputedFromTheRun(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	byWhat := map[string]verdict{}
	for _, v := range evaluate(r) {
		byWhat[v.what] = v
	}
	cases := []struct {
		prefix string
		want   status
		in     string
	}{
		// 12/20 = 0.6: exactly at the bound.
		{"uncontended Acquire+Release of 1: ≤ 0.6× x/sync's time, 0 allocs/op", met, "0.60×"},
		// 30/20 = 1.5 > 1.
		{"capacity 8, 2 goroutines: no slower than x/sync (≤ 1.0×)", notMet, "1.50×"},
		{"capacity 8, 32 goroutines", missing, "not in this run"},
		{"retained heap per idle key after 100k keys, idle timeout 0: 0 B", met, "0.04 B/key"},
		// parallel 60 / 1 = 60, the raw ratio 200: reported, not judged.
		{"gateway, 256 goroutines, 64 keys, `sleep50us` critical sections, through session + global", reported, "60.0×"},
	}
	for _, c := range cases {
		var v *verdict
		for what, x := range byWhat {
			if strings.HasPrefix(what, c.prefix) && !strings.Contains(what, "cancellable") {
				x := x
				v = &x
				break
			}
		}
		if v == nil {
			t.Errorf("no target starting %q", c.prefix)
			continue
		}
		if v.status != c.want || !strings.Contains(v.measured, c.in) {
			t.Errorf("%q: %v, %q; want %v with %q", c.prefix, v.status, v.measured, c.want, c.in)
		}
	}
}

func TestModesTellsOneModeFromTwo(t *testing.T) {
	r := &results{samples: map[string]map[string][]float64{
		"one": {"ns/op": {100, 110, 120, 105}},
		"two": {"ns/op": {100, 400, 110, 420, 105}},
	}}
	if got := r.modes("one", "ns/op"); !strings.HasPrefix(got, "unimodal") {
		t.Errorf("one mode read as %q", got)
	}
	if got := r.modes("two", "ns/op"); !strings.HasPrefix(got, "bimodal, 3 of 5 near 105") || !strings.Contains(got, "near 410") {
		t.Errorf("two modes read as %q", got)
	}
}

func TestContendedTargetJudgesAgainstTheChannel(t *testing.T) {
	const run = `BenchmarkSemaphore/ctx=bg/scenario=cap1-g32/impl=lanes-2 	100	 300 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap1-g32/impl=chan-2 	100	 310 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap1-g32/impl=xsync-2 	100	 500 ns/op	 0 B/op	 0 allocs/op
`
	r, err := parse(strings.NewReader(run))
	if err != nil {
		t.Fatal(err)
	}
	// 300/310 <= 1 but 300/500 = 0.6 > 0.5: not met on the x/sync bound alone.
	m, s := contended("bg", "", "cap1-g32", "capacity 1").eval(r)
	if s != notMet || !strings.Contains(m, "0.97× chan") || !strings.Contains(m, "0.60× x/sync") {
		t.Errorf("got %v, %q", s, m)
	}
}

func TestRenderWritesTargetsTablesAndCharts(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := charts(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0] != "bench-semaphore-cap8.svg" {
		t.Fatalf("charts = %v, want only the capacity-8 chart (the only series measured)", files)
	}
	svg, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("chart is not an SVG: %v", err)
	}
	in := info{count: 3, benchtime: "1s", cpus: "2", command: "cd bench && go test ...", quick: true}
	doc := render(in, r, evaluate(r), "benchstat output\n", files, config{bench: "."})
	for _, want := range []string{
		"## Targets", "**not met**", "| met |", "bench-semaphore-cap8.svg", "## Profiling contention",
		"-mutexprofile", "-blockprofile", "Quick check", "benchstat output",
		"## Redis lanes\n", "## Redis lanes against redsync and redislock", "go run ./cmd/lockbench",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(doc, "bench-gateway-keys.svg") {
		t.Error("benchmarks.md links a chart that was not drawn")
	}
}

// reportRun is the output of adaptive's BenchmarkReport in a run.
const reportRun = `pkg: github.com/sessionlane/lanes/adaptive
BenchmarkReport/outcome=success-2          	100	 9.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkReport/outcome=overload-2         	100	 %s ns/op	 0 B/op	 0 allocs/op
BenchmarkReport/outcome=ignore-2           	100	 1.5 ns/op	 0 B/op	 0 allocs/op
BenchmarkReport/outcome=success/parallel-2 	100	 30.0 ns/op	 0 B/op	 0 allocs/op
`

// Issue 16's target: both a success and an overload within 20 ns and no
// allocation; not measured in a run without them.
func TestReportTargetJudgesSuccessAndOverload(t *testing.T) {
	const prefix = "reporting an outcome to an adaptive controller"
	verdictFor := func(run string) verdict {
		t.Helper()
		r, err := parse(strings.NewReader(run))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range evaluate(r) {
			if strings.HasPrefix(v.what, prefix) {
				if v.issue != 16 {
					t.Errorf("issue #%d, want #16", v.issue)
				}
				return v
			}
		}
		t.Fatalf("no target starting %q", prefix)
		return verdict{}
	}
	if v := verdictFor(sample + fmt.Sprintf(reportRun, "14.0")); v.status != met || !strings.Contains(v.measured, "success 9.00 ns, overload 14.0 ns, 0 allocs/op") {
		t.Errorf("within the bound: %v, %q", v.status, v.measured)
	}
	if v := verdictFor(sample + fmt.Sprintf(reportRun, "25.0")); v.status != notMet {
		t.Errorf("an overload of 25 ns: %v, %q; want not met", v.status, v.measured)
	}
	if v := verdictFor(sample); v.status != missing || !strings.Contains(v.measured, "Report/outcome=success") {
		t.Errorf("a run without BenchmarkReport: %v, %q; want not measured", v.status, v.measured)
	}
}

// The core benchmarks run with the run's -count and -benchtime, from the
// core module, when the run's -bench selects them.
func TestCoreRunsFollowTheBenchRegexp(t *testing.T) {
	c := config{count: 10, benchtime: "1s", bench: "."}
	runs := c.coreRuns()
	if len(runs) != 3 {
		t.Fatalf("%d core runs for -bench .; want 3 (adaptive's Report, semaphore's Timings and Priorities)", len(runs))
	}
	got := strings.Join(runs[0], " ")
	want := "test -run ^$ -bench ^BenchmarkReport$ -benchmem -count 10 -benchtime 1s -timeout 0 ./adaptive/"
	if got != want {
		t.Errorf("core run: go %s\nwant go %s", got, want)
	}
	if cmd := c.command(); !strings.Contains(cmd, "&& (cd .. && go test -run '^$' -bench '^BenchmarkReport$' -benchmem -count 10 -benchtime 1s -timeout 0 ./adaptive/)") {
		t.Errorf("command %q does not name the core run", cmd)
	}
	if got := strings.Join(runs[1], " "); !strings.Contains(got, "-bench ^BenchmarkTimings$/^case=cap1-g32$/^hist=(off|on)$ ") || !strings.HasSuffix(got, " ./semaphore/") {
		t.Errorf("Timings' run: go %s", got)
	}
	if got := strings.Join(runs[2], " "); !strings.Contains(got, "-bench ^BenchmarkPriorities$/ctx=/^cap=1$/^g=32$ ") {
		t.Errorf("Priorities' run: go %s", got)
	}
	for bench, n := range map[string]int{"Semaphore": 0, "^Benchmark(AcquireAll|Report)$": 1, "^(AcquireAll|Report)$": 0, "Report/outcome=success": 1, "Keyed$": 0, "^Benchmark(Timings|Priorities)$": 2} {
		if got := len(config{count: 1, benchtime: "100ms", bench: bench}.coreRuns()); got != n {
			t.Errorf("-bench %q: %d core runs, want %d", bench, got, n)
		}
	}
}

func TestRenderShowsTheReportTable(t *testing.T) {
	r, err := parse(strings.NewReader(sample + fmt.Sprintf(reportRun, "14.0")))
	if err != nil {
		t.Fatal(err)
	}
	in := info{count: 3, benchtime: "1s", cpus: "2", command: "cd bench && go test ...", quick: true}
	r.meta["appended"] = "BenchmarkReport at abc1234"
	doc := render(in, r, evaluate(r), "", nil, config{bench: "."})
	for _, want := range []string{"## Reporting an outcome", "| appended | BenchmarkReport at abc1234 |", "| `outcome=overload` | 14.0 ns | 0 |", "| `outcome=success/parallel` | 30.0 ns | 0 |", "| #16 | reporting an outcome"} {
		if !strings.Contains(doc, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
}

// issue27Run has every row that issue 27's goals read. Each row is at its
// bound or just past it, and issue27Past moves each across (past or back),
// so that every target is seen on both sides: see
// TestIssue27TargetsJudgeEachRow.
const issue27Run = `BenchmarkKeyed/scenario=newkey/impl=baseline-keybuild-2 	100	 50 ns/op	 48 B/op	 1 allocs/op
BenchmarkKeyed/scenario=newkey/impl=floor-xsync-2 	100	 150 ns/op	 72 B/op	 2 allocs/op
BenchmarkKeyed/scenario=newkey/impl=lanes-idle0-2 	100	 175 ns/op	 72 B/op	 2 allocs/op
BenchmarkKeyed/scenario=newkey/impl=lanes-default-2 	100	 211 ns/op	 72 B/op	 2 allocs/op
BenchmarkKeyed/scenario=hot-g32/impl=lanes-idle1h-2 	100	 500 ns/op	 0 B/op	 0 allocs/op
BenchmarkKeyed/scenario=hot-g32/impl=semmap-2 	100	 500 ns/op	 0 B/op	 2 allocs/op
BenchmarkKeyedMemory/scenario=idle-100k/impl=lanes-default-2 	10	 30000000 ns/op	 140 B/key	 100 B/op	 3 allocs/op
BenchmarkKeyedMemory/scenario=idle-100k/impl=locker-2 	10	 20000000 ns/op	 35 B/key	 100 B/op	 3 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap1-g32/impl=lanes-2 	100	 230 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=bg/scenario=cap1-g32/impl=chan-2 	100	 200 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=cancel/scenario=cap1-g32/impl=lanes-2 	100	 300 ns/op	 0 B/op	 0 allocs/op
BenchmarkSemaphore/ctx=cancel/scenario=cap1-g32/impl=chan-2 	100	 200 ns/op	 0 B/op	 0 allocs/op
pkg: github.com/sessionlane/lanes/semaphore
BenchmarkTimings/case=cap1-g32/hist=off-2 	100	 300 ns/op	 0 B/op	 0 allocs/op
BenchmarkTimings/case=cap1-g32/hist=on-2 	100	 320 ns/op	 0 B/op	 0 allocs/op
BenchmarkPriorities/ctx=background/cap=1/g=32/order=fifo-2 	100	 300 ns/op	 0 B/op	 0 allocs/op
BenchmarkPriorities/ctx=background/cap=1/g=32/order=priorities-2 	100	 345 ns/op	 0 B/op	 0 allocs/op
BenchmarkPriorities/ctx=cancellable/cap=1/g=32/order=fifo-2 	100	 300 ns/op	 0 B/op	 0 allocs/op
BenchmarkPriorities/ctx=cancellable/cap=1/g=32/order=priorities-2 	100	 346 ns/op	 0 B/op	 0 allocs/op
`

// issue27Past is issue27Run with each goal's row moved across its bound.
var issue27Past = strings.NewReplacer(
	"impl=lanes-idle0-2 \t100\t 175 ns", "impl=lanes-idle0-2 \t100\t 176 ns",
	"impl=lanes-default-2 \t100\t 211 ns", "impl=lanes-default-2 \t100\t 210 ns",
	"impl=lanes-default-2 \t10\t 30000000 ns", "impl=lanes-default-2 \t10\t 30000001 ns",
	"impl=lanes-idle1h-2 \t100\t 500 ns", "impl=lanes-idle1h-2 \t100\t 501 ns",
	"ctx=bg/scenario=cap1-g32/impl=lanes-2 \t100\t 230 ns", "ctx=bg/scenario=cap1-g32/impl=lanes-2 \t100\t 231 ns",
	"ctx=cancel/scenario=cap1-g32/impl=lanes-2 \t100\t 300 ns", "ctx=cancel/scenario=cap1-g32/impl=lanes-2 \t100\t 230 ns",
	"hist=on-2 \t100\t 320 ns", "hist=on-2 \t100\t 321 ns",
	"ctx=background/cap=1/g=32/order=priorities-2 \t100\t 345 ns", "ctx=background/cap=1/g=32/order=priorities-2 \t100\t 346 ns",
	"ctx=cancellable/cap=1/g=32/order=priorities-2 \t100\t 346 ns", "ctx=cancellable/cap=1/g=32/order=priorities-2 \t100\t 345 ns",
).Replace(issue27Run)

// Issue 27's goals, each judged from its rows of the run, on both sides of
// its bound: at the bound is met, past it is not; and a run without the
// rows does not measure them.
func TestIssue27TargetsJudgeEachRow(t *testing.T) {
	verdicts := func(run string) map[string]verdict {
		t.Helper()
		r, err := parse(strings.NewReader(run))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]verdict{}
		for _, v := range evaluate(r) {
			if v.issue == 27 {
				got[v.what] = v
			}
		}
		return got
	}
	if issue27Past == issue27Run {
		t.Fatal("issue27Past moved no row")
	}
	run, past := verdicts(issue27Run), verdicts(issue27Past)
	cases := []struct {
		prefix   string
		in       string // in the run's figure
		run      status
		pastIn   string // in the moved run's figure
		pastWant status
	}{
		// (175-50)/(150-50) = 1.25: at the bound; 126/100 past it.
		{"a new key every operation (lanes-idle0, idle timeout 0): ≤ 1.25× an xsync insert", "net 125.0 ns vs the floor's 100.0 ns (1.25×)", met, "(1.26×)", notMet},
		// (211-50)/100 = 1.61 > 1.6; 1.60 at it.
		{"a new key every operation (lanes-default, default options", "(1.61×)", notMet, "(1.60×)", met},
		{"100k keys locked and unlocked once each", "(1.50×)", met, "(1.50×)", notMet},
		{"hot key, 32 goroutines, entries kept (lanes-idle1h): ≤ 1.0×", "1.00× semmap", met, "1.00× semmap", notMet},
		{"capacity 1, 32 goroutines: ≤ 1.15× the buffered channel", "1.15× chan", met, "1.16× chan", notMet},
		{"capacity 1, 32 goroutines: ≤ 1.15× the buffered channel (cancellable context)", "1.50× chan", notMet, "1.15× chan", met},
		{"histograms on", "+20.0 ns", met, "+21.0 ns", notMet},
		// 345/300 = 1.15; 346/300 = 1.153, shown rounded.
		{"priorities (`WithPriorities`), capacity 1, 32 goroutines (semaphore's `BenchmarkPriorities`): ≤ 1.15× FIFO", "1.15× FIFO", met, "1.15× FIFO", notMet},
		{"priorities (`WithPriorities`), capacity 1, 32 goroutines (semaphore's `BenchmarkPriorities`): ≤ 1.15× FIFO (cancellable context)", "1.15× FIFO", notMet, "1.15× FIFO", met},
	}
	if len(run) != len(cases) {
		t.Errorf("%d targets of issue 27, want %d", len(run), len(cases))
	}
	find := func(got map[string]verdict, prefix string) *verdict {
		for what, x := range got {
			// A case without a label must not match the labelled one.
			if what == prefix || strings.HasPrefix(what, prefix) && !strings.Contains(strings.TrimPrefix(what, prefix), "cancellable") {
				return &x
			}
		}
		return nil
	}
	for _, c := range cases {
		for _, side := range []struct {
			name string
			got  map[string]verdict
			in   string
			want status
		}{{"at", run, c.in, c.run}, {"moved", past, c.pastIn, c.pastWant}} {
			v := find(side.got, c.prefix)
			if v == nil {
				t.Errorf("no target of issue 27 starting %q", c.prefix)
				continue
			}
			if v.status != side.want || !strings.Contains(v.measured, side.in) {
				t.Errorf("%q (%s): %v, %q; want %v with %q", c.prefix, side.name, v.status, v.measured, side.want, side.in)
			}
		}
	}
	// A run without the rows measures none of them.
	for what, v := range verdicts(sample) {
		if v.status != missing {
			t.Errorf("%q in a run without its rows: %v, %q; want not measured", what, v.status, v.measured)
		}
	}
}
