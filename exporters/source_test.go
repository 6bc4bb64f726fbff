package exporters_test

import (
	"testing"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
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
		"rate": {Name: "rate", Kind: lanequeue.Rate, Capacity: 5, Counters: semaphore.Counters{Acquired: 1}},
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
