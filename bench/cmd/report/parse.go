package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// results holds every measurement of a run: name (without the "Benchmark"
// prefix and the -GOMAXPROCS suffix) -> unit -> samples, one per -count.
type results struct {
	samples map[string]map[string][]float64
	order   []string // names in the order they first appeared
	procs   int      // GOMAXPROCS of the run (the -N suffix)
	// meta holds the "lanes-KEY: value" lines the report writes at the top
	// of a run's output (commit, date, count, ...), so that a saved run
	// renders with the facts of the run, not of the rendering.
	meta map[string]string
}

var (
	benchLine = regexp.MustCompile(`^Benchmark(\S+)\s+(\d+)\s+(.+)$`)
	metaLine  = regexp.MustCompile(`^lanes-([a-z]+): (.*)$`)
	procsTail = regexp.MustCompile(`-(\d+)$`)
)

// parse reads the text output of `go test -bench` (the standard benchmark
// format) and keeps every result line; other lines are ignored.
func parse(r io.Reader) (*results, error) {
	res := &results{samples: map[string]map[string][]float64{}, meta: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if mm := metaLine.FindStringSubmatch(sc.Text()); mm != nil {
			res.meta[mm[1]] = mm[2]
			continue
		}
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := m[1]
		if p := procsTail.FindStringSubmatch(name); p != nil {
			name = strings.TrimSuffix(name, p[0])
			res.procs, _ = strconv.Atoi(p[1])
		}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("malformed benchmark line: %q", sc.Text())
		}
		units := res.samples[name]
		if units == nil {
			units = map[string][]float64{}
			res.samples[name] = units
			res.order = append(res.order, name)
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("bad value %q in %q", fields[i], sc.Text())
			}
			units[fields[i+1]] = append(units[fields[i+1]], v)
		}
	}
	return res, sc.Err()
}

// median returns the median of the samples of name in unit.
func (r *results) median(name, unit string) (float64, bool) {
	s := r.samples[name][unit]
	if len(s) == 0 {
		return 0, false
	}
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2], true
	}
	return (c[n/2-1] + c[n/2]) / 2, true
}

// maxCount returns the largest number of samples of any benchmark: the
// -count of the run.
func (r *results) maxCount() int {
	n := 0
	for _, units := range r.samples {
		for _, s := range units {
			n = max(n, len(s))
		}
	}
	return n
}

// count returns the number of samples of name in unit.
func (r *results) count(name, unit string) int { return len(r.samples[name][unit]) }

// spread returns the largest deviation of a sample from the median, as a
// fraction of the median (what benchstat prints as ±x%).
func (r *results) spread(name, unit string) float64 {
	m, ok := r.median(name, unit)
	if !ok || m == 0 {
		return 0
	}
	var worst float64
	for _, v := range r.samples[name][unit] {
		d := v - m
		if d < 0 {
			d = -d
		}
		if d > worst {
			worst = d
		}
	}
	return worst / m
}

// modes describes how the samples of name spread: one mode ("unimodal,
// min–max") or two, split at the widest gap between consecutive sorted
// samples when that gap is more than 1.5x ("bimodal: k of n near a, the
// rest near b", a and b each mode's median).
func (r *results) modes(name, unit string) string {
	s := append([]float64(nil), r.samples[name][unit]...)
	if len(s) == 0 {
		return "none"
	}
	sort.Float64s(s)
	split, gap := 0, 1.5
	for i := 1; i < len(s); i++ {
		if s[i-1] > 0 && s[i]/s[i-1] > gap {
			split, gap = i, s[i]/s[i-1]
		}
	}
	if split == 0 {
		return fmt.Sprintf("unimodal, %s–%s", fmtNs(s[0]), fmtNs(s[len(s)-1]))
	}
	mid := func(c []float64) float64 {
		n := len(c)
		if n%2 == 1 {
			return c[n/2]
		}
		return (c[n/2-1] + c[n/2]) / 2
	}
	return fmt.Sprintf("bimodal, %d of %d near %s, the rest near %s", split, len(s), fmtNs(mid(s[:split])), fmtNs(mid(s[split:])))
}
