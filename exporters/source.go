// Package exporters holds what the metric exporters of lanes share: a
// [Source] of lane snapshots, and adapters that make one of a
// [lanequeue.Queue], a [semaphore.Weighted] or a [keyedsem.Keyed].
//
// The exporters themselves are its subpackages:
//
//   - [github.com/sessionlane/lanes/exporters/promlanes]: a Prometheus
//     collector;
//   - [github.com/sessionlane/lanes/exporters/otellanes]: OpenTelemetry
//     asynchronous instruments.
//
// Each lane is reported under its name, with its capacity, the permits in
// use, the callers waiting, the keys alive (keyed lanes), the counters of
// [semaphore.Counters], and, for a lane whose semaphore was made with
// semaphore.WithHistograms or keyedsem.WithHistograms, the wait-time and
// hold-time histograms of [semaphore.Timings]. A [LimitSource] (for
// example [Controllers]) gives the state of the adaptive controllers that
// drive lanes' capacities: each exporter reports it beside the lanes (the
// limit, its bounds, its moves by reason and the last reason). The module
// is separate from the core, so that a
// program that uses lanes without these exporters never depends on
// Prometheus or OpenTelemetry.
//
// Metric model: capacity and use are reported on one footing ([Lane] has
// the figures, [Read] reads them, and both exporters report them): a lane's
// capacity is counted over what its permits in use are counted over, so
// that use / capacity is its usage, between 0 and 1, and both add up
// across a lane's instances. A keyed lane's capacity is its per-key
// capacity times its keys alive, and its per-key capacity is a figure of
// its own; a lane whose budget a fleet of instances shares ([Fleet],
// [FleetSource]) reports the fleet's capacity as a figure of its own,
// which every instance reports whole (take the max across instances, not
// the sum), beside this instance's use (sum it).
//
// Cost: an exporter reads its source when it is scraped or collected, never
// on the lanes' hot paths; a keyed lane's snapshot walks its keys (see
// [keyedsem.Keyed.Stats]).
package exporters

import (
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Source gives the snapshots of the lanes to export, one per lane, each with
// its Name and Kind set. A *[lanequeue.Queue] of any key type is a Source
// (its Stats method lists every lane of the queue).
//
// Stats is called once per scrape or collection, from the exporter's
// goroutine: it must be safe for concurrent use with the lanes' own calls,
// as the Stats methods of this project's packages are. Names must differ
// between the lanes of one source: an exporter reports a repeated name as
// an error rather than merge two lanes into one series.
type Source interface {
	Stats() []lanequeue.LaneStats
}

// SourceFunc is a function used as a [Source].
type SourceFunc func() []lanequeue.LaneStats

// Stats returns f().
func (f SourceFunc) Stats() []lanequeue.LaneStats { return f() }

// Semaphore returns a [Source] of one lane, named name, of kind
// [lanequeue.Global]: the snapshot of s. Use it for a semaphore used on its
// own, outside a queue (a queue's global lanes are in the queue's Stats).
func Semaphore(name string, s *semaphore.Weighted) Source {
	return SourceFunc(func() []lanequeue.LaneStats {
		st := s.Stats()
		return []lanequeue.LaneStats{{
			Name:     name,
			Kind:     lanequeue.Global,
			Capacity: st.Capacity,
			Held:     st.Held,
			Waiters:  st.Waiters,
			Closed:   st.Closed,
			Counters: st.Counters,
			Timings:  st.Timings,
		}}
	})
}

// Keyed returns a [Source] of one lane, named name, of kind
// [lanequeue.Keyed]: the snapshot of k, whose Capacity is the per-key
// capacity, Keys the entries alive, and HoldsRunOut its reorder holds
// that ran out (keyedsem.WithReorderHold). Use it for a keyed semaphore used on
// its own, outside a queue.
func Keyed[K comparable](name string, k *keyedsem.Keyed[K]) Source {
	return SourceFunc(func() []lanequeue.LaneStats {
		st := k.Stats()
		return []lanequeue.LaneStats{{
			Name:        name,
			Kind:        lanequeue.Keyed,
			Capacity:    st.Capacity,
			Held:        st.Held,
			Waiters:     st.Waiters,
			Keys:        st.Keys,
			Closed:      st.Closed,
			Counters:    st.Counters,
			Timings:     st.Timings,
			HoldsRunOut: st.HoldsRunOut,
		}}
	})
}

// Join returns a [Source] of the lanes of every source given, in the order
// given: several queues, or a queue and semaphores used beside it, under one
// exporter. Their lanes' names must differ. The result is a [FleetSource]
// that names the fleet lanes of every source given that is one.
func Join(sources ...Source) FleetSource {
	return joined(append([]Source(nil), sources...))
}

type joined []Source

func (j joined) Stats() []lanequeue.LaneStats {
	var all []lanequeue.LaneStats
	for _, s := range j {
		all = append(all, s.Stats()...)
	}
	return all
}

func (j joined) FleetLanes() []string {
	var names []string
	for _, s := range j {
		if f, ok := s.(FleetSource); ok {
			names = append(names, f.FleetLanes()...)
		}
	}
	return names
}
