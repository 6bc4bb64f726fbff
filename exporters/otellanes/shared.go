package otellanes

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/sessionlane/lanes/exporters"
)

// Two Registers on one meter make one set of instruments, so a lane that
// both observe with the same attributes (two queues, each with a lane
// "global", and no WithAttributes to tell them apart) would be one series,
// the SDK adding their values up; so would two RegisterLimits. The
// meter's registrations are kept here, each with the attribute sets of
// the lanes it observed last, so that Register and RegisterLimits can
// refuse such a source, and a collection can leave out a lane added since
// that another registration observes already.
//
// The registry keeps nothing alive: a meter is named by its address, and
// a registration is held by a weak pointer. A registration lives while its
// callback is registered with a live meter, or while its caller holds it;
// it holds its meter, so a meter's address names no other meter while a
// registration of it lives. Only a meter that is a pointer (the SDK's) is
// checked: a value (a noop meter, a wrapper) has no identity to name it by.
var shared struct {
	sync.Mutex
	byMeter map[meterKey][]weak.Pointer[registration]
}

// meterKey names a meter's registrations of one kind (Register's lanes or
// RegisterLimits' limits, which make instruments of their own).
type meterKey struct {
	addr   uintptr
	limits bool
}

// registration is what Register and RegisterLimits return: the callback's
// own, and what the registry knows of it.
type registration struct {
	embedded.Registration
	meter metric.Meter // kept: see shared
	key   meterKey
	inner metric.Registration
	lanes map[attribute.Distinct]string // the lanes observed last, by attribute set: their names
}

// Unregister stops the observations and gives the registration's lanes
// up to the meter's others.
func (r *registration) Unregister() error {
	shared.Lock()
	liveOf(r.key, r)
	shared.Unlock()
	return r.inner.Unregister()
}

// keyOf returns the key of meter's registrations, or false for a meter
// that is not checked (see shared).
func keyOf(meter metric.Meter, limits bool) (meterKey, bool) {
	v := reflect.ValueOf(meter)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
		return meterKey{}, false
	}
	return meterKey{addr: uintptr(v.UnsafePointer()), limits: limits}, true
}

// liveOf returns the live registrations of key, and forgets the others
// and drop (nil: none). shared is held.
func liveOf(key meterKey, drop *registration) []*registration {
	ws := shared.byMeter[key]
	var rs []*registration
	kept := ws[:0]
	for _, w := range ws {
		if r := w.Value(); r != nil && r != drop {
			rs = append(rs, r)
			kept = append(kept, w)
		}
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		delete(shared.byMeter, key)
	} else {
		shared.byMeter[key] = kept
	}
	return rs
}

// others returns the live registrations of r's meter but r. shared is held.
func (r *registration) others() []*registration {
	rs := liveOf(r.key, nil)
	return slices.DeleteFunc(rs, func(o *registration) bool { return o == r })
}

// errShared is the error of a lane that another registration of the
// meter observes with the same attributes.
var errShared = errors.New("registered on this meter already, by another source with the same attributes (tell the sources apart with WithAttributes)")

// sharedBy returns, of sets, those that a registration in others
// observes, or nil.
func sharedBy(others []*registration, sets map[attribute.Distinct]string) map[attribute.Distinct]string {
	var taken map[attribute.Distinct]string
	for _, o := range others {
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

// limitSets is laneSets for the lanes of limits.
func limitSets(limits []exporters.Limit, fixed []attribute.KeyValue) map[attribute.Distinct]string {
	sets := make(map[attribute.Distinct]string, len(limits))
	for _, l := range limits {
		s := limitAttrs(fixed, l.Lane)
		sets[s.Equivalent()] = l.Lane
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

// limitAttrs is the attribute set of a limit's points, with extra.
func limitAttrs(fixed []attribute.KeyValue, name string, extra ...attribute.KeyValue) attribute.Set {
	all := make([]attribute.KeyValue, 0, len(fixed)+1+len(extra))
	all = append(append(all, fixed...), LaneKey.String(name))
	return attribute.NewSet(append(all, extra...)...)
}

// register refuses sets, the lanes a new registration on meter observes
// now, if another registration of meter observes one of them with the
// same attributes, else adds a registration for them; it returns nil, nil
// for a meter it does not check.
func register(meter metric.Meter, limits bool, sets map[attribute.Distinct]string) (*registration, error) {
	key, ok := keyOf(meter, limits)
	if !ok {
		return nil, nil
	}
	shared.Lock()
	defer shared.Unlock()
	for k := range shared.byMeter {
		liveOf(k, nil) // forget the registrations of meters gone
	}
	if taken := sharedBy(liveOf(key, nil), sets); taken != nil {
		return nil, sharedError(taken)
	}
	r := &registration{meter: meter, key: key, lanes: sets}
	if shared.byMeter == nil {
		shared.byMeter = map[meterKey][]weak.Pointer[registration]{}
	}
	shared.byMeter[key] = append(shared.byMeter[key], weak.Make(r))
	return r, nil
}

// claim keeps sets, the lanes r's collection read, as r's, but for those
// that another registration of r's meter observes with the same
// attributes, which it returns (nil: none).
func (r *registration) claim(sets map[attribute.Distinct]string) map[attribute.Distinct]string {
	shared.Lock()
	defer shared.Unlock()
	taken := sharedBy(r.others(), sets)
	for d := range taken {
		delete(sets, d)
	}
	r.lanes = sets
	return taken
}

// finish returns the registration to hand the caller, with the meter's
// error: inner itself when the meter is not checked (r nil), else r with
// inner. If the meter registered no callback (inner nil), r leaves the
// registry; a meter may register it and still return an error (the SDK's,
// when some instruments are not its own), and then r stays, to be checked
// and unregistered as any other.
func finish(r *registration, inner metric.Registration, err error) (metric.Registration, error) {
	if r == nil {
		return inner, err
	}
	if inner == nil {
		shared.Lock()
		liveOf(r.key, r)
		shared.Unlock()
		return nil, err
	}
	r.inner = inner
	return r, err
}
