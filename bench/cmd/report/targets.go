package main

import "fmt"

// status is the verdict on one target.
type status int

const (
	met      status = iota
	notMet          // measured, and outside the target
	missing         // a benchmark the target needs is not in the run
	reported        // no threshold: the figure is published as it is
)

func (s status) String() string {
	return [...]string{"met", "**not met**", "not measured", "reported"}[s]
}

// target is one claim of an issue (2-4, and 13, whose yardsticks replace
// the ones of 2-4 that were judged unreachable; 16 for the adaptive
// controller; 27 for the hot paths against their floors), evaluated
// against a run.
type target struct {
	issue int
	what  string
	eval  func(r *results) (measured string, s status)
}

// verdict is an evaluated target.
type verdict struct {
	target
	measured string
	status   status
}

func evaluate(r *results) []verdict {
	var out []verdict
	for _, t := range targets() {
		m, s := t.eval(r)
		out = append(out, verdict{t, m, s})
	}
	return out
}

// get looks up medians; the first missing one makes ok false and is
// named in miss.
type getter struct {
	r    *results
	miss []string
}

func (g *getter) v(name, unit string) float64 {
	v, ok := g.r.median(name, unit)
	if !ok {
		g.miss = append(g.miss, name+" ("+unit+")")
	}
	return v
}

func (g *getter) ns(name string) float64     { return g.v(name, "ns/op") }
func (g *getter) allocs(name string) float64 { return g.v(name, "allocs/op") }

func (g *getter) missing() (string, status, bool) {
	if len(g.miss) == 0 {
		return "", 0, false
	}
	m := "not in this run: " + g.miss[0]
	if len(g.miss) > 1 {
		m += fmt.Sprintf(" and %d more", len(g.miss)-1)
	}
	return m, missing, true
}

func verdictOf(ok ...bool) status {
	for _, b := range ok {
		if !b {
			return notMet
		}
	}
	return met
}

func ratio(x float64) string { return fmt.Sprintf("%.2f×", x) }

func semName(ctx, scenario, impl string) string {
	return "Semaphore/ctx=" + ctx + "/scenario=" + scenario + "/impl=" + impl
}

func keyedName(scenario, impl string) string {
	return "Keyed/scenario=" + scenario + "/impl=" + impl
}

func memName(scenario, impl string) string {
	return "KeyedMemory/scenario=" + scenario + "/impl=" + impl
}

func gatewayName(cs, impl string) string { return "Gateway/cs=" + cs + "/impl=" + impl }

func gatewayKeysName(keys int, impl string) string {
	return fmt.Sprintf("GatewayKeys/keys=%d/impl=%s", keys, impl)
}

// reportName is a row of adaptive's BenchmarkReport (a core benchmark:
// no impl).
func reportName(outcome string) string { return "Report/outcome=" + outcome }

func acquireAllName(scenario, impl string) string {
	return "AcquireAll/scenario=" + scenario + "/impl=" + impl
}

// zeroAllocs is the test for "0 allocs/op": testing reports allocations
// per op rounded down, so a median of 0 means less than one allocation in
// every op on average.
func zeroAllocs(a float64) bool { return a < 1 }

