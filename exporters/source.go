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
// capacity and Keys the entries alive. Use it for a keyed semaphore used on
// its own, outside a queue.
func Keyed[K comparable](name string, k *keyedsem.Keyed[K]) Source {
	return SourceFunc(func() []lanequeue.LaneStats {
		st := k.Stats()
		return []lanequeue.LaneStats{{
			Name:     name,
			Kind:     lanequeue.Keyed,
			Capacity: st.Capacity,
			Held:     st.Held,
			Waiters:  st.Waiters,
			Keys:     st.Keys,
			Closed:   st.Closed,
			Counters: st.Counters,
			Timings:  st.Timings,
		}}
	})
}

// Join returns a [Source] of the lanes of every source given, in the order
// given: several queues, or a queue and semaphores used beside it, under one
// exporter. Their lanes' names must differ.
func Join(sources ...Source) Source {
	sources = append([]Source(nil), sources...)
	return SourceFunc(func() []lanequeue.LaneStats {
		var all []lanequeue.LaneStats
		for _, s := range sources {
			all = append(all, s.Stats()...)
		}
		return all
	})
}
