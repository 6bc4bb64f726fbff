package bench_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlane/lanes/harness/benchkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// gatewayGoroutines is the number of concurrent senders of the gateway
// workload; goroutine i sends for key i mod keys.
const gatewayGoroutines = 256

// A critical section of the gateway: what a handler does while it holds
// its thread's lane.
type criticalSection struct {
	name string
	run  func()
}

// spinWork is a fixed amount of CPU work, about 20 µs on the reference
// machine: a handler that computes (parses, renders) rather than waits.
const spinWork = 10_000

var spinSink atomic.Uint64

func spin() {
	x := uint64(88172645463325252)
	for i := 0; i < spinWork; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink.Store(x)
}

const csWait = 50 * time.Microsecond

var criticalSections = []criticalSection{
	// sleep50us waits 50 µs on a timer, as a handler waits for a model or
	// an API: the processor is free meanwhile. Timers are coarse on some
	// machines; the cs-µs metric reports how long the wait really was.
	{"sleep50us", func() { time.Sleep(csWait) }},
	// yield50us waits 50 µs of wall time, yielding the processor in a
	// loop: fine-grained on any machine, but every waiter costs CPU.
	{"yield50us", func() {
		start := time.Now()
		for time.Since(start) < csWait {
			runtime.Gosched()
		}
	}},
	// spin20us computes: no parallelism beyond the number of cores.
	{"spin20us", spin},
}

// gatewayPeer makes a keyedLock for the gateway; global is the capacity-1
// lane every speed-up is measured against.
var (
	peerGlobal = keyedPeer{"global", func() keyedLock { return globalLane{semaphore.New(1)} }}
	peerQueue  = keyedPeer{"lanes-queue", func() keyedLock {
		return newLanesQueue(newQueue(1024, keyedsem.WithIdleTimeout(hour)), "session", "global")
	}}
	peerLanes = keyedPeer{"lanes", newLanes(keyedsem.WithIdleTimeout(hour))}
)

// runGateway runs the gateway workload on l with nkeys keys and reports
// ops/s; cs-µs, the mean wall time of a critical section; and parallel,
// the mean number of critical sections in progress (ops/s × cs seconds,
// by Little's law): 1 at most for the global lane, nkeys at most for a
// per-key lane. Timers are coarse on some machines when the processors
// are idle (a 50 µs sleep can last a millisecond when only one goroutine
// sleeps, and 100 µs when 64 do), so raw throughput ratios can exceed the
// number of keys; the ratio of parallel to the global lane's is the
// speed-up at equal critical-section length.
//
// For the peers after the global lane in a group, it also reports the
// speed-ups over the global lane's latest run in the same group: x-global
// (throughput ratio) and x-global-eqcs (ratio of parallel). The report
// recomputes both from the medians.
func runGateway(b *testing.B, group string, p keyedPeer, nkeys int, cs func()) {
	ks := keys(nkeys)
	l := p.make()
	if p.name == peerIdeal.name {
		// One goroutine per key, so that no two run one key at once.
		if g := benchkit.SetGoroutines(b, nkeys); g != nkeys {
			b.Skipf("%d keys need a multiple of GOMAXPROCS goroutines; RunParallel would start %d", nkeys, g)
		}
	} else {
		benchkit.SetGoroutines(b, gatewayGoroutines)
	}
	var id atomic.Int64
	var csTime atomic.Int64
	var csCount atomic.Int64
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		k := ks[int(id.Add(1)-1)%nkeys]
		var d time.Duration
		var c int64
		for pb.Next() {
			h := l.Lock(k)
			start := time.Now()
			cs()
			d += time.Since(start)
			c++
			l.Unlock(k, h)
		}
		csTime.Add(int64(d))
		csCount.Add(c)
	})
	b.StopTimer()
	ops := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(ops, "ops/s")
	if cpu0 >= 0 {
		// The share of the processors the process kept busy: near 100%,
		// the run was bound by CPU, not by the lane's parallelism.
		busy := float64(cpuTime()-cpu0) / float64(b.Elapsed()) / float64(runtime.GOMAXPROCS(0))
		b.ReportMetric(100*busy, "cpu-%")
	}
	c := csCount.Load()
	if c == 0 {
		return
	}
	mean := float64(csTime.Load()) / float64(c) / 1e9
	par := ops * mean
	b.ReportMetric(mean*1e6, "cs-µs")
	b.ReportMetric(par, "parallel")
	if p.name == peerGlobal.name {
		lastGlobal.Store(group, [2]float64{ops, par})
	} else if g, ok := lastGlobal.Load(group); ok {
		g := g.([2]float64)
		b.ReportMetric(ops/g[0], "x-global")
		b.ReportMetric(par/g[1], "x-global-eqcs")
	}
}

