package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/lanequeue"
)

// manyLaneQueue builds a queue with a session lane "a-session", n global
// lanes of capacity 1 ("g0000", "g0001", ...) and a rate lane "z-rate" of
// burst 1 that does not refill during a test, and returns it with the
// names of all its lanes.
func manyLaneQueue(t *testing.T, n int) (*lanequeue.Queue[string], []string) {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "a-session"))
	names := []string{"a-session"}
	for i := range n {
		name := fmt.Sprintf("g%04d", i)
		must(t, addGlobal(q, name, 1))
		names = append(names, name)
	}
	must(t, addRate(q, "z-rate", rate.Limit(1e-9), 1))
	return q, append(names, "z-rate")
}

// globalsFree checks that every global lane of q holds nothing and grants
// its one permit to a TryAcquireAll (given back at once).
func globalsFree(t *testing.T, q *lanequeue.Queue[string], except string) {
	t.Helper()
	bad := 0
	for _, st := range q.Stats() {
		if st.Kind == lanequeue.Rate || st.Name == except {
			continue
		}
		if st.Held != 0 {
			bad++
			if bad <= 3 {
				t.Errorf("lane %q holds %d; want 0", st.Name, st.Held)
			}
			continue
		}
		tk, ok := tryAcquireAll(q, "probe", []string{st.Name})
		if !ok {
			t.Errorf("lane %q refuses a TryAcquireAll although it holds nothing", st.Name)
			continue
		}
		tk.Release()
	}
	if bad > 3 {
		t.Errorf("... %d lanes hold permits in all", bad)
	}
	if hs := q.Holders(); len(hs) != 0 && except == "" {
		t.Errorf("Holders lists %d lanes; want none", len(hs))
	}
}

// TestAcquireAllOfManyLanes names 256 lanes and more in one call (issue
// 11, defect 2). The count of lanes before the first rate lane was kept in
// a uint8: from 256 lanes on it wrapped, the lanes past it were taken as
// if they were rate lanes (their permits dropped), Release freed nothing
// on them, and a failed call kept what it had taken.
func TestAcquireAllOfManyLanes(t *testing.T) {
	for _, n := range []int{255, 256, 300, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Run("AcquireAll then Release", func(t *testing.T) {
				q, names := manyLaneQueue(t, n)
				ls, err := q.Lanes(names...)
				must(t, err)
				tk, err := q.AcquireAll(context.Background(), "k", ls)
				must(t, err)
				if got := len(lanequeue.TicketLanes(tk)); got != len(names) {
					t.Fatalf("ticket has %d lanes; want %d", got, len(names))
				}
				for _, st := range q.Stats() {
					if st.Kind == lanequeue.Global && st.Held != 1 {
						t.Fatalf("lane %q holds %d while the ticket is out; want 1", st.Name, st.Held)
					}
				}
				if hs := q.Holders(); len(hs) != len(names)-1 {
					t.Fatalf("Holders lists %d lanes; want %d", len(hs), len(names)-1)
				}
				if !tk.Release() {
					t.Fatal("Release = false")
				}
				globalsFree(t, q, "")
			})
			t.Run("TryAcquireAll then Release", func(t *testing.T) {
				q, names := manyLaneQueue(t, n)
				ls, err := q.Lanes(names...)
				must(t, err)
				tk, ok := q.TryAcquireAll("k", ls)
				if !ok {
					t.Fatal("TryAcquireAll = false on free lanes")
				}
				tk.Release()
				globalsFree(t, q, "")
			})
			last := fmt.Sprintf("g%04d", n-1)
			t.Run("TryAcquireAll fails on the last lane", func(t *testing.T) {
				q, names := manyLaneQueue(t, n)
				busy, ok := tryAcquireAll(q, "other", []string{last})
				if !ok {
					t.Fatal("TryAcquireAll of one free lane = false")
				}
				defer busy.Release()
				if tk, ok := tryAcquireAll(q, "k", names); ok {
					tk.Release()
					t.Fatalf("TryAcquireAll = true with %q busy", last)
				}
				globalsFree(t, q, last)
				tokenKept(t, q, "z-rate")
			})
			t.Run("AcquireAll cancelled on the last lane", func(t *testing.T) {
				q, names := manyLaneQueue(t, n)
				busy, ok := tryAcquireAll(q, "other", []string{last})
				if !ok {
					t.Fatal("TryAcquireAll of one free lane = false")
				}
				ctx, cancel := context.WithCancel(context.Background())
				ch := acquireAsync(ctx, q, "k", names)
				waitFor(t, "the caller to wait on the last lane", func() bool { return laneStats(t, q, last).Waiters == 1 })
				cancel()
				if r := receive(t, ch); !errors.Is(r.err, context.Canceled) {
					r.t.Release()
					t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
				}
				busy.Release()
				globalsFree(t, q, "")
				tokenKept(t, q, "z-rate")
			})
		})
	}
}

// tokenKept checks that the rate lane of burst 1 still has its token.
func tokenKept(t *testing.T, q *lanequeue.Queue[string], lane string) {
	t.Helper()
	tk, ok := tryAcquireAll(q, "probe", []string{lane})
	if !ok {
		t.Fatalf("rate lane %q: token spent by a failed call", lane)
	}
	tk.Release()
}
