package waitq

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/permit"
)

// walkInsert is PushOrdered as it was before runs, on a slice, head
// first: the index at which w joins, found by walking from the newest one
// waiter at a time while w goes ahead of it. It is the reference of
// TestPushOrderedMatchesTheWalk.
func walkInsert(line []*Waiter, w *Waiter, step int64) int {
	i := len(line)
	for i > 0 && Ahead(&w.Place, line[i-1], step) {
		i--
	}
	return i
}

// PushOrdered, which passes a run of one band at a time where it can,
// puts every waiter where the walk of one waiter at a time puts it, on
// random histories of ordered pushes, serves of the head, waiters leaving
// from anywhere, and (keeping the runs right, if not ordering) Push and
// Rejoin; and the runs stay well formed after each step (checkRuns).
// Bands, ranks and arrivals are drawn from small ranges, so that ties,
// aging across bands (the step is drawn too) and ranks that reorder a
// band, leaving its oldest waiter behind its first, are common.
func TestPushOrderedMatchesTheWalk(t *testing.T) {
	tok := permit.NewToken(nil, -1)
	rapid.Check(t, func(t *rapid.T) {
		step := rapid.SampledFrom([]int64{0, 1, 5, 20, 1000, math.MaxInt64}).Draw(t, "step")
		bands := rapid.Int32Range(1, 5).Draw(t, "bands")
		var q Queue
		var line []*Waiter // the reference, head first
		now := int64(0)
		newWaiter := func(t *rapid.T) *Waiter {
			now += rapid.Int64Range(0, 12).Draw(t, "elapsed")
			// Arrivals are read before the lock: they may come out of order.
			arrival := max(now-rapid.Int64Range(0, 8).Draw(t, "early"), 0)
			return &Waiter{Place: Place{
				Band:    rapid.Int32Range(0, bands-1).Draw(t, "band"),
				Arrival: arrival,
				Rank:    rapid.Int64Range(0, 4).Draw(t, "rank"),
			}}
		}
		t.Repeat(map[string]func(*rapid.T){
			"PushOrdered": func(t *rapid.T) {
				w := newWaiter(t)
				i := walkInsert(line, w, step)
				line = slices.Insert(line, i, w)
				q.PushOrdered(w, step)
			},
			"serve": func(t *rapid.T) {
				if len(line) == 0 {
					t.Skip("nobody waits")
				}
				var c Chain
				q.serve(q.Head(), tok, &c)
				line = line[1:]
			},
			"leave": func(t *rapid.T) {
				if len(line) == 0 {
					t.Skip("nobody waits")
				}
				i := rapid.IntRange(0, len(line)-1).Draw(t, "leaving")
				unlink(&q, line[i])
				line = slices.Delete(line, i, i+1)
			},
			"Push": func(t *rapid.T) {
				if !rapid.Bool().Draw(t, "mix") {
					t.Skip("not mixing")
				}
				w := newWaiter(t)
				line = append(line, w)
				q.Push(w)
			},
			"Rejoin": func(t *rapid.T) {
				if !rapid.Bool().Draw(t, "mix") {
					t.Skip("not mixing")
				}
				w := newWaiter(t)
				line = slices.Insert(line, 0, w)
				q.Rejoin(w)
			},
			"": func(t *rapid.T) {
				var got []*Waiter
				for w := q.Head(); w != nil; w = w.Next() {
					got = append(got, w)
				}
				if !slices.Equal(got, line) {
					t.Fatalf("queue %v, the walk gives %v", places(got), places(line))
				}
				if n := q.Len(); n != len(line) {
					t.Fatalf("Len %d, with %d waiting", n, len(line))
				}
				checkRuns(t, &q)
			},
		})
	})
}

func places(ws []*Waiter) []Place {
	out := make([]Place, len(ws))
	for i, w := range ws {
		out[i] = w.Place
	}
	return out
}

// checkRuns fails t unless q is cut into runs as PushOrdered keeps them:
// stretches of one band; one of more than one waiter has its ends point at
// each other and its last hold at most its least arrival; every other
// waiter has no run field set. And the list's newest is head.prev.
func checkRuns(t *rapid.T, q *Queue) {
	h := q.Head()
	if h == nil {
		return
	}
	var newest *Waiter
	for w := h; w != nil; {
		// w begins a run.
		if w.runFirst != nil {
			t.Fatalf("the first of a run, %+v, has runFirst set", w.Place)
		}
		l := w.runLast
		if l == nil { // a run of one
			newest, w = w, w.next
			continue
		}
		if l == w || l.runFirst != w || l.runLast != nil {
			t.Fatalf("run from %+v: its last %+v does not point back", w.Place, l.Place)
		}
		least := w.Arrival
		for x := w.next; ; x = x.next {
			if x == nil {
				t.Fatalf("run from %+v: its last %+v is not behind it", w.Place, l.Place)
			}
			if x.Band != w.Band {
				t.Fatalf("run from %+v holds %+v, of another band", w.Place, x.Place)
			}
			least = min(least, x.Arrival)
			if x == l {
				break
			}
			if x.runFirst != nil || x.runLast != nil {
				t.Fatalf("run from %+v: %+v, inside it, has a run field set", w.Place, x.Place)
			}
		}
		if l.runMin > least {
			t.Fatalf("run from %+v to %+v: runMin %d, but an arrival is %d", w.Place, l.Place, l.runMin, least)
		}
		newest, w = l, l.next
	}
	if h.prev != newest {
		t.Fatalf("head.prev is %+v, the newest is %+v", h.prev.Place, newest.Place)
	}
}