// lastGlobal holds the throughput and parallelism of the latest global-lane
// run of each group (a critical section, or a number of keys).
var lastGlobal sync.Map // string -> [2]float64

// BenchmarkGateway is the workload lanes exists for: 256 goroutines send
// messages for 64 threads (keys); each message is handled in a critical
// section under its thread's lane. The global lane (one semaphore of
// capacity 1) serialises everything; a per-key lane lets the 64 threads
// run in parallel, so the ideal speed-up of a waiting handler is 64×, and
// of a computing one the number of cores.
func BenchmarkGateway(b *testing.B) {
	peers := []keyedPeer{peerGlobal, peerLocker, peerKMNCPU, peerKM1024, peerLanes, peerQueue}
	for _, cs := range criticalSections {
		for _, p := range peers {
			b.Run(fmt.Sprintf("cs=%s/impl=%s", cs.name, p.name), func(b *testing.B) {
				runGateway(b, "cs="+cs.name, p, 64, cs.run)
			})
		}
		b.Run(fmt.Sprintf("cs=%s/impl=%s", cs.name, peerIdeal.name), func(b *testing.B) {
			runGateway(b, "cs="+cs.name, peerIdeal, 64, cs.run)
		})
	}
}

// peerIdeal is no lane at all, run with one goroutine per key instead of
// four: each key's messages are handled one after another by their own
// goroutine, all keys at once, with nothing to acquire. No per-key lane
// can do better, so its speed-up over the global lane is the most this
// machine allows for the workload: when it falls short of the number of
// keys, the processors, not the lanes, are the limit.
var peerIdeal = keyedPeer{"ideal-no-lane", func() keyedLock { return noLane{} }}

type noLane struct{}

func (noLane) Lock(string) held    { return held{} }
func (noLane) Unlock(string, held) {}

// BenchmarkGatewayKeys is the gateway with 1, 2, 4, ..., 64 keys and the
// 50 µs waiting handler: the speed-up over the global lane against the
// number of keys (ideal: the number of keys), for the chart in
// docs/benchmarks.md.
func BenchmarkGatewayKeys(b *testing.B) {
	peers := []keyedPeer{peerGlobal, peerLocker, peerKM1024, peerLanes}
	for nkeys := 1; nkeys <= 64; nkeys *= 2 {
		for _, p := range peers {
			b.Run(fmt.Sprintf("keys=%d/impl=%s", nkeys, p.name), func(b *testing.B) {
				runGateway(b, fmt.Sprintf("keys=%d", nkeys), p, nkeys, criticalSections[0].run)
			})
		}
	}
}

// BenchmarkAcquireAll compares lanequeue's AcquireAll of session + global
// (+ Ticket.Release), with the set prepared once, with one keyedsem
// Acquire+Release and one Acquire+Release of a semaphore of the global
// lane's capacity (1024), the two parts it is made of, on 64 keys whose
// entries are kept: scenario=seq in one goroutine, scenario=g32 with 32
// goroutines on distinct keys.
func BenchmarkAcquireAll(b *testing.B) {
	peers := []keyedPeer{
		{"keyed", newLanes(keyedsem.WithIdleTimeout(hour))},
		{"global", func() keyedLock { return globalLane{semaphore.New(1024)} }},
		{"queue", peerQueue.make},
	}
	for _, p := range peers {
		b.Run("scenario=seq/impl="+p.name, func(b *testing.B) {
			ks := keys(64)
			l := p.make()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := ks[i%len(ks)]
				l.Unlock(k, l.Lock(k))
			}
		})
	}
	for _, p := range peers {
		b.Run("scenario=g32/impl="+p.name, func(b *testing.B) {
			ks := keys(benchkit.SetGoroutines(b, 32))
			l := p.make()
			var id atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				k := ks[id.Add(1)-1]
				for pb.Next() {
					l.Unlock(k, l.Lock(k))
				}
			})
		})
	}
}

// cpuTime returns the user and system CPU time the process has used so
// far, or -1 if the system cannot tell.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
