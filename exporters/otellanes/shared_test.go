package otellanes_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/otellanes"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// capacities collects once and returns lanes.capacity's points: their
// values by the attribute "queue" (empty when the point has none).
func capacities(t *testing.T, reader *sdkmetric.ManualReader) (map[string][]int64, error) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	err := reader.Collect(context.Background(), &rm)
	got := map[string][]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "lanes.capacity" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				q, _ := dp.Attributes.Value("queue")
				got[q.AsString()] = append(got[q.AsString()], dp.Value)
			}
		}
	}
	return got, err
}

// TestSharedLaneRefused: a second Register on one meter whose source has
// a lane of the same name and kind, and no attribute to tell it apart, is
// refused with an error naming the lane, where the SDK would have added
// the two lanes' values into one series; told apart by WithAttributes,
// both are observed, each on its own. After the first Unregisters, the
// lane is free again.
func TestSharedLaneRefused(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	meter := mp.Meter("t")
	a, b := semaphore.New(4), semaphore.New(6)
	ra, err := otellanes.Register(meter, exporters.Semaphore("global", a))
	if err != nil {
		t.Fatal(err)
	}
	if rb, err := otellanes.Register(meter, exporters.Semaphore("global", b)); err == nil || !strings.Contains(err.Error(), `lane "global" registered on this meter already`) {
		if rb != nil {
			_ = rb.Unregister()
		}
		t.Fatalf("a second Register with lane \"global\" again: %v; want an error naming the lane", err)
	}
	got, err := capacities(t, reader)
	if err != nil || len(got[""]) != 1 || got[""][0] != 4 {
		t.Fatalf("lanes.capacity %v (%v); want the first lane's 4 alone", got, err)
	}
	rb, err := otellanes.Register(meter, exporters.Semaphore("global", b), otellanes.WithAttributes(attribute.String("queue", "b")))
	if err != nil {
		t.Fatalf("a lane told apart by its attributes: %v", err)
	}
	defer func() { _ = rb.Unregister() }()
	got, err = capacities(t, reader)
	if err != nil || len(got[""]) != 1 || got[""][0] != 4 || len(got["b"]) != 1 || got["b"][0] != 6 {
		t.Fatalf("lanes.capacity %v (%v); want 4 and, for queue b, 6", got, err)
	}
	if err := ra.Unregister(); err != nil {
		t.Fatal(err)
	}
	rc, err := otellanes.Register(meter, exporters.Semaphore("global", b))
	if err != nil {
		t.Fatalf("Register after the first lane's Unregister: %v", err)
	}
	_ = rc.Unregister()
}

// TestSharedLaneAddedLater: a lane that a source adds after its Register,
// which another registration of the meter observes already with the same
// attributes, stays that registration's: the later one leaves it out and
// its collection says why, every collection, while its other lanes are
// observed.
func TestSharedLaneAddedLater(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	meter := mp.Meter("t")
	a, b, own := semaphore.New(4), semaphore.New(6), semaphore.New(2)
	ra, err := otellanes.Register(meter, exporters.Semaphore("global", a))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ra.Unregister() }()
	added := false
	later := exporters.SourceFunc(func() []lanequeue.LaneStats {
		ls := []lanequeue.LaneStats{laneOf("own", own)}
		if added {
			ls = append(ls, laneOf("global", b))
		}
		return ls
	})
	rb, err := otellanes.Register(meter, later)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rb.Unregister() }()
	added = true
	for i := range 2 {
		got, err := capacities(t, reader)
		if err == nil || !strings.Contains(err.Error(), `lane "global" registered on this meter already`) {
			t.Fatalf("collection %d: %v; want an error naming lane \"global\"", i, err)
		}
		if len(got[""]) != 2 || got[""][0]+got[""][1] != 4+2 {
			t.Fatalf("collection %d: lanes.capacity %v; want global's 4 (the first registration's) and own's 2", i, got)
		}
	}
}

// laneOf is the figures of semaphore s as a lane named name.
func laneOf(name string, s *semaphore.Weighted) lanequeue.LaneStats {
	return exporters.Semaphore(name, s).Stats()[0]
}

