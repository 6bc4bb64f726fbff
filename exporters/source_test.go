package exporters_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestScenarioFigures checks the figures that the exporters' tests expect
// on the lanes' own Stats, so that an exporter's test fails for the
// exporter, not for a scenario that counted differently.
func TestScenarioFigures(t *testing.T) {
	q, stop := scenario.Queue(t)
	defer stop()
	want := map[string]lanequeue.LaneStats{
		"session": {Name: "session", Kind: lanequeue.Keyed, Capacity: 1, Held: 1, Waiters: 1, Keys: 3,
			Counters: semaphore.Counters{Acquired: 4, Released: 3, Waited: 1, Cancelled: 1}},
		"global": {Name: "global", Kind: lanequeue.Global, Capacity: 3, Held: 1,
			Counters: semaphore.Counters{Acquired: 4, Released: 3}},
		"rate": {Name: "rate", Kind: lanequeue.Rate, Capacity: 5, Used: 1, Counters: semaphore.Counters{Acquired: 1}},
	}
	got := q.Stats()
	if len(got) != len(want) {
		t.Fatalf("%d lanes: %+v", len(got), got)
	}
	for _, st := range got {
		if st != want[st.Name] {
			t.Errorf("lane %s:\n got %+v\nwant %+v", st.Name, st, want[st.Name])
		}
	}
}

// TestAdapters: Semaphore and Keyed give one lane each, under the name
// given, with the semaphore's figures; Join lists them in order.
func TestAdapters(t *testing.T) {
	s, stopS := scenario.Semaphore(t)
	defer stopS()
	k, stopK := scenario.Keyed(t)
	defer stopK()
	got := exporters.Join(exporters.Semaphore("api", s), exporters.Keyed("jobs", k)).Stats()
	want := []lanequeue.LaneStats{
		{Name: "api", Kind: lanequeue.Global, Capacity: 4, Held: 3,
			Counters: semaphore.Counters{Acquired: 2, Released: 1, Rejected: 1, DoubleReleases: 1}},
		{Name: "jobs", Kind: lanequeue.Keyed, Capacity: 2, Held: 1, Keys: 2,
			Counters: semaphore.Counters{Acquired: 2, Released: 1}},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("joined stats\n got %+v\nwant %+v", got, want)
	}
	s.Close()
	if st := exporters.Semaphore("api", s).Stats()[0]; !st.Closed {
		t.Fatalf("closed semaphore's lane %+v: not Closed", st)
	}
}

