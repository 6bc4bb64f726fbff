package main

import (
	"fmt"
	"math"
	"strings"
)

// fmtNs formats a time in nanoseconds with a unit that keeps 3 digits.
func fmtNs(ns float64) string {
	switch a := math.Abs(ns); {
	case a < 10:
		return fmt.Sprintf("%.2f ns", ns)
	case a < 1000:
		return fmt.Sprintf("%.1f ns", ns)
	case a < 1e6:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	case a < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.2f s", ns/1e9)
}

// fmtRate formats operations per second.
func fmtRate(ops float64) string {
	switch {
	case ops >= 1e6:
		return fmt.Sprintf("%.2f M/s", ops/1e6)
	case ops >= 1e3:
		return fmt.Sprintf("%.1f k/s", ops/1e3)
	}
	return fmt.Sprintf("%.0f /s", ops)
}

// table is a Markdown table under construction.
type table struct {
	b strings.Builder
}

func newTable(head ...string) *table {
	t := &table{}
	t.row(head...)
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---"
	}
	t.row(seps...)
	return t
}

func (t *table) row(cells ...string) {
	t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func (t *table) String() string { return t.b.String() }

// values returns the distinct values of key in the names that start with
// prefix, in the order of the run.
func (r *results) values(prefix, key string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range r.order {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		for _, part := range strings.Split(strings.TrimPrefix(n, prefix), "/") {
			if v, ok := strings.CutPrefix(part, key+"="); ok && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// timeCell is a median time with its allocations when there are any.
func (r *results) timeCell(name string) string {
	ns, ok := r.median(name, "ns/op")
	if !ok {
		return "—"
	}
	s := fmtNs(ns)
	if sp := r.spread(name, "ns/op"); r.count(name, "ns/op") > 1 && sp >= 0.05 {
		s += fmt.Sprintf(" ±%.0f%%", sp*100)
	}
	if a, ok := r.median(name, "allocs/op"); ok && a > 0 {
		s += fmt.Sprintf(", %.0f alloc", a)
		if a != 1 {
			s += "s"
		}
	}
	return s
}

// versusBest compares the time of ref with the fastest of peers: the
// ratio ref/best (below 1: ref is faster) and the best peer's name.
func (r *results) versusBest(name func(impl string) string, ref string, peers []string) string {
	rv, ok := r.median(name(ref), "ns/op")
	if !ok {
		return "—"
	}
	best, bestName := math.Inf(1), ""
	for _, p := range peers {
		if v, ok := r.median(name(p), "ns/op"); ok && v < best {
			best, bestName = v, p
		}
	}
	if bestName == "" {
		return "—"
	}
	return fmt.Sprintf("%s (%s)", ratio(rv/best), bestName)
}

var semImpls = []string{"lanes", "xsync", "marusama", "chan", "mutex"}

func semTable(r *results) string {
	head := append([]string{"ctx", "scenario"}, semImpls...)
	t := newTable(append(head, "lanes ÷ best peer")...)
	for _, ctx := range r.values("Semaphore/", "ctx") {
		for _, sc := range r.values("Semaphore/ctx="+ctx+"/", "scenario") {
			name := func(impl string) string { return semName(ctx, sc, impl) }
			cells := []string{ctx, sc}
			for _, impl := range semImpls {
				cells = append(cells, r.timeCell(name(impl)))
			}
			cells = append(cells, r.versusBest(name, "lanes", semImpls[1:]))
			t.row(cells...)
		}
	}
	return t.String()
}

var keyedImpls = []string{"lanes-idle1h", "lanes-idle0", "locker", "keymutex-ncpu", "keymutex-1024", "refmap", "semmap"}

func keyedTable(r *results) string {
	t := newTable(append(append([]string{"scenario"}, keyedImpls...), "lanes-idle1h ÷ best peer")...)
	for _, sc := range []string{"distinct-g32", "hot-g32"} {
		name := func(impl string) string { return keyedName(sc, impl) }
		cells := []string{sc}
		for _, impl := range keyedImpls {
			cells = append(cells, r.timeCell(name(impl)))
		}
		cells = append(cells, r.versusBest(name, "lanes-idle1h", keyedImpls[2:]))
		t.row(cells...)
	}
	return t.String()
}

func newKeyTable(r *results) string {
	t := newTable("impl", "measured", "net of building the key", "allocs/op", "allocs beyond the key", "net ÷ locker's net")
	base, _ := r.median(keyedName("newkey", "baseline-keybuild"), "ns/op")
	baseA, _ := r.median(keyedName("newkey", "baseline-keybuild"), "allocs/op")
	lockerNs, lok := r.median(keyedName("newkey", "locker"), "ns/op")
	for _, impl := range r.values("Keyed/scenario=newkey/", "impl") {
		name := keyedName("newkey", impl)
		ns, ok := r.median(name, "ns/op")
		if !ok {
			continue
		}
		a, _ := r.median(name, "allocs/op")
		net, netA := ns-base, a-baseA
		if strings.HasSuffix(impl, "-struct") {
			net, netA = ns, a // a struct key is not built
		}
		vs := "—"
		if lok && impl != "baseline-keybuild" {
			vs = ratio(net / (lockerNs - base))
		}
		netCell, netACell := fmtNs(net), fmt.Sprintf("%.0f", netA)
		if impl == "baseline-keybuild" {
			netCell, netACell = "(the baseline)", "—"
		}
		t.row(impl, fmtNs(ns), netCell, fmt.Sprintf("%.0f", a), netACell, vs)
	}
	return t.String()
}

func memTable(r *results) string {
	t := newTable("impl", "idle: B per key, 100k keys", "burst: B per peak key after release", "time to lock+unlock 100k keys")
	for _, impl := range r.values("KeyedMemory/", "impl") {
		cell := func(sc string) string {
			v, ok := r.median(memName(sc, impl), "B/key")
			if !ok {
				return "—"
			}
			return fmt.Sprintf("%.1f", v)
		}
		tm := "—"
		if ns, ok := r.median(memName("idle-100k", impl), "ns/op"); ok {
			tm = fmtNs(ns)
		}
		t.row(impl, cell("idle-100k"), cell("burst-100k"), tm)
	}
	return t.String()
}

// speedup returns the speed-up of impl over the global lane at equal
// critical-section length (the ratio of their mean parallelism), and the
// raw throughput ratio.
func (r *results) speedup(name func(impl string) string, impl string) (eq, raw float64, ok bool) {
	pi, ok1 := r.median(name(impl), "parallel")
	pg, ok2 := r.median(name("global"), "parallel")
	ni, ok3 := r.median(name(impl), "ns/op")
	ng, ok4 := r.median(name("global"), "ns/op")
	if !(ok1 && ok2 && ok3 && ok4) || pg == 0 || ni == 0 {
		return 0, 0, false
	}
	return pi / pg, ng / ni, true
}

// cpuBound reports whether a gateway critical section computes rather
// than waits.
func cpuBound(cs string) bool { return strings.HasPrefix(cs, "spin") }

func gatewayTable(r *results) string {
	css := r.values("Gateway/", "cs")
	head := []string{"impl"}
	for _, cs := range css {
		head = append(head, cs+": throughput", "× global (equal cs)", "× global (raw)")
	}
	t := newTable(head...)
	for _, impl := range r.values("Gateway/", "impl") {
		cells := []string{impl}
		for _, cs := range css {
			name := func(impl string) string { return gatewayName(cs, impl) }
			ns, ok := r.median(name(impl), "ns/op")
			if !ok {
				cells = append(cells, "—", "—", "—")
				continue
			}
			eq, raw, ok := r.speedup(name, impl)
			switch {
			case !ok:
				cells = append(cells, fmtRate(1e9/ns), "—", "—")
			case cpuBound(cs):
				// A computing critical section lasts longer when more of
				// them share the cores: only throughput compares.
				cells = append(cells, fmtRate(1e9/ns), "n/a", fmt.Sprintf("%.1f×", raw))
			default:
				cells = append(cells, fmtRate(1e9/ns), fmt.Sprintf("%.1f×", eq), fmt.Sprintf("%.1f×", raw))
			}
		}
		t.row(cells...)
	}
	var cs strings.Builder
	for _, c := range css {
		g, ok := r.median(gatewayName(c, "global"), "cs-µs")
		if !ok {
			continue
		}
		fmt.Fprintf(&cs, "- `%s`: a critical section lasted %.0f µs under the global lane", c, g)
		if l, ok := r.median(gatewayName(c, "lanes"), "cs-µs"); ok {
			fmt.Fprintf(&cs, ", %.0f µs under lanes", l)
		}
		cs.WriteString(" (medians of the mean)")
		// cpu-%: how busy the processors were. Near 100%, throughput was
		// bound by CPU (every waiting handler that yields in a loop costs
		// some), not by how many keys the lane let run at once.
		var busy []string
		for _, impl := range []string{"global", "lanes", "lanes-queue"} {
			if u, ok := r.median(gatewayName(c, impl), "cpu-%"); ok {
				busy = append(busy, fmt.Sprintf("%s %.0f%%", impl, u))
			}
		}
		if len(busy) > 0 {
			fmt.Fprintf(&cs, "; processors busy: %s", strings.Join(busy, ", "))
		}
		cs.WriteString(".\n")
	}
	return t.String() + "\n" + cs.String()
}

func gatewayKeysTable(r *results) string {
	impls := r.values("GatewayKeys/", "impl")
	t := newTable(append(append([]string{"keys"}, impls...), "ideal")...)
	for _, k := range r.values("GatewayKeys/", "keys") {
		var n int
		fmt.Sscan(k, &n)
		cells := []string{k}
		name := func(impl string) string { return gatewayKeysName(n, impl) }
		for _, impl := range impls {
			eq, _, ok := r.speedup(name, impl)
			if !ok {
				cells = append(cells, "—")
				continue
			}
			cells = append(cells, fmt.Sprintf("%.1f×", eq))
		}
		t.row(append(cells, fmt.Sprintf("%d×", n))...)
	}
	return t.String()
}

func acquireAllTable(r *results) string {
	t := newTable("scenario", "keyed Acquire+Release", "global Acquire+Release", "AcquireAll(session, global)+Release", "queue ÷ keyed", "queue ÷ (keyed + global)")
	for _, sc := range r.values("AcquireAll/", "scenario") {
		k, kok := r.median(acquireAllName(sc, "keyed"), "ns/op")
		gl, gok := r.median(acquireAllName(sc, "global"), "ns/op")
		q, qok := r.median(acquireAllName(sc, "queue"), "ns/op")
		x, xs := "—", "—"
		if kok && qok {
			x = ratio(q / k)
		}
		if kok && gok && qok {
			xs = ratio(q / (k + gl))
		}
		t.row(sc, r.timeCell(acquireAllName(sc, "keyed")), r.timeCell(acquireAllName(sc, "global")), r.timeCell(acquireAllName(sc, "queue")), x, xs)
	}
	return t.String()
}

func targetsTable(vs []verdict) string {
	t := newTable("issue", "target", "measured (medians)", "verdict")
	for _, v := range vs {
		t.row(fmt.Sprintf("#%d", v.issue), v.what, v.measured, v.status.String())
	}
	return t.String()
}

// reportTable is adaptive's BenchmarkReport: one row per benchmark of the
// run under Report/, in the order of the run (the parallel one included).
func reportTable(r *results) string {
	t := newTable("benchmark", "time per report", "allocs/op")
	for _, n := range r.order {
		if !strings.HasPrefix(n, "Report/") {
			continue
		}
		a, _ := r.median(n, "allocs/op")
		t.row("`"+strings.TrimPrefix(n, "Report/")+"`", r.timeCell(n), fmt.Sprintf("%.0f", a))
	}
	return t.String()
}
