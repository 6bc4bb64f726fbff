// Package otellanes exports the lanes of a [exporters.Source] (a
// [lanequeue.Queue], say) as OpenTelemetry metrics: asynchronous
// instruments on a [metric.Meter] whose callback reads the lanes at each
// collection.
//
//	reg, err := otellanes.Register(otel.Meter("gateway"), q)
//	...
//	defer reg.Unregister()
//
// Every data point has the attributes lanes.lane (the lane's name) and
// lanes.kind ("keyed", "global" or "rate"). Names are dotted, under the
// lanes. prefix, with the unit in the instrument's unit (UCUM, curly braces
// for counted things), as OpenTelemetry's semantic conventions have them:
//
//	lanes.capacity               UpDownCounter  {permit}   capacity on in_use's footing: of a global lane, of a keyed lane's keys alive, a rate lane's burst
//	lanes.key.capacity           Gauge          {permit}   capacity per key of a keyed lane
//	lanes.fleet.capacity         Gauge          {permit}   capacity a fleet of instances shares (a Redis lane), the same on each
//	lanes.in_use                 UpDownCounter  {permit}   permits held now by this instance, over all keys (a rate lane: what its window counts)
//	lanes.waiting                UpDownCounter  {caller}   callers waiting now
//	lanes.keys                   UpDownCounter  {key}      entries alive (keyed lanes only)
//	lanes.closed                 Gauge          1          1 once the lane is closed
//	lanes.acquires               Counter        {call}     acquire calls ended, by lanes.outcome: acquired, cancelled, timed_out, rejected, failed
//	lanes.waited                 Counter        {call}     grants that had to wait (of the acquired)
//	lanes.releases               Counter        {release}  first releases of granted permits
//	lanes.double_releases        Counter        {release}  releases of permits already released
//	lanes.reorder.holds_run_out  Counter        {call}     callers that went when their reorder hold ran out (keyed lanes only)
//	lanes.cooldown.remaining     Gauge          s          time left of the lane's pause (lanequeue.Queue.Cooldown), 0 when none; a lane's three cooldown series start at its first pause
//	lanes.cooldown.waiting       UpDownCounter  {caller}   callers waiting out the pause now, holding the lane (in lanes.in_use, not in lanes.waiting)
//	lanes.cooldown.refused       Counter        {call}     calls whose deadline came before the pause ended (at once: in no other instrument)
//
// The wait-time and hold-time histograms (lanes.wait.duration and
// lanes.hold.duration, in s) come from a [Producer] given to the reader,
// since the metrics API has no asynchronous histogram; so does, with
// [WithGroupWaits], a fair lane's wait time by fair-share group
// (lanes.group.wait.duration, attribute lanes.group).
//
// The gauges of things that add up across lanes and instances (permits,
// callers, keys) are UpDownCounters, as the conventions ask, and the
// capacities that do not add up are Gauges, so that a backend aggregates
// each the right way. Capacity and use are on one footing, as the
// exporters package doc defines them ("Capacity and use"; [exporters.Lane]
// has the figures for both exporters):
//
//   - a global or rate lane's usage is lanes.in_use / lanes.capacity;
//   - a keyed lane's lanes.capacity is its per-key capacity times its keys
//     alive (lanes.keys), so lanes.in_use / lanes.capacity is the share of
//     its live keys' permits in use; lanes.key.capacity is one key's bound;
//   - a lane whose budget a fleet of instances shares (every lane of
//     package redislane, whose snapshot says so, or one its source marks:
//     [exporters.Fleet]) has no lanes.capacity: every instance reports the
//     whole as lanes.fleet.capacity (take the max across instances, not the
//     sum) and its own lanes.in_use (sum them), so the fleet's usage is the
//     sum of lanes.in_use over the max of lanes.fleet.capacity. A fleet's
//     keyed lane reports lanes.key.capacity only, and a fleet's rate lane
//     (redislane.AsRateLane) a lanes.in_use of 0: its count is in Redis.
//
// The counters are cumulative and come from [semaphore.Counters], the five
// outcomes of an acquire call as one counter with an attribute, since each
// call ends in exactly one.
//
// The adaptive controllers that drive lanes' capacities (package adaptive)
// have instruments of their own, under lanes.adaptive., made by
// [RegisterLimits]: the limit, its floor and ceiling, its moves by reason
// and the last reason.
//
// Concurrency: the callback reads the source once per collection, from the
// reader's goroutine; between collections it keeps only the names of the
// lanes it observed, for the check of lanes shared across registrations
// (see [Register]).
package otellanes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/lanequeue"
)

// Attribute keys of the data points.
const (
	LaneKey    = attribute.Key("lanes.lane")
	KindKey    = attribute.Key("lanes.kind")
	OutcomeKey = attribute.Key("lanes.outcome")
	GroupKey   = attribute.Key("lanes.group") // a fair-share group (WithGroupWaits)
)

// Option changes what Register does.
type Option func(*config)

type config struct {
	attrs  []attribute.KeyValue
	groups *exporters.GroupWaits
}

