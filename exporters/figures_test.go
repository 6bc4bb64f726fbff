package exporters_test

import (
	"strings"
	"testing"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/lanequeue"
)

func lanes(sts ...lanequeue.LaneStats) exporters.Source {
	return exporters.SourceFunc(func() []lanequeue.LaneStats { return sts })
}

// TestFleetMarksThroughJoin: Fleet marks the lanes named, and Join keeps
// the marks of every source it joins, nested or not; Read sets Lane.Fleet
// from them and from the lanes' own snapshots, and from nothing else.
func TestFleetMarksThroughJoin(t *testing.T) {
	local := lanes(lanequeue.LaneStats{Name: "local", Kind: lanequeue.Global, Capacity: 4})
	redis := exporters.Fleet(lanes(
		lanequeue.LaneStats{Name: "model", Kind: lanequeue.Global, Capacity: 48, Held: 10},
		lanequeue.LaneStats{Name: "tenant", Kind: lanequeue.Keyed, Capacity: 2, Held: 3, Keys: 1},
		lanequeue.LaneStats{Name: "plain", Kind: lanequeue.Global, Capacity: 8},
	), "model", "tenant")
	// A lane whose snapshot says it is a fleet's (a redislane lane's) needs
	// no mark.
	self := lanes(lanequeue.LaneStats{Name: "self", Kind: lanequeue.Global, Capacity: 6, Fleet: true})
	src := exporters.Join(local, exporters.Join(redis), self)
	got, err := exporters.Read(src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"local": false, "model": true, "tenant": true, "plain": false, "self": true}
	if len(got) != len(want) {
		t.Fatalf("%d lanes read: %+v", len(got), got)
	}
	for _, l := range got {
		if l.Fleet != want[l.Name] {
			t.Errorf("lane %s: Fleet %v; want %v", l.Name, l.Fleet, want[l.Name])
		}
	}
}

// TestLaneCapacities: each kind of lane's capacities, on the footings the
// package doc gives them.
func TestLaneCapacities(t *testing.T) {
	type figs struct {
		capacity, key, fleet int64
		hasCap, hasKey, hasF bool
		keys                 int
	}
	for _, c := range []struct {
		name string
		lane exporters.Lane
		want figs
	}{
		{"global", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Global, Capacity: 48, Held: 30}},
			figs{capacity: 48, hasCap: true}},
		{"rate", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Rate, Capacity: 5}},
			figs{capacity: 5, hasCap: true}},
		{"keyed", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Keyed, Capacity: 2, Held: 220, Keys: 160}},
			figs{capacity: 320, hasCap: true, key: 2, hasKey: true, keys: 160}},
		// Keys read after a key holding permits was dropped: raised to the
		// fewest keys that hold 7 permits of 2 each.
		{"keyed, keys read late", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Keyed, Capacity: 2, Held: 7, Keys: 2}},
			figs{capacity: 8, hasCap: true, key: 2, hasKey: true, keys: 4}},
		{"keyed, no keys", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Keyed, Capacity: 1}},
			figs{capacity: 0, hasCap: true, key: 1, hasKey: true}},
		{"fleet", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Global, Capacity: 48, Held: 10, Fleet: true}},
			figs{fleet: 48, hasF: true}},
		{"fleet, keyed", exporters.Lane{LaneStats: lanequeue.LaneStats{Kind: lanequeue.Keyed, Capacity: 2, Held: 7, Keys: 1, Fleet: true}},
			figs{key: 2, hasKey: true, keys: 1}},
	} {
		var got figs
		got.capacity, got.hasCap = c.lane.InstanceCapacity()
		got.key, got.hasKey = c.lane.KeyCapacity()
		got.fleet, got.hasF = c.lane.FleetCapacity()
		if c.lane.Kind == lanequeue.Keyed {
			got.keys = c.lane.KeysAlive()
		}
		if got != c.want {
			t.Errorf("%s: got %+v; want %+v", c.name, got, c.want)
		}
		if n, ok := c.lane.InstanceCapacity(); ok && n > 0 && c.lane.Held > n {
			t.Errorf("%s: %d held of a capacity of %d", c.name, c.lane.Held, n)
		}
	}
}

