package otellanes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/exporters"
)

// ReasonKey is the attribute of the data points of a limit's moves and of
// its last reason: the values of [adaptive.Reason.String].
const ReasonKey = attribute.Key("lanes.reason")

type limitInstruments struct {
	limit, floor, ceiling         metric.Int64ObservableUpDownCounter
	increases, decreases          metric.Int64ObservableCounter
	roundTrips, outcomes          metric.Int64ObservableCounter
	lastReason                    metric.Int64ObservableGauge
	lastChange, latency, baseline metric.Float64ObservableGauge
}

// RegisterLimits creates the instruments of the adaptive controllers of
// src on meter, with a callback that observes src at each collection, and
// returns the callback's registration, as [Register] does for the lanes
// (with the same options, the same handling of a lane name given twice,
// and the same check of a lane that another RegisterLimits on the meter
// observes with the same attributes). Every data point has the attribute lanes.lane, the name of the
// lane the controller drives:
//
//	lanes.adaptive.limit        UpDownCounter  {permit}      the limit set on the lane now (its capacity)
//	lanes.adaptive.floor        UpDownCounter  {permit}      the lowest limit the controller may set
//	lanes.adaptive.ceiling      UpDownCounter  {permit}      the highest
//	lanes.adaptive.increases    Counter        {move}        moves up, by lanes.reason: growth
//	lanes.adaptive.decreases    Counter        {move}        moves down, by lanes.reason: overload, latency
//	lanes.adaptive.last_reason  Gauge          1             why the limit last moved: 1 for that lanes.reason, 0 for the others (none, growth, overload, latency)
//	lanes.adaptive.last_change  Gauge          s             when it last moved, Unix time on the controller's clock (absent until it moves)
//	lanes.adaptive.round_trips  Counter        {round_trip}  round trips decided
//	lanes.adaptive.outcomes     Counter        {outcome}     outcomes counted in them, by lanes.outcome: success, overload
//	lanes.adaptive.latency      Gauge          s             mean latency of the last round trip's successes
//	lanes.adaptive.baseline     Gauge          s             Vegas: the latency taken as the provider's own (absent for AIMD)
//
// The last reason is reported as a state set, as the semantic conventions
// do for an enumeration (hw.status, say): a point per reason, every
// collection, rather than a value that codes the reason as a number. The
// moves count the round trips that changed the integer limit, as
// [adaptive.Stats] does. It panics if src is nil.
func RegisterLimits(meter metric.Meter, src exporters.LimitSource, opts ...Option) (metric.Registration, error) {
	if src == nil {
		panic("otellanes: nil limit source")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var in limitInstruments
	var errs [11]error
	in.limit, errs[0] = meter.Int64ObservableUpDownCounter("lanes.adaptive.limit", metric.WithUnit("{permit}"),
		metric.WithDescription("The limit the lane's adaptive controller sets now: the lane's capacity."))
	in.floor, errs[1] = meter.Int64ObservableUpDownCounter("lanes.adaptive.floor", metric.WithUnit("{permit}"),
		metric.WithDescription("The lowest limit the lane's adaptive controller may set."))
	in.ceiling, errs[2] = meter.Int64ObservableUpDownCounter("lanes.adaptive.ceiling", metric.WithUnit("{permit}"),
		metric.WithDescription("The highest limit the lane's adaptive controller may set."))
	in.increases, errs[3] = meter.Int64ObservableCounter("lanes.adaptive.increases", metric.WithUnit("{move}"),
		metric.WithDescription("Moves up of the lane's limit, by reason."))
	in.decreases, errs[4] = meter.Int64ObservableCounter("lanes.adaptive.decreases", metric.WithUnit("{move}"),
		metric.WithDescription("Moves down of the lane's limit, by reason."))
	in.lastReason, errs[5] = meter.Int64ObservableGauge("lanes.adaptive.last_reason", metric.WithUnit("1"),
		metric.WithDescription("Why the lane's limit last moved: 1 for that reason, 0 for the others."))
	in.lastChange, errs[6] = meter.Float64ObservableGauge("lanes.adaptive.last_change", metric.WithUnit("s"),
		metric.WithDescription("When the lane's limit last moved, as Unix time on its controller's clock."))
	in.roundTrips, errs[7] = meter.Int64ObservableCounter("lanes.adaptive.round_trips", metric.WithUnit("{round_trip}"),
		metric.WithDescription("Round trips of the lane's adaptive controller decided."))
	in.outcomes, errs[8] = meter.Int64ObservableCounter("lanes.adaptive.outcomes", metric.WithUnit("{outcome}"),
		metric.WithDescription("Outcomes counted in the round trips decided, by outcome."))
	in.latency, errs[9] = meter.Float64ObservableGauge("lanes.adaptive.latency", metric.WithUnit("s"),
		metric.WithDescription("Mean latency of the successes of the last round trip decided."))
	in.baseline, errs[10] = meter.Float64ObservableGauge("lanes.adaptive.baseline", metric.WithUnit("s"),
		metric.WithDescription("Vegas: the latency taken as the provider's own, without queueing."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otellanes: %w", err)
	}
	var reg *registration
	if _, ok := keyOf(meter, true); ok {
		var err error
		if reg, err = register(meter, true, limitSets(src.Limits(), cfg.attrs)); err != nil {
			return nil, err
		}
	}
	inner, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		limits := src.Limits()
		var shareErr error
		if reg != nil {
			if taken := reg.claim(limitSets(limits, cfg.attrs)); taken != nil {
				limits = slices.DeleteFunc(slices.Clone(limits), func(l exporters.Limit) bool {
					s := limitAttrs(cfg.attrs, l.Lane)
					_, ok := taken[s.Equivalent()]
					return ok
				})
				shareErr = sharedError(taken)
			}
		}
		return errors.Join(in.observe(o, limits, cfg.attrs), shareErr)
	}, in.limit, in.floor, in.ceiling, in.increases, in.decreases, in.lastReason, in.lastChange,
		in.roundTrips, in.outcomes, in.latency, in.baseline)
	return finish(reg, inner, err)
}