// WithAttributes adds attributes with fixed values to every data point (the
// queue's role in a process with several, say). One with a key above
// (lanes.lane, lanes.kind, lanes.outcome, lanes.group) is overridden by the
// lane's own.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, kv...) }
}

// WithGroupWaits makes NewProducer's producer report the waits of w, a
// fair lane's by fair-share group, as lanes.group.wait.duration (see
// [Producer]). Register and RegisterLimits ignore it.
func WithGroupWaits(w *exporters.GroupWaits) Option {
	if w == nil {
		panic("otellanes: nil GroupWaits")
	}
	return func(c *config) { c.groups = w }
}

type instruments struct {
	capacity, inUse, waiting, keys        metric.Int64ObservableUpDownCounter
	keyCapacity, fleetCapacity, closed    metric.Int64ObservableGauge
	acquires, waited, releases, doubleRel metric.Int64ObservableCounter
	holdsRunOut                           metric.Int64ObservableCounter
	cooldown                              metric.Float64ObservableGauge
	coolWaiting                           metric.Int64ObservableUpDownCounter
	coolRefused                           metric.Int64ObservableCounter
}

// Register creates the lanes' instruments on meter and a callback that
// observes src at each collection, and returns the callback's registration:
// Unregister stops the observations (the instruments stay, as every
// instrument of a meter does). It returns an error if the meter refuses an
// instrument or the callback; it panics if src is nil.
//
// A lane name that src gives twice is observed once (the first lane of that
// name), and the callback returns an error naming it, which the SDK hands to
// its error handler (a ManualReader's Collect returns it).
//
// Every Register on one meter observes the same instruments, so two sources
// with a lane of the same name and kind must be told apart by WithAttributes
// (the queue's role, say): else the lane's points of both would be one
// series, their values added up. Register reads src once, and returns an
// error naming such a lane when src has it already. One that a source adds
// later stays with the registration that observed it first, and the other's
// collections return an error naming it. The check knows a meter by its
// address, so it covers the SDK's meters, which are pointers; a meter that is
// a value (a noop meter, a wrapper of one) is not checked. It keeps nothing
// alive: a provider dropped without Unregister is collected as before.
func Register(meter metric.Meter, src exporters.Source, opts ...Option) (metric.Registration, error) {
	if nilptr.Is(src) { // also a typed nil, such as a nil *lanequeue.Queue, which would fail at the first scrape
		panic("otellanes: nil source")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var in instruments
	var errs [15]error
	in.capacity, errs[0] = meter.Int64ObservableUpDownCounter("lanes.capacity", metric.WithUnit("{permit}"),
		metric.WithDescription("Capacity of the lane on the footing of lanes.in_use (of a global lane; of a keyed lane, per key times keys alive; of a rate lane, its burst); none for a lane a fleet shares. lanes.in_use / lanes.capacity is the usage; sums across instances."))
	in.inUse, errs[1] = meter.Int64ObservableUpDownCounter("lanes.in_use", metric.WithUnit("{permit}"),
		metric.WithDescription("Permits of the lane held now by this instance, over all keys (of a rate lane, the requests or tokens its window counts now). Sums across keys and instances."))
	in.waiting, errs[2] = meter.Int64ObservableUpDownCounter("lanes.waiting", metric.WithUnit("{caller}"),
		metric.WithDescription("Callers waiting for the lane now."))
	in.keys, errs[3] = meter.Int64ObservableUpDownCounter("lanes.keys", metric.WithUnit("{key}"),
		metric.WithDescription("Entries alive in a keyed lane (of a lane a fleet shares, its keys with callers of this instance waiting)."))
	in.closed, errs[4] = meter.Int64ObservableGauge("lanes.closed", metric.WithUnit("1"),
		metric.WithDescription("1 once the lane is closed, else 0."))
	in.acquires, errs[5] = meter.Int64ObservableCounter("lanes.acquires", metric.WithUnit("{call}"),
		metric.WithDescription("Acquire calls on the lane that ended, by outcome (each call ends in exactly one)."))
	in.waited, errs[6] = meter.Int64ObservableCounter("lanes.waited", metric.WithUnit("{call}"),
		metric.WithDescription("Grants of the lane that had to wait in its queue."))
	in.releases, errs[7] = meter.Int64ObservableCounter("lanes.releases", metric.WithUnit("{release}"),
		metric.WithDescription("First releases of the lane's granted permits."))
	in.doubleRel, errs[8] = meter.Int64ObservableCounter("lanes.double_releases", metric.WithUnit("{release}"),
		metric.WithDescription("Releases of the lane's permits that were already released."))
	in.keyCapacity, errs[9] = meter.Int64ObservableGauge("lanes.key.capacity", metric.WithUnit("{permit}"),
		metric.WithDescription("Capacity per key of a keyed lane, the same for every key. Aggregate with max, not sum."))
	in.fleetCapacity, errs[10] = meter.Int64ObservableGauge("lanes.fleet.capacity", metric.WithUnit("{permit}"),
		metric.WithDescription("Capacity that a fleet of instances shares (a Redis lane); every instance reports the same whole. Aggregate across instances with max, not sum: the fleet's usage is the sum of lanes.in_use over the max of lanes.fleet.capacity."))
	in.holdsRunOut, errs[11] = meter.Int64ObservableCounter("lanes.reorder.holds_run_out", metric.WithUnit("{call}"),
		metric.WithDescription("Callers of a keyed lane that went when their reorder hold ran out, a predecessor's number still missing (keyedsem.WithReorderHold)."))
	in.cooldown, errs[12] = meter.Float64ObservableGauge("lanes.cooldown.remaining", metric.WithUnit("s"),
		metric.WithDescription("Time left of the lane's pause (lanequeue.Queue.Cooldown, a provider's Retry-After); 0 when none."))
	in.coolWaiting, errs[13] = meter.Int64ObservableUpDownCounter("lanes.cooldown.waiting", metric.WithUnit("{caller}"),
		metric.WithDescription("Callers waiting out the lane's pause now, each holding the lane (so in lanes.in_use, not in lanes.waiting)."))
	in.coolRefused, errs[14] = meter.Int64ObservableCounter("lanes.cooldown.refused", metric.WithUnit("{call}"),
		metric.WithDescription("Calls that failed because their deadline came before the lane's pause ended: at once (in no other instrument), or while waiting it out (then also acquired and released on the lane)."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("otellanes: %w", err)
		}
	}
	var reg *registration
	if _, ok := keyOf(meter, false); ok {
		lanes, _ := exporters.Read(src) // a lane given twice is the collection's error to report
		var err error
		if reg, err = register(meter, false, laneSets(lanes, cfg.attrs)); err != nil {
			return nil, err
		}
	}
	inner, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		lanes, err := exporters.Read(src)
		if err != nil {
			err = fmt.Errorf("otellanes: %w", err)
		}
		if reg != nil {
			if taken := reg.claim(laneSets(lanes, cfg.attrs)); taken != nil {
				lanes = slices.DeleteFunc(lanes, func(l exporters.Lane) bool {
					s := laneAttrs(cfg.attrs, l.Name, l.Kind.String())
					_, ok := taken[s.Equivalent()]
					return ok
				})
				err = errors.Join(err, sharedError(taken))
			}
		}
		in.observe(o, lanes, cfg.attrs)
		return err
	}, in.capacity, in.keyCapacity, in.fleetCapacity, in.inUse, in.waiting, in.keys, in.closed, in.acquires, in.waited, in.releases, in.doubleRel, in.holdsRunOut,
		in.cooldown, in.coolWaiting, in.coolRefused)
	return finish(reg, inner, err)
}

