package otellanes

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/sessionlane/lanes/exporters"
)

// Two Registers on one meter make one set of instruments, so a lane that
// both observe with the same attributes (two queues, each with a lane
// "global", and no WithAttributes to tell them apart) would be one series,
// the SDK adding their values up. The meter's registrations are kept
// here, each with the attribute sets of the lanes it observed last, so
// that Register can refuse such a source, and a collection can leave out a
// lane added since that another registration observes already.
var shared struct {
	sync.Mutex
	byMeter map[metric.Meter][]*registration
}

// registration is what Register returns: the callback's own, and its
// place among its meter's registrations.
type registration struct {
	embedded.Registration
	meter metric.Meter
	inner metric.Registration
	lanes map[attribute.Distinct]string // the lanes observed last, by attribute set: their names
}

// Unregister stops the observations and gives the registration's lanes
// up to the meter's others.
func (r *registration) Unregister() error {
	shared.Lock()
	if regs := shared.byMeter[r.meter]; regs != nil {
		regs = slices.DeleteFunc(regs, func(o *registration) bool { return o == r })
		if len(regs) == 0 {
			delete(shared.byMeter, r.meter)
		} else {
			shared.byMeter[r.meter] = regs
		}
	}
	shared.Unlock()
	return r.inner.Unregister()
}

// errShared is the error of a lane that another registration of the
// meter observes with the same attributes.
var errShared = errors.New("registered on this meter already, by another source with the same attributes (tell the sources apart with WithAttributes)")

// sharedBy returns the names of the lanes of sets that a registration of
// meter other than r observes, keyed by set; r may be nil (not registered
// yet). shared is held.
func sharedBy(meter metric.Meter, r *registration, sets map[attribute.Distinct]string) map[attribute.Distinct]string {
	var taken map[attribute.Distinct]string
	for _, o := range shared.byMeter[meter] {
		if o == r {
			continue
		}
		for d, name := range sets {
			if _, ok := o.lanes[d]; ok {
				if taken == nil {
					taken = map[attribute.Distinct]string{}
				}
				taken[d] = name
			}
		}
	}
	return taken
}

// comparableMeter reports whether meter can key the registrations: a meter of
// a type that is not comparable is not checked.
func comparableMeter(meter metric.Meter) bool {
	return reflect.TypeOf(meter).Comparable()
}

// sharedError names the lanes of taken.
func sharedError(taken map[attribute.Distinct]string) error {
	names := make([]string, 0, len(taken))
	for _, n := range taken {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	return fmt.Errorf("otellanes: lane %s %w", strings.Join(names, ", "), errShared)
}

// laneSets returns the attribute set of each of lanes' points without an
// outcome, by its Equivalent, with the lane's name.
func laneSets(lanes []exporters.Lane, fixed []attribute.KeyValue) map[attribute.Distinct]string {
	sets := make(map[attribute.Distinct]string, len(lanes))
	for _, l := range lanes {
		s := laneAttrs(fixed, l.Name, l.Kind.String())
		sets[s.Equivalent()] = l.Name
	}
	return sets
}

// laneAttrs is the attribute set of a lane's points, with extra.
func laneAttrs(fixed []attribute.KeyValue, name, kind string, extra ...attribute.KeyValue) attribute.Set {
	// A slice of its own for each set: NewSet sorts the slice it is given.
	all := make([]attribute.KeyValue, 0, len(fixed)+2+len(extra))
	all = append(append(all, fixed...), LaneKey.String(name), KindKey.String(kind))
	return attribute.NewSet(append(all, extra...)...)
}

// register refuses src's lanes if another registration of meter observes
// one of them with the same attributes, else adds a registration for
// them; it returns nil, nil for a meter it cannot key.
func register(meter metric.Meter, src exporters.Source, fixed []attribute.KeyValue) (*registration, error) {
	if !comparableMeter(meter) {
		return nil, nil
	}
	lanes, _ := exporters.Read(src) // a lane given twice is the collection's error to report
	sets := laneSets(lanes, fixed)
	shared.Lock()
	defer shared.Unlock()
	if taken := sharedBy(meter, nil, sets); taken != nil {
		return nil, sharedError(taken)
	}
	r := &registration{meter: meter, lanes: sets}
	if shared.byMeter == nil {
		shared.byMeter = map[metric.Meter][]*registration{}
	}
	shared.byMeter[meter] = append(shared.byMeter[meter], r)
	return r, nil
}

// claim leaves out of lanes, read for a collection, those that another
// registration of r's meter observes with the same attributes, and says
// so in the error it returns, joined to err; it keeps the rest as r's.
func (r *registration) claim(lanes []exporters.Lane, fixed []attribute.KeyValue, err error) ([]exporters.Lane, error) {
	sets := laneSets(lanes, fixed)
	shared.Lock()
	defer shared.Unlock()
	taken := sharedBy(r.meter, r, sets)
	if taken == nil {
		r.lanes = sets
		return lanes, err
	}
	kept := lanes[:0:0]
	for _, l := range lanes {
		s := laneAttrs(fixed, l.Name, l.Kind.String())
		if _, ok := taken[s.Equivalent()]; !ok {
			kept = append(kept, l)
		}
	}
	for d := range taken {
		delete(sets, d)
	}
	r.lanes = sets
	return kept, errors.Join(err, sharedError(taken))
}
