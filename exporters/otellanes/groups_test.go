package otellanes_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/otellanes"
)

// groupPoints collects a reader given a producer of q with group waits w
// (and the fixed attribute queue=main) and returns the count of each
// lanes.group.wait.duration point of lane "agents" by its lanes.group.
func groupPoints(t *testing.T, w *exporters.GroupWaits, q exporters.Source) map[string]uint64 {
	t.Helper()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(otellanes.NewProducer(q,
		otellanes.WithAttributes(attribute.String("queue", "main")), otellanes.WithGroupWaits(w))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "lanes.group.wait.duration" {
				continue
			}
			if m.Unit != "s" || m.Description == "" {
				t.Errorf("%s: unit %q, description %q", m.Name, m.Unit, m.Description)
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				lane, _ := p.Attributes.Value(otellanes.LaneKey)
				kind, _ := p.Attributes.Value(otellanes.KindKey)
				fixed, _ := p.Attributes.Value("queue")
				g, ok := p.Attributes.Value(otellanes.GroupKey)
				if lane.AsString() != "agents" || kind.AsString() != "global" || fixed.AsString() != "main" || !ok {
					t.Fatalf("a point with attributes %v", p.Attributes.ToSlice())
				}
				var n uint64
				for _, c := range p.BucketCounts {
					n += c
				}
				if n != p.Count || len(p.Bounds) != len(p.BucketCounts)-1 {
					t.Fatalf("group %s: count %d, buckets %d, bounds %d", g.AsString(), p.Count, n, len(p.Bounds))
				}
				out[g.AsString()] = p.Count
			}
		}
	}
	return out
}

// The recipe's agents lane (issue 26): lanes.group.wait.duration shows the
// small tenant's wait apart from the big one's three, adding up to the
// lane's waited grants.
func TestGroupWaitsShowTheSmallTenantApart(t *testing.T) {
	w := exporters.NewGroupWaits()
	q := scenario.Fair(t, w, "big", "small", "big", "big")
	got := groupPoints(t, w, q)
	want := map[string]uint64{"big": 3, "small": 1, exporters.OtherGroup: 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("agents' group points: %v; want %v", got, want)
	}
	if waited := scenario.Lane(q, "agents").Waited; got["big"]+got["small"]+got[exporters.OtherGroup] != waited {
		t.Errorf("the group points sum to less or more than agents' %d waited grants: %v", waited, got)
	}
}

// With TopGroups(1) and four tenants, agents has 2 group points, "other"
// with the three tenants without one.
func TestGroupWaitsAreBounded(t *testing.T) {
	w := exporters.NewGroupWaits(exporters.TopGroups(1))
	q := scenario.Fair(t, w, "t0", "t1", "t2", "t3")
	got := groupPoints(t, w, q)
	if len(got) != 2 || got[exporters.OtherGroup] != 3 {
		t.Errorf("agents' group points %v; want one tenant's 1 and other 3", got)
	}
}
