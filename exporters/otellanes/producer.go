package otellanes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/internal/nilptr"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// ScopeName is the instrumentation scope of the histograms a [Producer]
// produces.
const ScopeName = "github.com/sessionlane/lanes/exporters/otellanes"

// Producer produces the wait-time and hold-time histograms of the lanes of
// a source, for a reader of the OpenTelemetry SDK:
//
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(otellanes.NewProducer(q)))
//
// The histograms are already aggregated by the lanes (fixed buckets,
// counted as the calls happen), and the metrics API has no asynchronous
// histogram instrument to report such a histogram through a callback, so
// they reach the SDK as an external producer, as bridges from other metric
// libraries do; [Register] reports everything else. Two histograms, with
// the attributes of Register's data points:
//
//	lanes.wait.duration  Histogram  s  time a grant waited in line (0 for one that did not queue)
//	lanes.hold.duration  Histogram  s  time from a grant to its release
//
// Only lanes that record them (semaphore.WithHistograms,
// keyedsem.WithHistograms, redislane.WithHistograms: see
// [semaphore.Timings]) have data points; the
// bucket bounds are [semaphore.HistogramBounds] in seconds. They are
// cumulative, and their start time is when NewProducer was called (make
// the producer with the lanes, or the first interval starts late).
//
// With [WithGroupWaits] a third histogram, in the same buckets, holds
// the waits of fair lanes by fair-share group, from an
// [exporters.GroupWaits] that the queue's hooks feed:
//
//	lanes.group.wait.duration  Histogram  s  time a grant of a fair lane queued, by lanes.group
//
// Its data points have the attributes lanes.lane, lanes.kind and
// lanes.group: at most TopGroups+1 per lane, the groups with a point of
// their own and "other" for the rest (the exporters package doc's "Waits
// by group" says which), their counts adding up to the lane's grants that
// queued (lanes.waited, for the calls made through the queue).
//
// Produce may be called concurrently; each call reads the source once.
type Producer struct {
	src    exporters.Source
	attrs  []attribute.KeyValue
	groups *exporters.GroupWaits // nil: no lanes.group.wait.duration
	start  time.Time
}

var _ sdkmetric.Producer = (*Producer)(nil)

// NewProducer returns a producer of src's histograms; opts are Register's
// (WithAttributes) and WithGroupWaits. It panics if src is nil.
func NewProducer(src exporters.Source, opts ...Option) *Producer {
	if nilptr.Is(src) { // also a typed nil, such as a nil *lanequeue.Queue, which would fail at the first scrape
		panic("otellanes: nil source")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return &Producer{src: src, attrs: cfg.attrs, groups: cfg.groups, start: time.Now()}
}

// bounds are semaphore.HistogramBounds in seconds.
var bounds = func() []float64 {
	b := semaphore.HistogramBounds()
	s := make([]float64, len(b))
	for i, d := range b {
		s[i] = d.Seconds()
	}
	return s
}()

// Produce returns the histograms of the lanes that record them, and the
// group waits (WithGroupWaits), in one scope (none if there are none). A
// lane name that the source gives twice is produced once, with an error
// naming it.
func (p *Producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	var wait, hold []metricdata.HistogramDataPoint[float64]
	lanes, err := exporters.Read(p.src)
	if err != nil {
		err = fmt.Errorf("otellanes: %w", err)
	}
	for _, l := range lanes {
		st := l.LaneStats
		if !st.Enabled {
			continue
		}
		kv := make([]attribute.KeyValue, 0, len(p.attrs)+2)
		kv = append(append(kv, p.attrs...), LaneKey.String(st.Name), KindKey.String(st.Kind.String()))
		set := attribute.NewSet(kv...)
		wait = append(wait, p.point(set, now, &st.WaitTime))
		hold = append(hold, p.point(set, now, &st.HoldTime))
	}
	groups := p.groupPoints(now)
	if len(wait) == 0 && len(groups) == 0 {
		return nil, err
	}
	b := slices.Clone(bounds) // the points' own: a reader may keep them
	for i := range wait {
		wait[i].Bounds, hold[i].Bounds = b, b
	}
	for i := range groups {
		groups[i].Bounds = b
	}
	var ms []metricdata.Metrics
	if len(wait) > 0 {
		ms = append(ms,
			metricdata.Metrics{Name: "lanes.wait.duration", Unit: "s", Description: "Time a grant of the lane waited in line (0 for one that did not queue).",
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: wait}},
			metricdata.Metrics{Name: "lanes.hold.duration", Unit: "s", Description: "Time from a grant of the lane to its release.",
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: hold}})
	}
	if len(groups) > 0 {
		ms = append(ms, metricdata.Metrics{Name: "lanes.group.wait.duration", Unit: "s",
			Description: "Time a grant of a fair lane waited in line, of the calls that queued, by fair-share group: the groups with a point of their own, the others summed as \"other\".",
			Data:        metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: groups}})
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: ms}}, err
}

// groupPoints returns a point per group series of p.groups (none without
// it), their Bounds left for Produce to set.
func (p *Producer) groupPoints(now time.Time) []metricdata.HistogramDataPoint[float64] {
	if p.groups == nil {
		return nil
	}
	var out []metricdata.HistogramDataPoint[float64]
	for _, l := range p.groups.Lanes() {
		for i := range l.Groups {
			g := &l.Groups[i]
			kv := make([]attribute.KeyValue, 0, len(p.attrs)+3)
			kv = append(append(kv, p.attrs...), LaneKey.String(l.Lane), KindKey.String(lanequeue.Global.String()), GroupKey.String(g.Group))
			out = append(out, p.point(attribute.NewSet(kv...), now, &g.Waits))
		}
	}
	return out
}

// point converts h: the bucket counts as they are (OpenTelemetry's are per
// bucket, not cumulative), the count their sum (read while the lane is in
// use, h.Count may differ from it by an observation in flight).
func (p *Producer) point(set attribute.Set, now time.Time, h *semaphore.Histogram) metricdata.HistogramDataPoint[float64] {
	counts := make([]uint64, len(h.Counts))
	var n uint64
	for i, c := range h.Counts {
		counts[i] = c
		n += c
	}
	return metricdata.HistogramDataPoint[float64]{
		Attributes: set, StartTime: p.start, Time: now,
		Count: n, BucketCounts: counts, Sum: h.Sum.Seconds(),
	}
}
