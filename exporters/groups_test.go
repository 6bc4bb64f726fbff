package exporters_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// waitsOf feeds w the waits of a queue's hooks directly: each call is one
// granted wait of d on lane, by group, ending at the clock's now.
type waitsOf struct {
	hooks lanequeue.Hooks[string]
	now   time.Time
}

func newWaits(w *exporters.GroupWaits, h lanequeue.Hooks[string]) *waitsOf {
	f := &waitsOf{hooks: exporters.GroupHooks(w, h), now: time.Unix(1_700_000_000, 0)}
	exporters.SetGroupClock(w, func() time.Time { return f.now })
	return f
}

func (f *waitsOf) wait(lane, group string, d time.Duration) {
	f.hooks.OnSlowWait(lanequeue.Event[string]{Lane: lane, Kind: lanequeue.Global, Key: group + "/1", Weight: 1,
		Since: f.now.Add(-d), Duration: d, Group: group})
}

// groupsOf returns the lane's groups from w.Lanes, by name (OtherGroup
// included), and fails if the lane is not there.
func groupsOf(t *testing.T, w *exporters.GroupWaits, lane string) ([]exporters.GroupWait, map[string]semaphore.Histogram) {
	t.Helper()
	for _, l := range w.Lanes() {
		if l.Lane == lane {
			m := map[string]semaphore.Histogram{}
			for _, g := range l.Groups {
				if _, dup := m[g.Group]; dup {
					t.Fatalf("lane %s: group %q twice in %+v", lane, g.Group, l.Groups)
				}
				m[g.Group] = g.Waits
			}
			return l.Groups, m
		}
	}
	t.Fatalf("lane %s not in %+v", lane, w.Lanes())
	return nil, nil
}

// With many more groups than TopGroups, a lane has TopGroups+1 series,
// "other" last; "other" holds exactly the waits of the groups without a
// series, and the series add up to every wait recorded, count and sum.
func TestGroupWaitsBoundAndOtherSumsTheRest(t *testing.T) {
	w := exporters.NewGroupWaits(exporters.TopGroups(3))
	f := newWaits(w, lanequeue.Hooks[string]{})
	var total, otherWant int
	var totalSum time.Duration
	for i := range 50 { // group g0 waits once, g1 twice, ...: g0..g2 come first
		g := fmt.Sprintf("g%d", i)
		for range i + 1 {
			d := time.Duration(i+1) * time.Millisecond
			f.wait("agents", g, d)
			total++
			totalSum += d
			if i >= 3 {
				otherWant++
			}
		}
	}
	groups, byName := groupsOf(t, w, "agents")
	if len(groups) != 4 || groups[3].Group != exporters.OtherGroup {
		t.Fatalf("%d series %+v; want 3 groups and %q last", len(groups), groups, exporters.OtherGroup)
	}
	for i, g := range []string{"g0", "g1", "g2"} {
		if byName[g].Count != uint64(i+1) {
			t.Errorf("group %s: %d waits; want %d", g, byName[g].Count, i+1)
		}
	}
	var count, buckets uint64
	var sum time.Duration
	for _, g := range groups {
		count += g.Waits.Count
		sum += g.Waits.Sum
		for _, c := range g.Waits.Counts {
			buckets += c
		}
	}
	if other := byName[exporters.OtherGroup]; other.Count != uint64(otherWant) {
		t.Errorf("other: %d waits; want %d, the waits of g3..g49", other.Count, otherWant)
	}
	if count != uint64(total) || buckets != uint64(total) || sum != totalSum {
		t.Errorf("the series add up to %d waits (%d in buckets), %v; want %d, %v", count, buckets, sum, total, totalSum)
	}
}

// A group keeps the series it has, and one without keeps waiting under
// "other", however the counts move between scrapes (a ranking redone at
// each scrape would move g2 in and g0 out). Only a group that has not
// waited for GroupIdle gives its series up, at a scrape: its counts go to
// "other", no count goes down, and the next group to wait takes the
// series.
func TestGroupWaitsChoiceIsStable(t *testing.T) {
	w := exporters.NewGroupWaits(exporters.TopGroups(2), exporters.GroupIdle(90*time.Second))
	f := newWaits(w, lanequeue.Hooks[string]{})
	f.wait("agents", "g0", time.Millisecond)
	f.wait("agents", "g1", time.Millisecond)
	var last map[string]semaphore.Histogram
	for scrape := range 5 {
		for range 10 {
			f.wait("agents", "g2", time.Millisecond) // the busiest, but came third
		}
		f.wait("agents", "g1", time.Millisecond)
		if scrape == 0 {
			f.wait("agents", "g0", time.Millisecond)
		}
		f.now = f.now.Add(20 * time.Second) // g0 idle 100s at the last scrape, g1 never
		_, byName := groupsOf(t, w, "agents")
		if _, ok := byName["g2"]; ok {
			t.Fatalf("scrape %d: g2 has a series of its own while g0 and g1 keep waiting within GroupIdle: %v", scrape, byName)
		}
		if scrape < 4 {
			if _, ok := byName["g0"]; !ok {
				t.Fatalf("scrape %d: g0 lost its series before it was idle 90s: %v", scrape, byName)
			}
		}
		for g, h := range last {
			if now, ok := byName[g]; ok && now.Count < h.Count {
				t.Fatalf("scrape %d: group %s went down from %d to %d", scrape, g, h.Count, now.Count)
			}
		}
		last = byName
	}
	// g0 last waited 100s ago: its series went to "other" at the last
	// scrape, its 2 waits with it.
	if _, ok := last["g0"]; ok {
		t.Fatalf("g0, idle 100s with GroupIdle 90s, keeps its series: %v", last)
	}
	if got, want := last[exporters.OtherGroup].Count, uint64(50+2); got != want {
		t.Fatalf("other: %d waits; want %d (g2's 50 and the idle g0's 2)", got, want)
	}
	f.wait("agents", "g2", time.Millisecond)
	_, byName := groupsOf(t, w, "agents")
	if byName["g2"].Count != 1 || byName[exporters.OtherGroup].Count != 52 || byName["g1"].Count != 6 {
		t.Fatalf("after g0's series went: %v; want g2 1 (its own from now on), other 52, g1 6", byName)
	}
}