// outcomes are the values of OutcomeKey, in the order of observe's counts.
var outcomes = [...]string{"acquired", "cancelled", "timed_out", "rejected", "failed"}

func (in *instruments) observe(o metric.Observer, lanes []exporters.Lane, fixed []attribute.KeyValue) {
	for _, l := range lanes {
		st := l.LaneStats
		kv := func(extra ...attribute.KeyValue) attribute.Set {
			return laneAttrs(fixed, st.Name, st.Kind.String(), extra...)
		}
		lane := metric.WithAttributeSet(kv())
		if n, ok := l.InstanceCapacity(); ok {
			o.ObserveInt64(in.capacity, n, lane)
		}
		if n, ok := l.KeyCapacity(); ok {
			o.ObserveInt64(in.keyCapacity, n, lane)
		}
		if n, ok := l.FleetCapacity(); ok {
			o.ObserveInt64(in.fleetCapacity, n, lane)
		}
		o.ObserveInt64(in.inUse, l.InUse(), lane)
		o.ObserveInt64(in.waiting, int64(st.Waiters), lane)
		if st.Kind == lanequeue.Keyed {
			o.ObserveInt64(in.keys, int64(l.KeysAlive()), lane)
		}
		closed := int64(0)
		if st.Closed {
			closed = 1
		}
		o.ObserveInt64(in.closed, closed, lane)
		n := st.Counters
		for i, v := range [...]uint64{n.Acquired, n.Cancelled, n.TimedOut, n.Rejected, n.Failed} {
			o.ObserveInt64(in.acquires, clamp(v), metric.WithAttributeSet(kv(OutcomeKey.String(outcomes[i]))))
		}
		o.ObserveInt64(in.waited, clamp(n.Waited), lane)
		o.ObserveInt64(in.releases, clamp(n.Released), lane)
		o.ObserveInt64(in.doubleRel, clamp(n.DoubleReleases), lane)
		if st.Kind == lanequeue.Keyed {
			o.ObserveInt64(in.holdsRunOut, clamp(st.HoldsRunOut), lane)
		}
		if st.CooldownSet { // from a lane's first pause on
			o.ObserveFloat64(in.cooldown, st.CooldownLeft.Seconds(), lane)
			o.ObserveInt64(in.coolWaiting, int64(st.CooldownWaiters), lane)
			o.ObserveInt64(in.coolRefused, clamp(st.CooldownRefused), lane)
		}
	}
}

// clamp converts a counter to the instruments' int64; a count past
// math.MaxInt64 (centuries of calls) stays there.
func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