func targets() []target {
	var ts []target
	for _, ctx := range []string{"bg", "cancel"} {
		label := ""
		if ctx == "cancel" {
			label = " (cancellable context)"
		}
		sem := func(scenario, impl string) string { return semName(ctx, scenario, impl) }
		ts = append(ts,
			target{2, "uncontended Acquire+Release of 1: ≤ 0.6× x/sync's time, 0 allocs/op" + label,
				func(r *results) (string, status) {
					g := &getter{r: r}
					x := g.ns(sem("uncontended", "lanes")) / g.ns(sem("uncontended", "xsync"))
					a := g.allocs(sem("uncontended", "lanes"))
					if m, s, ok := g.missing(); ok {
						return m, s
					}
					return fmt.Sprintf("%s x/sync, %.0f allocs/op", ratio(x), a), verdictOf(x <= 0.6, zeroAllocs(a))
				}},
			target{2, "capacity 8, 2 goroutines: no slower than x/sync (≤ 1.0×)" + label,
				func(r *results) (string, status) {
					g := &getter{r: r}
					x := g.ns(sem("cap8-g2", "lanes")) / g.ns(sem("cap8-g2", "xsync"))
					if m, s, ok := g.missing(); ok {
						return m, s
					}
					return ratio(x) + " x/sync", verdictOf(x <= 1.0)
				}},
			contended(ctx, label, "cap8-g32", "capacity 8"),
			contended(ctx, label, "cap1-g32", "capacity 1"),
			target{2, "weighted 8,1,1,1 at capacity 10, 32 goroutines: ≤ 0.6× x/sync" + label,
				func(r *results) (string, status) {
					g := &getter{r: r}
					x := g.ns(sem("w8111-cap10-g32", "lanes")) / g.ns(sem("w8111-cap10-g32", "xsync"))
					if m, s, ok := g.missing(); ok {
						return m, s
					}
					return ratio(x) + " x/sync", verdictOf(x <= 0.6)
				}},
		)
	}

	ts = append(ts,
		target{3, "distinct keys, 32 goroutines, entries kept (idle 1h): ≤ 0.3× moby/locker's time, 0 allocs/op",
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(keyedName("distinct-g32", "lanes-idle1h")) / g.ns(keyedName("distinct-g32", "locker"))
				a := g.allocs(keyedName("distinct-g32", "lanes-idle1h"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s locker, %.0f allocs/op", ratio(x), a), verdictOf(x <= 0.3, zeroAllocs(a))
			}},
		target{3, "distinct keys, 32 goroutines, idle timeout 0 (entry made and dropped each time): reported",
			func(r *results) (string, status) {
				g := &getter{r: r}
				n := g.ns(keyedName("distinct-g32", "lanes-idle0"))
				x := n / g.ns(keyedName("distinct-g32", "locker"))
				a := g.allocs(keyedName("distinct-g32", "lanes-idle0"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s/op, %s locker, %.0f allocs/op", fmtNs(n), ratio(x), a), reported
			}},
		target{3, "hot key, 32 goroutines: ≤ 0.7× the FIFO peer (map of x/sync semaphores); moby/locker beside it",
			func(r *results) (string, status) {
				g := &getter{r: r}
				l := g.ns(keyedName("hot-g32", "lanes-idle1h"))
				x := l / g.ns(keyedName("hot-g32", "semmap"))
				y := l / g.ns(keyedName("hot-g32", "locker"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s semmap (%s locker, which is not FIFO)", ratio(x), ratio(y)), verdictOf(x <= 0.7)
			}},
	)
	ts = append(ts,
		newKey("newkey", "lanes-idle0", "idle timeout 0", 1.2),
		newKey("newkey", "lanes-default", "default idle timeout", 2.0),
		newKey("newkey-g32", "lanes-idle0", "idle timeout 0, 32 goroutines", 1.2),
		newKey("newkey-g32", "lanes-default", "default idle timeout, 32 goroutines", 2.0),
		target{13, "a new struct key every operation (lanes-idle0-struct, no key to build), beside the string row: reported",
			func(r *results) (string, status) {
				g := &getter{r: r}
				base := g.ns(keyedName("newkey", "baseline-keybuild"))
				l := g.ns(keyedName("newkey", "lanes-idle0-struct"))
				str := g.ns(keyedName("newkey", "lanes-idle0")) - base
				k := g.ns(keyedName("newkey", "locker")) - base
				a := g.allocs(keyedName("newkey", "lanes-idle0-struct"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s (%s locker net; the string row net %s), %.0f allocs/op", fmtNs(l), ratio(l/k), fmtNs(str), a), reported
			}},
		target{3, "retained heap per idle key after 100k keys, idle timeout 0: 0 B",
			func(r *results) (string, status) {
				g := &getter{r: r}
				b := g.v(memName("idle-100k", "lanes-idle0"), "B/key")
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%.2f B/key", b), verdictOf(b < 0.5)
			}},
		target{3, "retained heap per idle key after 100k keys, long idle timeout: ≤ the never-evicting map of x/sync semaphores",
			func(r *results) (string, status) {
				g := &getter{r: r}
				b := g.v(memName("idle-100k", "lanes-idle1h"), "B/key")
				s := g.v(memName("idle-100k", "semmap"), "B/key")
				if m, st, ok := g.missing(); ok {
					return m, st
				}
				return fmt.Sprintf("%.0f B/key vs semmap's %.0f B/key (%s)", b, s, ratio(b/s)), verdictOf(b <= s)
			}},
		target{3, "after a burst of 100k held keys and a Sweep, the map shrinks back: less retained per peak key than the Go-map peers (locker, refmap)",
			func(r *results) (string, status) {
				g := &getter{r: r}
				b := g.v(memName("burst-100k", "lanes-idle1h"), "B/key")
				l := g.v(memName("burst-100k", "locker"), "B/key")
				f := g.v(memName("burst-100k", "refmap"), "B/key")
				if m, st, ok := g.missing(); ok {
					return m, st
				}
				return fmt.Sprintf("%.1f B per peak key vs locker %.1f, refmap %.1f", b, l, f), verdictOf(b < l, b < f)
			}},
		target{13, "AcquireAll+Release of session + global, prepared set: ≤ 2.5× one keyed plus one global Acquire+Release, 0 allocs/op",
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(acquireAllName("seq", "queue")) / (g.ns(acquireAllName("seq", "keyed")) + g.ns(acquireAllName("seq", "global")))
				a := g.allocs(acquireAllName("seq", "queue"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s keyed+global, %.0f allocs/op", ratio(x), a), verdictOf(x <= 2.5, zeroAllocs(a))
			}},
		target{4, "AcquireAll+Release of session + global, 32 goroutines on distinct keys: reported",
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(acquireAllName("g32", "queue")) / g.ns(acquireAllName("g32", "keyed"))
				a := g.allocs(acquireAllName("g32", "queue"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s keyed, %.0f allocs/op", ratio(x), a), reported
			}},
	)
	ts = append(ts, target{16, "reporting an outcome to an adaptive controller (`Controller.Report`: a success; an overload, which also reads the coarse clock): ≤ 20 ns, 0 allocs/op",
		func(r *results) (string, status) {
			g := &getter{r: r}
			s := g.ns(reportName("success"))
			o := g.ns(reportName("overload"))
			sa := g.allocs(reportName("success"))
			oa := g.allocs(reportName("overload"))
			if m, st, ok := g.missing(); ok {
				return m, st
			}
			return fmt.Sprintf("success %s, overload %s, %.0f allocs/op", fmtNs(s), fmtNs(o), max(sa, oa)),
				verdictOf(s <= 20, o <= 20, zeroAllocs(sa), zeroAllocs(oa))
		}})
	ts = append(ts, issue27()...)
	// The gateway, with each kind of waiting critical section: a timer
	// (sleep50us) and a yielding loop (yield50us). Both yield the
	// processor; on a machine whose timers are coarse when idle, only the
	// second gives the global lane and the per-key lanes critical sections
	// of about the same length.
	for _, cs := range []string{"sleep50us", "yield50us"} {
		for _, impl := range []string{"lanes-queue", "lanes"} {
			how := map[string]string{"lanes-queue": "session + global lanes (AcquireAll)", "lanes": "one keyedsem lane"}[impl]
			what := fmt.Sprintf("gateway, 256 goroutines, 64 keys, `%s` critical sections, through %s: speed-up over the global capacity-1 lane at equal critical-section length (ideal 64×), reported (judged at scale by `cmd/lanesim`)", cs, how)
			ts = append(ts, target{13, what, func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.v(gatewayName(cs, impl), "parallel") / g.v(gatewayName(cs, "global"), "parallel")
				raw := g.ns(gatewayName(cs, "global")) / g.ns(gatewayName(cs, impl))
				csG := g.v(gatewayName(cs, "global"), "cs-µs")
				csL := g.v(gatewayName(cs, impl), "cs-µs")
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%.1f× (raw throughput %.1f×; a critical section lasted %.0f µs under the global lane, %.0f µs here)", x, raw, csG, csL),
					reported
			}})
		}
	}
	return ts
}

// contended is issue 13's yardstick for a semaphore row under contention
// (32 goroutines). Strict FIFO hands each freed permit to a parked waiter
// once a queue forms, so the runtime's own hand-off (the buffered channel
// in the same run) is the floor: lanes must be no slower than the channel
// and at most half x/sync's time. The row's samples are often bimodal (fast
// while nobody queues, one wake-up per operation once a queue forms), so
// the verdict names both modes.
func contended(ctx, label, scenario, what string) target {
	sem := func(impl string) string { return semName(ctx, scenario, impl) }
	return target{13, what + ", 32 goroutines: ≤ 1.0× the buffered channel and ≤ 0.5× x/sync, no allocation per wait" + label,
		func(r *results) (string, status) {
			g := &getter{r: r}
			l := g.ns(sem("lanes"))
			c := l / g.ns(sem("chan"))
			x := l / g.ns(sem("xsync"))
			a := g.allocs(sem("lanes"))
			if m, s, ok := g.missing(); ok {
				return m, s
			}
			return fmt.Sprintf("%s chan, %s x/sync, %.0f allocs/op; lanes' samples: %s", ratio(c), ratio(x), a, r.modes(sem("lanes"), "ns/op")),
				verdictOf(c <= 1.0, x <= 0.5, zeroAllocs(a))
		}}
}

// newKey is issue 13's yardstick for a new key on every call, net of
// building the key. With idle timeout 0 an entry is made and dropped each
// time, which needs at least one insert and one delete in the map (xsync's
// pair alone costs about 0.95x locker's whole call), hence 1.2x; the
// default idle timeout keeps entries and evicts over the soft cap, hence 2x.
func newKey(scenario, impl, what string, limit float64) target {
	return target{13, fmt.Sprintf("a new key every operation (%s, %s): ≤ %.1f× moby/locker net of building the key, ≤ 1 allocation beyond the key", impl, what, limit),
		func(r *results) (string, status) {
			g := &getter{r: r}
			base := g.ns(keyedName(scenario, "baseline-keybuild"))
			baseA := g.allocs(keyedName(scenario, "baseline-keybuild"))
			l := g.ns(keyedName(scenario, impl)) - base
			k := g.ns(keyedName(scenario, "locker")) - base
			a := g.allocs(keyedName(scenario, impl)) - baseA
			if m, s, ok := g.missing(); ok {
				return m, s
			}
			return fmt.Sprintf("net %s vs locker's %s (%s), %.0f allocs beyond the key", fmtNs(l), fmtNs(k), ratio(l/k), a),
				verdictOf(l <= limit*k, a <= 1)
		}}
}

// timingsName and prioritiesName are rows of package semaphore's
// BenchmarkTimings and BenchmarkPriorities (core benchmarks: no impl).
func timingsName(hist string) string { return "Timings/case=cap1-g32/hist=" + hist }

func prioritiesName(ctx, order string) string {
	return "Priorities/ctx=" + ctx + "/cap=1/g=32/order=" + order
}

// issue27 are issue 27's goals: each hot path against its floor or its
// FIFO peer in the same run. Its in-package figures, each row in a
// process of its own and charged its CPU time, are in
// docs/benchmarks-policies.md; these are the issue's own yardstick, the
// medians of one run.
func issue27() []target {
	ts := []target{
		newKeyFloor("lanes-idle0", "idle timeout 0", 1.25),
		newKeyFloor("lanes-default", "default options: soft cap 4096, idle 1 h", 1.6),
		target{27, "100k keys locked and unlocked once each (`KeyedMemory`, idle-100k), default options: ≤ 1.5× moby/locker's time",
			func(r *results) (string, status) {
				g := &getter{r: r}
				l := g.ns(memName("idle-100k", "lanes-default"))
				k := g.ns(memName("idle-100k", "locker"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return fmt.Sprintf("%s vs locker's %s (%s)", fmtNs(l), fmtNs(k), ratio(l/k)), verdictOf(l <= 1.5*k)
			}},
		target{27, "hot key, 32 goroutines, entries kept (lanes-idle1h): ≤ 1.0× the FIFO peer (semmap)",
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(keyedName("hot-g32", "lanes-idle1h")) / g.ns(keyedName("hot-g32", "semmap"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return ratio(x) + " semmap", verdictOf(x <= 1.0)
			}},
	}
	for _, ctx := range []string{"bg", "cancel"} {
		label := map[string]string{"bg": "", "cancel": " (cancellable context)"}[ctx]
		ts = append(ts, target{27, "capacity 1, 32 goroutines: ≤ 1.15× the buffered channel" + label,
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(semName(ctx, "cap1-g32", "lanes")) / g.ns(semName(ctx, "cap1-g32", "chan"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return ratio(x) + " chan", verdictOf(x <= 1.15)
			}})
	}
	ts = append(ts, target{27, "histograms on (`WithHistograms`), capacity 1, 32 goroutines (semaphore's `BenchmarkTimings`): ≤ 20 ns added to the row with them off",
		func(r *results) (string, status) {
			g := &getter{r: r}
			on, off := g.ns(timingsName("on")), g.ns(timingsName("off"))
			if m, s, ok := g.missing(); ok {
				return m, s
			}
			return fmt.Sprintf("%+.1f ns (%s on, %s off)", on-off, fmtNs(on), fmtNs(off)), verdictOf(on-off <= 20)
		}})
	for _, ctx := range []string{"background", "cancellable"} {
		label := map[string]string{"background": "", "cancellable": " (cancellable context)"}[ctx]
		ts = append(ts, target{27, "priorities (`WithPriorities`), capacity 1, 32 goroutines (semaphore's `BenchmarkPriorities`): ≤ 1.15× FIFO" + label,
			func(r *results) (string, status) {
				g := &getter{r: r}
				x := g.ns(prioritiesName(ctx, "priorities")) / g.ns(prioritiesName(ctx, "fifo"))
				if m, s, ok := g.missing(); ok {
					return m, s
				}
				return ratio(x) + " FIFO", verdictOf(x <= 1.15)
			}})
	}
	return ts
}

// newKeyFloor is issue 27's yardstick for a new key on every call: its
// net cost (less building the key) against the floor's, an xsync insert
// and delete of the same key, the two map operations that a keyed
// semaphore on xsync cannot avoid for a key it has never seen.
func newKeyFloor(impl, what string, limit float64) target {
	return target{27, fmt.Sprintf("a new key every operation (%s, %s): ≤ %g× an xsync insert and delete (floor-xsync), both net of building the key", impl, what, limit),
		func(r *results) (string, status) {
			g := &getter{r: r}
			base := g.ns(keyedName("newkey", "baseline-keybuild"))
			l := g.ns(keyedName("newkey", impl)) - base
			f := g.ns(keyedName("newkey", "floor-xsync")) - base
			if m, s, ok := g.missing(); ok {
				return m, s
			}
			return fmt.Sprintf("net %s vs the floor's %s (%s)", fmtNs(l), fmtNs(f), ratio(l/f)), verdictOf(l <= limit*f)
		}}
}