// TestSharedLimitRefused: RegisterLimits makes one set of instruments per
// meter too, so a second limit source with a lane of the same name, not
// told apart, is refused as Register refuses a lane.
func TestSharedLimitRefused(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	meter := mp.Meter("t")
	src := exporters.LimitFunc(func() []exporters.Limit { return []exporters.Limit{{Lane: "model"}} })
	ra, err := otellanes.RegisterLimits(meter, src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ra.Unregister() }()
	if rb, err := otellanes.RegisterLimits(meter, src); err == nil || !strings.Contains(err.Error(), `lane "model" registered on this meter already`) {
		if rb != nil {
			_ = rb.Unregister()
		}
		t.Fatalf("a second RegisterLimits with lane \"model\" again: %v; want an error naming the lane", err)
	}
	// Register's lanes are other instruments: a lane "model" there is no clash.
	rc, err := otellanes.Register(meter, exporters.Semaphore("model", semaphore.New(1)))
	if err != nil {
		t.Fatalf("Register of a lane named as a limit: %v", err)
	}
	_ = rc.Unregister()
}

// TestSharedCheckSkipsMetersWithoutIdentity: a meter that is a value, not
// a pointer (every noop meter is equal to every other; a wrapper may hold
// what cannot be compared), is not checked: two noop meters of two
// providers each take a lane "global", and a wrapper with a slice in it
// does not panic.
func TestSharedCheckSkipsMetersWithoutIdentity(t *testing.T) {
	m1 := noop.NewMeterProvider().Meter("queue-a")
	m2 := noop.NewMeterProvider().Meter("queue-b")
	for _, m := range []metric.Meter{m1, m2, wrapMeter{sliceMeter{tags: []string{"x"}}}} {
		r, err := otellanes.Register(m, exporters.Semaphore("global", semaphore.New(1)))
		if err != nil {
			t.Fatalf("Register on %T: %v", m, err)
		}
		defer func() { _ = r.Unregister() }()
	}
}

type sliceMeter struct {
	noop.Meter
	tags []string
}

type wrapMeter struct{ metric.Meter }

// TestSharedCheckKeepsNothingAlive: a provider dropped without its
// registrations unregistered is collected, and its sources with it: the
// registry holds neither a meter nor a source.
func TestSharedCheckKeepsNothingAlive(t *testing.T) {
	gone := func() weak.Pointer[semaphore.Weighted] {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		sem := semaphore.New(1)
		if _, err := otellanes.Register(mp.Meter("t"), exporters.Semaphore("global", sem)); err != nil {
			t.Fatal(err)
		}
		return weak.Make(sem)
	}()
	for i := 0; i < 5 && gone.Value() != nil; i++ {
		runtime.GC()
	}
	if gone.Value() != nil {
		t.Fatal("the source of a registration never unregistered, its provider dropped, is still alive after 5 collections")
	}
}

// TestSharedCheckKeepsACallbackRegisteredWithAnError: a meter may register
// the callback and return an error too (the SDK's does when some
// instruments are not its own). The registration is then handed back with
// the error, and stays checked: a second source's lane "global" is
// refused, not summed with the first's.
func TestSharedCheckKeepsACallbackRegisteredWithAnError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	meter := &grumblingMeter{Meter: mp.Meter("t")}
	r1, err := otellanes.Register(meter, exporters.Semaphore("global", semaphore.New(4)))
	if r1 == nil || !errors.Is(err, errGrumble) {
		t.Fatalf("Register = %v, %v; want the registration and the meter's error", r1, err)
	}
	defer func() { _ = r1.Unregister() }()
	if r2, err := otellanes.Register(meter, exporters.Semaphore("global", semaphore.New(6))); err == nil || !strings.Contains(err.Error(), `lane "global" registered on this meter already`) {
		if r2 != nil {
			_ = r2.Unregister()
		}
		t.Fatalf("a second Register with lane \"global\": %v; want it refused", err)
	}
	if got, _ := capacities(t, reader); len(got[""]) != 1 || got[""][0] != 4 {
		t.Fatalf("lanes.capacity %v; want the first lane's 4 alone", got)
	}
}

// grumblingMeter registers callbacks and returns an error all the same.
type grumblingMeter struct{ metric.Meter }

var errGrumble = errors.New("one instrument refused")

func (m *grumblingMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	r, err := m.Meter.RegisterCallback(f, insts...)
	return r, errors.Join(err, errGrumble)
}