// TestReadRepeatedLane: a lane name given twice is read once, the first,
// with an error naming it.
func TestReadRepeatedLane(t *testing.T) {
	src := lanes(lanequeue.LaneStats{Name: "g", Capacity: 1}, lanequeue.LaneStats{Name: "g", Capacity: 2})
	got, err := exporters.Read(src)
	if err == nil || !strings.Contains(err.Error(), `lane "g" twice`) {
		t.Fatalf("error %v; want one naming lane g", err)
	}
	if len(got) != 1 || got[0].LaneStats.Capacity != 1 {
		t.Fatalf("read %+v; want the first lane g only", got)
	}
}

// TestFleetRefusesNothing: Fleet with no lane named, or no source, and
// Join of a nil source, panic at once rather than marking nothing, or at
// the first scrape in the registry's goroutine (Join did, found by a new
// user's trial).
func TestFleetRefusesNothing(t *testing.T) {
	for name, f := range map[string]func(){
		"no lane":         func() { exporters.Fleet(lanes()) },
		"no source":       func() { exporters.Fleet(nil, "model") },
		"Join with a nil": func() { exporters.Join(lanes(), nil) },
		// typed nils, which passed a == nil check and crashed the first
		// scrape (a review found them)
		"Join with a nil queue":      func() { exporters.Join(lanes(), (*lanequeue.Queue[string])(nil)) },
		"Join with a nil SourceFunc": func() { exporters.Join(lanes(), exporters.SourceFunc(nil)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	// A nil source's panic names Fleet, as its other refusals do.
	func() {
		defer func() {
			if r := recover(); r != "exporters: Fleet: nil source" {
				t.Errorf("Fleet(nil, ...) recovered %v; want the panic \"exporters: Fleet: nil source\"", r)
			}
		}()
		exporters.Fleet(nil, "model")
	}()
}

// TestFleetRefusesEmptyLaneName: Fleet refuses an empty lane name, which
// no lane can have (a queue and the adapters refuse one) and so marks
// nothing, with the panic of the other constructors' empty names, wherever
// it stands among the names.
func TestFleetRefusesEmptyLaneName(t *testing.T) {
	const want = "exporters: Fleet: empty lane name"
	for name, lanesNamed := range map[string][]string{
		"alone":   {""},
		"after":   {"model", ""},
		"between": {"model", "", "tenant"},
	} {
		func() {
			defer func() {
				if r := recover(); r != want {
					t.Errorf("Fleet with an empty name %s: recovered %v; want the panic %q", name, r, want)
				}
			}()
			exporters.Fleet(lanes(), lanesNamed...)
		}()
	}
}

// TestLaneInUse: a global or keyed lane's in use is its Held; a rate
// lane's, which holds nothing, is what its window counts (Used), and a
// rate lane of the user's own that reports Held keeps it.
func TestLaneInUse(t *testing.T) {
	for _, c := range []struct {
		st   lanequeue.LaneStats
		want int64
	}{
		{lanequeue.LaneStats{Kind: lanequeue.Global, Held: 4, Used: 9}, 4},
		{lanequeue.LaneStats{Kind: lanequeue.Keyed, Held: 2}, 2},
		{lanequeue.LaneStats{Kind: lanequeue.Rate, Used: 7}, 7},
		{lanequeue.LaneStats{Kind: lanequeue.Rate, Held: 3}, 3},
	} {
		if got := (exporters.Lane{LaneStats: c.st}).InUse(); got != c.want {
			t.Errorf("%v lane with Held %d, Used %d: InUse %d; want %d", c.st.Kind, c.st.Held, c.st.Used, got, c.want)
		}
	}
}
