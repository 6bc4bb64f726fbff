package exporters

import (
	"slices"

	"github.com/sessionlane/lanes/adaptive"
)

// Limit is the snapshot of the adaptive controller that drives one lane's
// capacity ([adaptive.Controller.Stats]), under the lane's name.
type Limit struct {
	Lane string
	adaptive.Stats
}

// LimitSource gives the snapshots of the adaptive controllers to export,
// one per lane, each with its Lane set. Limits is called once per scrape
// or collection, from the exporter's goroutine, and must be safe for
// concurrent use with the controllers' own calls (Controller.Stats is).
// Lane names must differ within one source; an exporter reports a repeated
// name as an error.
//
// The exporters report a LimitSource beside, not inside, a [Source]: a
// controller may drive a lane of a queue, a semaphore used on its own, or
// a fleet's budget in Redis (redislane.Fleet), which no local Source
// lists.
type LimitSource interface {
	Limits() []Limit
}

// LimitFunc is a function used as a [LimitSource].
type LimitFunc func() []Limit

// Limits returns f().
func (f LimitFunc) Limits() []Limit { return f() }

// Controllers returns a [LimitSource] of the controllers given, by the
// name of the lane each drives, in the order of the names. The map is
// copied: later changes to it are not seen. A nil controller, or one under
// an empty lane name, is refused with a panic, at once, rather than at the
// first scrape.
func Controllers(byLane map[string]*adaptive.Controller) LimitSource {
	names := make([]string, 0, len(byLane))
	for name, c := range byLane {
		checkName("Controllers", name)
		if c == nil {
			panic("exporters: nil controller for lane " + name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	cs := make([]*adaptive.Controller, len(names))
	for i, name := range names {
		cs[i] = byLane[name]
	}
	return LimitFunc(func() []Limit {
		out := make([]Limit, len(cs))
		for i, c := range cs {
			out[i] = Limit{Lane: names[i], Stats: c.Stats()}
		}
		return out
	})
}