// reasons are the values of ReasonKey of lanes.adaptive.last_reason.
var reasons = [...]adaptive.Reason{adaptive.ReasonNone, adaptive.ReasonGrowth, adaptive.ReasonOverload, adaptive.ReasonLatency}

func (in *limitInstruments) observe(o metric.Observer, limits []exporters.Limit, fixed []attribute.KeyValue) error {
	var err error
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if seen[l.Lane] {
			if err == nil {
				err = fmt.Errorf("otellanes: the limit source reports lane %q twice", l.Lane)
			}
			continue
		}
		seen[l.Lane] = true
		kv := func(extra ...attribute.KeyValue) metric.MeasurementOption {
			return metric.WithAttributeSet(limitAttrs(fixed, l.Lane, extra...))
		}
		reason := func(r adaptive.Reason) metric.MeasurementOption { return kv(ReasonKey.String(r.String())) }
		lane := kv()
		o.ObserveInt64(in.limit, l.Limit, lane)
		o.ObserveInt64(in.floor, l.Floor, lane)
		o.ObserveInt64(in.ceiling, l.Ceiling, lane)
		o.ObserveInt64(in.increases, clamp(l.Increases), reason(adaptive.ReasonGrowth))
		o.ObserveInt64(in.decreases, clamp(l.OverloadDecreases), reason(adaptive.ReasonOverload))
		o.ObserveInt64(in.decreases, clamp(l.LatencyDecreases), reason(adaptive.ReasonLatency))
		for _, r := range reasons {
			v := int64(0)
			if r == l.LastReason {
				v = 1
			}
			o.ObserveInt64(in.lastReason, v, reason(r))
		}
		if !l.LastChange.IsZero() {
			o.ObserveFloat64(in.lastChange, float64(l.LastChange.UnixNano())/1e9, lane)
		}
		o.ObserveInt64(in.roundTrips, clamp(l.Windows), lane)
		o.ObserveInt64(in.outcomes, clamp(l.Samples-l.Overloads), kv(OutcomeKey.String(adaptive.Success.String())))
		o.ObserveInt64(in.outcomes, clamp(l.Overloads), kv(OutcomeKey.String(adaptive.Overload.String())))
		o.ObserveFloat64(in.latency, l.Latency.Seconds(), lane)
		if l.Algorithm == "vegas" {
			o.ObserveFloat64(in.baseline, l.Baseline.Seconds(), lane)
		}
	}
	return err
}
