package exporters

import (
	"fmt"
	"slices"

	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/lanequeue"
)

// FleetSource is a [Source] that marks some of its lanes as shared by a
// fleet of instances, for lanes whose snapshots do not say so themselves.
// A lane of package redislane says so (its LaneStats.Fleet is set), so a
// queue with Redis lanes needs no mark; [Fleet] marks the lanes of any
// other source whose capacity is a fleet's (every instance reports the
// whole fleet's capacity, but only its own permits in use), and [Join]
// keeps the marks of the sources it joins. The exporters report such a
// lane's capacity apart (see the package doc), so that a sum over
// instances does not count it once per instance.
type FleetSource interface {
	Source
	// FleetLanes names the lanes of Stats whose budget a fleet shares.
	FleetLanes() []string
}

// Fleet returns src with the lanes named marked as shared by a fleet of
// instances (lanes of a budget kept outside the process whose snapshots
// do not set LaneStats.Fleet; package redislane's set it): see
// [FleetSource]. It panics if src is nil, if no lane is named, or if a
// name is empty, which no lane can have (a queue and [Semaphore] refuse
// one); a name that src does not report marks nothing.
func Fleet(src Source, lanes ...string) FleetSource {
	if nilptr.Is(src) { // also a typed nil, such as a nil *lanequeue.Queue, which would fail at the first scrape
		panic("exporters: Fleet: nil source")
	}
	if len(lanes) == 0 {
		panic("exporters: Fleet names no lane")
	}
	for _, name := range lanes {
		checkName("Fleet", name)
	}
	return fleet{src: src, lanes: slices.Clone(lanes)}
}

type fleet struct {
	src   Source
	lanes []string
}

func (f fleet) Stats() []lanequeue.LaneStats { return f.src.Stats() }

func (f fleet) FleetLanes() []string {
	out := slices.Clone(f.lanes)
	if inner, ok := f.src.(FleetSource); ok {
		out = append(out, inner.FleetLanes()...)
	}
	return out
}

// Lane is one lane of a source as the exporters report it: its snapshot,
// with Fleet set when the lane says so or its source marks it
// ([FleetSource]), and the capacities on the footings of the package
// doc's metric model.
type Lane struct {
	lanequeue.LaneStats
}

// InUse is what this instance's lane has in use now: the permits it
// holds, over all keys (LaneStats.Held), and of a rate lane, which holds
// nothing, what its window counts (LaneStats.Used: requests its limiter
// has not refilled, tokens charged in the last minute). A fleet's rate
// lane (redislane.AsRateLane) reports 0: its count is in Redis.
func (l Lane) InUse() int64 {
	if l.Kind == lanequeue.Rate {
		return l.Held + l.Used // a lane of the user's own may report either
	}
	return l.Held
}

// InstanceCapacity is the capacity of this instance's lane on the footing
// of [Lane.InUse] (this instance's permits in use, over all keys), so that
// InUse / InstanceCapacity is the lane's usage, between 0 and 1 (a token
// lane's debt, or a rate lane's reservations that wait, can take it past
// 1), and the
// figures of a lane's instances add up: a global lane's capacity, a rate
// lane's burst, and a keyed lane's per-key capacity times its keys alive
// ([Lane.KeysAlive]). ok is false for a lane a fleet shares, whose
// capacity is not this instance's ([Lane.FleetCapacity]). (The embedded
// LaneStats.Capacity is the source's figure as it is.)
func (l Lane) InstanceCapacity() (n int64, ok bool) {
	switch {
	case l.Fleet:
		return 0, false
	case l.Kind == lanequeue.Keyed:
		return l.LaneStats.Capacity * int64(l.KeysAlive()), true
	}
	return l.LaneStats.Capacity, true
}

// KeysAlive is a keyed lane's Keys, raised if need be to the fewest keys
// that can hold its Held: a snapshot's fields are not read at one instant
// (see keyedsem.Keyed.Stats), and a key released and dropped between the
// two reads would otherwise leave Held above Capacity. A lane a fleet
// shares reports Keys as it is (a Redis lane's Keys are its buckets with
// local waiters).
func (l Lane) KeysAlive() int {
	keys := l.Keys
	if l.Kind != lanequeue.Keyed || l.Fleet || l.LaneStats.Capacity <= 0 {
		return keys
	}
	if need := (l.Held + l.LaneStats.Capacity - 1) / l.LaneStats.Capacity; need > int64(keys) {
		keys = int(need)
	}
	return keys
}

// KeyCapacity is a keyed lane's capacity per key, the same for every key;
// ok is false for the other kinds.
func (l Lane) KeyCapacity() (n int64, ok bool) {
	if l.Kind != lanequeue.Keyed {
		return 0, false
	}
	return l.LaneStats.Capacity, true
}

// FleetCapacity is the capacity a fleet shares, the same whole on every
// instance; ok is false for a lane that is not a fleet's, and for a keyed
// one (a fleet's keyed lane has a budget per key, [Lane.KeyCapacity], and
// no instance knows the fleet's keys).
func (l Lane) FleetCapacity() (n int64, ok bool) {
	if !l.Fleet || l.Kind == lanequeue.Keyed {
		return 0, false
	}
	return l.LaneStats.Capacity, true
}

// Read reads src once and returns its lanes as the exporters report them,
// in src's order, each marked Fleet if its snapshot says so or src names
// it (a [FleetSource]). A lane name that src gives more
// than once is returned once (the first), with an error naming it, so that
// an exporter never reports one lane's figures under another's name.
func Read(src Source) ([]Lane, error) {
	var shared []string
	if f, ok := src.(FleetSource); ok {
		shared = f.FleetLanes()
	}
	stats := src.Stats()
	out := make([]Lane, 0, len(stats))
	seen := make(map[string]bool, len(stats))
	var err error
	for _, st := range stats {
		if seen[st.Name] {
			if err == nil {
				err = fmt.Errorf("the source reports lane %q twice", st.Name)
			}
			continue
		}
		seen[st.Name] = true
		st.Fleet = st.Fleet || slices.Contains(shared, st.Name)
		out = append(out, Lane{LaneStats: st})
	}
	return out, err
}
