package exporters

import (
	"fmt"

	"github.com/sessionlane/lanes/internal/nilptr"
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
// It panics if name is empty, at once rather than at the first scrape, as
// a queue refuses a lane with no name: an exporter would report the lane's
// series under an empty lane label. It panics if s is nil, with a message
// that names Semaphore. A semaphore of capacity 0 is exported open (see
// "Closed" in the package doc).
func Semaphore(name string, s *semaphore.Weighted) Source {
	checkName("Semaphore", name)
	if s == nil {
		panic("exporters: Semaphore: nil semaphore")
	}
	return laneSource(name, lanequeue.NewGlobalLane[struct{}](s))
}

// Keyed returns a [Source] of one lane, named name, of kind
// [lanequeue.Keyed]: the snapshot of k, whose Capacity is the per-key
// capacity, Keys the entries alive, and HoldsRunOut its reorder holds
// that ran out (keyedsem.WithReorderHold). Use it for a keyed semaphore used on
// its own, outside a queue. It panics if name is empty, or k is nil, as
// [Semaphore] does.
func Keyed[K comparable](name string, k *keyedsem.Keyed[K]) Source {
	checkName("Keyed", name)
	if k == nil {
		panic("exporters: Keyed: nil keyed semaphore")
	}
	return laneSource(name, lanequeue.NewKeyedLane(k))
}

// checkName panics if name, given to the constructor fn, is empty.
func checkName(fn, name string) {
	if name == "" {
		panic("exporters: " + fn + ": empty lane name")
	}
}

// laneSource is a [Source] of one lane, named name: the snapshot its
// lanequeue adapter makes, as a queue's Stats would.
func laneSource[K comparable](name string, l lanequeue.Lane[K]) Source {
	return SourceFunc(func() []lanequeue.LaneStats {
		st := l.Stats()
		st.Name = name
		return []lanequeue.LaneStats{st}
	})
}

// Join returns a [Source] of the lanes of every source given, in the order
// given: several queues, or a queue and semaphores used beside it, under one
// exporter. Their lanes' names must differ. The result is a [FleetSource]
// that names the fleet lanes of every source given that is one. It panics
// if a source is nil, as Fleet and the exporters' constructors do, rather
// than at the first scrape (in the registry's goroutine).
func Join(sources ...Source) FleetSource {
	for i, s := range sources {
		if nilptr.Is(s) { // also a typed nil: a nil *lanequeue.Queue, a nil SourceFunc
			panic(fmt.Sprintf("exporters: Join's source %d is nil", i))
		}
	}
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