// GroupHooks records every granted wait of a global lane and passes on to
// the hooks it wraps the waits they ask for (longer than their SlowWait),
// as they would get them alone; a wait that ends without a grant, a keyed
// lane's and a lane whose waits name no group are in no series.
func TestGroupHooksKeepTheHooksTheyWrap(t *testing.T) {
	w := exporters.NewGroupWaits()
	var passed []time.Duration
	f := newWaits(w, lanequeue.Hooks[string]{SlowWait: time.Second, OnSlowWait: func(e lanequeue.Event[string]) {
		passed = append(passed, e.Duration)
	}})
	f.wait("agents", "small", 10*time.Millisecond)
	f.wait("agents", "small", 2*time.Second)
	f.wait("model", "", 3*time.Second) // a global lane without groups
	f.hooks.OnSlowWait(lanequeue.Event[string]{Lane: "agents", Kind: lanequeue.Global, Group: "small", Duration: 5 * time.Second, Err: errors.New("cancelled")})
	f.hooks.OnSlowWait(lanequeue.Event[string]{Lane: "thread", Kind: lanequeue.Keyed, Group: "small", Duration: time.Millisecond})
	if len(passed) != 3 || passed[0] != 2*time.Second || passed[1] != 3*time.Second || passed[2] != 5*time.Second {
		t.Errorf("the wrapped OnSlowWait got %v; want the waits over 1s: 2s, 3s, 5s", passed)
	}
	lanes := w.Lanes()
	if len(lanes) != 1 || lanes[0].Lane != "agents" {
		t.Fatalf("lanes %+v; want agents only", lanes)
	}
	if g := lanes[0].Groups; len(g) != 2 || g[0].Group != "small" || g[0].Waits.Count != 2 || g[1].Waits.Count != 0 {
		t.Fatalf("agents' groups %+v; want small's 2 granted waits, other empty", g)
	}
}

// A bad setting panics with an error wrapping semaphore.ErrInvalidConfig.
func TestNewGroupWaitsRefusesBadSettings(t *testing.T) {
	for name, opt := range map[string]exporters.GroupOption{
		"TopGroups(0)": exporters.TopGroups(0), "GroupIdle(0)": exporters.GroupIdle(0), "GroupIdle(-1s)": exporters.GroupIdle(-time.Second),
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, semaphore.ErrInvalidConfig) {
					t.Errorf("NewGroupWaits(%s) panicked with %v; want an error wrapping ErrInvalidConfig", name, err)
				}
			}()
			exporters.NewGroupWaits(opt)
		}()
	}
}

// A call that waits in line on a global lane and then for the lane's
// cooldown is reported to the hooks twice (Event.Cooldown marks the
// second), and GroupHooks records one wait, as the lane counts one in
// Waited. It recorded both, so the group series passed lanes_waited_total
// (a new user's trial of the exporters found it).
func TestGroupHooksCountACooldownWaitOnce(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	s := semaphore.New(1, semaphore.WithFairShare(nil))
	if err := q.Add("agents", lanequeue.NewGlobalLane[string](s)); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	q.SetClock(clk)
	w := exporters.NewGroupWaits()
	q.SetHooks(exporters.GroupHooks(w, lanequeue.Hooks[string]{}))
	set, err := q.Lanes("agents")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	busy, err := q.AcquireAll(ctx, "k0", set, semaphore.Group("B"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		tk, err := q.AcquireAll(ctx, "k1", set, semaphore.Group("A"))
		if err == nil {
			tk.Release()
		}
		done <- err
	}()
	testkit.Eventually(t, "k1 to wait in line", func() bool { return s.Stats().Waiters == 1 })
	if err := q.Cooldown(ctx, "agents", time.Minute); err != nil {
		t.Fatal(err)
	}
	busy.Release() // k1 is granted, then waits out the cooldown
	pending := make(chan struct{})
	go func() { clk.BlockUntilPending(1); close(pending) }()
	testkit.Recv(t, pending, "k1's cooldown timer")
	clk.Advance(time.Minute)
	if err := testkit.Recv(t, done, "k1's call"); err != nil {
		t.Fatal(err)
	}
	_, groups := groupsOf(t, w, "agents")
	if got, waited := groups["A"].Count, s.Stats().Waited; got != 1 || waited != 1 {
		t.Fatalf("group A recorded %d waits, the lane counts %d in Waited; want 1 and 1", got, waited)
	}
}