// TestAdaptersRefuseEmptyName: Semaphore, Keyed and Controllers refuse an
// empty lane name with a panic at once, as a queue refuses one, rather
// than export a lane under an empty label (a review found Semaphore's).
func TestAdaptersRefuseEmptyName(t *testing.T) {
	k := keyedsem.New[int]()
	defer k.Close()
	ctl := scenario.Controllers(t)["idle"]
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Semaphore":   {func() { exporters.Semaphore("", semaphore.New(1)) }, "exporters: Semaphore: empty lane name"},
		"Keyed":       {func() { exporters.Keyed("", k) }, "exporters: Keyed: empty lane name"},
		"Controllers": {func() { exporters.Controllers(map[string]*adaptive.Controller{"": ctl}) }, "exporters: Controllers: empty lane name"},
	} {
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("%s with an empty name: recovered %v; want the panic %q", name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestAdaptersRefuseNilSemaphore: Semaphore and Keyed refuse a nil
// semaphore with a panic of their own, at once, as Fleet and Join refuse a
// nil source, rather than with lanequeue's message from inside its lane
// adapter, which named neither the constructor nor this package.
func TestAdaptersRefuseNilSemaphore(t *testing.T) {
	for name, c := range map[string]struct {
		f    func()
		want string
	}{
		"Semaphore": {func() { exporters.Semaphore("api", nil) }, "exporters: Semaphore: nil semaphore"},
		"Keyed":     {func() { exporters.Keyed[int]("jobs", nil) }, "exporters: Keyed: nil keyed semaphore"},
	} {
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("%s with a nil semaphore: recovered %v; want the panic %q", name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestSemaphoreOfCapacityZeroIsOpen: a semaphore of capacity 0 (made so,
// or resized to 0 to pause it) is exported open, with its figures, and
// with its capacity once it grows; only Close makes its lane closed. Made
// at 0, it was reported closed with no figures, for good: the lane that
// lanequeue.NewGlobalLane makes of it, which a queue refuses, reported
// itself so.
func TestSemaphoreOfCapacityZeroIsOpen(t *testing.T) {
	stats := func(s *semaphore.Weighted) lanequeue.LaneStats { return exporters.Semaphore("api", s).Stats()[0] }

	made := semaphore.New(0)
	if st := stats(made); st.Closed || st.Kind != lanequeue.Global || st.Capacity != 0 {
		t.Fatalf("semaphore made at capacity 0: lane %+v; want an open global lane of capacity 0", st)
	}
	src := exporters.Semaphore("api", made)
	made.SetCapacity(3)
	p, ok := made.TryAcquire(2)
	if !ok {
		t.Fatal("TryAcquire(2) at capacity 3 failed")
	}
	if st := src.Stats()[0]; st.Closed || st.Capacity != 3 || st.Held != 2 || st.Acquired != 1 {
		t.Fatalf("made at 0, resized to 3, 2 held: lane %+v", st)
	}
	made.SetCapacity(0) // paused, with its holder still in
	if st := src.Stats()[0]; st.Closed || st.Capacity != 0 || st.Held != 2 {
		t.Fatalf("resized to 0 with 2 held: lane %+v; want open, capacity 0, held 2", st)
	}
	p.Release()
	made.Close()
	if st := src.Stats()[0]; !st.Closed || st.Capacity != 0 || st.Released != 1 {
		t.Fatalf("closed at capacity 0: lane %+v; want closed, capacity 0, released 1", st)
	}

}

// TestTimedScenarioFigures checks scenario.Timed's histograms on the
// lane's own Stats: bucket by bucket, as the scenario's doc counts them.
func TestTimedScenarioFigures(t *testing.T) {
	q, stop := scenario.Timed(t)
	defer stop()
	st := scenario.Lane(q, "api")
	var wait, hold semaphore.Histogram
	wait.Counts[0], wait.Counts[13], wait.Count, wait.Sum = 2, 1, 3, 20*time.Millisecond
	hold.Counts[11], hold.Counts[13], hold.Count, hold.Sum = 1, 1, 2, 23*time.Millisecond
	if b := semaphore.HistogramBounds(); b[11] != 5*time.Millisecond || b[13] != 20*time.Millisecond {
		t.Fatalf("bounds %v: bucket 11 is not (2ms, 5ms] or 13 not (10ms, 20ms]", b)
	}
	if !st.Enabled || st.WaitTime != wait || st.HoldTime != hold {
		t.Fatalf("timings %+v\nwant wait %+v\n     hold %+v", st.Timings, wait, hold)
	}
	if st.Acquired != 3 || st.Released != 2 || st.Waited != 1 || st.Held != 1 {
		t.Fatalf("counters %+v, held %d", st.Counters, st.Held)
	}
}

// TestControllerFigures checks scenario.Controllers' figures on the
// controllers' own Stats, and that Controllers lists them by lane name.
func TestControllerFigures(t *testing.T) {
	got := exporters.Controllers(scenario.Controllers(t)).Limits()
	at := func(s int) time.Time { return scenario.Epoch.Add(time.Duration(s) * time.Second) }
	want := []exporters.Limit{
		{Lane: "idle", Stats: adaptive.Stats{Limit: 4, Floor: 1, Ceiling: 4, Algorithm: "aimd"}},
		{Lane: "model", Stats: adaptive.Stats{Limit: 9, Floor: 2, Ceiling: 20, Algorithm: "aimd",
			LastReason: adaptive.ReasonOverload, LastChange: at(2), Increases: 1, OverloadDecreases: 1,
			Windows: 2, Samples: 11, Overloads: 1, Latency: time.Second}},
		{Lane: "slow", Stats: adaptive.Stats{Limit: 6, Floor: 1, Ceiling: 16, Algorithm: "vegas",
			LastReason: adaptive.ReasonLatency, LastChange: at(3), Increases: 1, LatencyDecreases: 1,
			Windows: 2, Samples: 17, Latency: 2 * time.Second}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d limits: %+v", len(got), got)
	}
	for i := range want {
		g := got[i]
		g.Baseline = 0 // vegas's smoothing: not an exported figure
		if g != want[i] {
			t.Errorf("limit %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestKeyedHoldsRunOut: the Keyed adapter and a queue's keyed lane carry
// the keyed semaphore's reorder holds that ran out.
func TestKeyedHoldsRunOut(t *testing.T) {
	k, stop := scenario.Reordered(t)
	defer stop()
	q := lanequeue.New[string]()
	if err := q.Add("thread", lanequeue.NewKeyedLane(k)); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]exporters.Source{"queue": q, "keyed": exporters.Keyed("thread", k)} {
		if got := src.Stats()[0].HoldsRunOut; got != 1 {
			t.Errorf("from a %s source: HoldsRunOut %d; want 1", name, got)
		}
	}
}
