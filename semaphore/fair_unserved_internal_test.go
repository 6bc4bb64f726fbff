package semaphore

import (
	"math/rand"
	"testing"

	"github.com/sessionlane/lanes/internal/permit"
)

// A random walk of joins, grants (keys served in any order, as aging may),
// grants reaching their waiters, releases (tokens reused by any band) and
// give-backs, against a model of each band's v: with at most one
// give-back since the band's last join v is exact (the largest key of the
// grants that were not given back, or v at the join); with more, v lies
// between that and the largest key served since the join.
func TestFairUnservedRandomWalk(t *testing.T) {
	type grant struct {
		band  int32
		gen   int
		key   int64
		tok   *permit.Token
		alive bool // not given back
		done  bool // reached its waiter (cannot be given back)
	}
	type mband struct {
		gen     int
		exists  bool
		vJoin   int64
		keys    []*grant
		gb      int
		waiting []int64
	}
	for seed := int64(0); seed < 3000; seed++ {
		r := rand.New(rand.NewSource(seed))
		s := New(1, WithFairShare(nil))
		toks := make([]*permit.Token, 4)
		for i := range toks {
			toks[i] = new(permit.Token)
		}
		free := append([]*permit.Token(nil), toks...)
		var out []*grant
		bands := map[int32]*mband{0: {}, 1: {}, 2: {}}
		groups := []string{"a", "b", "c"}
		check := func(step int, what string) {
			for bn, m := range bands {
				b := s.fair.lookup(bn)
				if !m.exists {
					if b != nil {
						t.Fatalf("seed %d step %d (%s): band %d exists, model says not", seed, step, what, bn)
					}
					continue
				}
				exact, hi := m.vJoin, m.vJoin
				for _, g := range m.keys {
					hi = max(hi, g.key)
					if g.alive {
						exact = max(exact, g.key)
					}
				}
				if m.gb <= 1 && b.v != exact {
					t.Fatalf("seed %d step %d (%s): band %d v = %d, want %d (give-backs %d)", seed, step, what, bn, b.v, exact, m.gb)
				}
				if b.v < exact || b.v > hi {
					t.Fatalf("seed %d step %d (%s): band %d v = %d, want in [%d, %d]", seed, step, what, bn, b.v, exact, hi)
				}
			}
		}
		for step := 0; step < 60; step++ {
			bn := int32(r.Intn(3))
			m := bands[bn]
			var what string
			switch op := r.Intn(5); {
			case op == 0 || !m.exists && op < 3: // join
				what = "join"
				if !m.exists {
					m.gen++
					m.exists, m.keys, m.gb, m.waiting = true, nil, 0, nil
				}
				if b := s.fair.lookup(bn); b != nil {
					m.vJoin = b.v
				} else {
					m.vJoin = 0
				}
				m.keys, m.gb = nil, 0
				key := s.fairKey(bn, groups[r.Intn(3)], int64(1+r.Intn(2)), fairScale)
				m.waiting = append(m.waiting, key)
			case op <= 2: // grant any waiting key of the band (aging: out of order)
				if len(m.waiting) == 0 || len(free) == 0 {
					continue
				}
				what = "grant"
				i := r.Intn(len(m.waiting))
				key := m.waiting[i]
				m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
				j := r.Intn(len(free))
				tok := free[j]
				free = append(free[:j], free[j+1:]...)
				s.fair.served(bn, key, tok)
				s.fair.left(bn)
				g := &grant{band: bn, gen: m.gen, key: key, tok: tok, alive: true}
				m.keys = append(m.keys, g)
				out = append(out, g)
				if len(m.waiting) == 0 {
					m.exists = false
				}
			case op == 3: // a grant reaches its waiter, or a done one is released
				if len(out) == 0 {
					continue
				}
				i := r.Intn(len(out))
				g := out[i]
				if !g.done {
					what = "reached"
					g.done = true
					continue
				}
				what = "release"
				out = append(out[:i], out[i+1:]...)
				free = append(free, g.tok)
			case op == 4: // give back a grant that has not reached its waiter
				var cand []int
				for i, g := range out {
					if !g.done {
						cand = append(cand, i)
					}
				}
				if len(cand) == 0 {
					continue
				}
				what = "giveback"
				i := cand[r.Intn(len(cand))]
				g := out[i]
				out = append(out[:i], out[i+1:]...)
				free = append(free, g.tok)
				s.fair.unserved(g.band, g.key, g.tok)
				g.alive = false
				if gm := bands[g.band]; gm.exists && gm.gen == g.gen {
					// counted only if no join since: keys was reset by a join
					for _, k := range gm.keys {
						if k == g {
							gm.gb++
						}
					}
				}
			}
			check(step, what)
		}
	}
}
