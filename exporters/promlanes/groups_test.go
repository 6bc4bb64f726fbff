package promlanes_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sessionlane/lanes/exporters"
	"github.com/sessionlane/lanes/exporters/internal/scenario"
	"github.com/sessionlane/lanes/exporters/promlanes"
)

// groupScrape gathers reg and returns, for lane, the _count of each
// lanes_group_wait_seconds series by its group label, and the lane's
// lanes_waited_total.
func groupScrape(t *testing.T, reg *prometheus.Registry, lane string) (byGroup map[string]uint64, waited uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byGroup = map[string]uint64{}
	label := func(m *dto.Metric, name string) (string, bool) {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue(), true
			}
		}
		return "", false
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if l, _ := label(m, "lane"); l != lane {
				continue
			}
			switch mf.GetName() {
			case "lanes_group_wait_seconds":
				g, ok := label(m, "group")
				if kind, _ := label(m, "kind"); !ok || kind != "global" {
					t.Fatalf("a group series without group or kind=\"global\": %v", m)
				}
				if _, dup := byGroup[g]; dup {
					t.Fatalf("group %q twice", g)
				}
				byGroup[g] = m.GetHistogram().GetSampleCount()
			case "lanes_waited_total":
				waited = uint64(m.GetCounter().GetValue())
			}
		}
	}
	return byGroup, waited
}

// The recipe's agents lane (issue 26): its histogram mixes every tenant's
// waits, lanes_group_wait_seconds shows the small tenant's wait apart from
// the big one's four, and the group series add up to the lane's waited
// grants. The keyed thread lane has no group series.
func TestGroupWaitsShowTheSmallTenantApart(t *testing.T) {
	w := exporters.NewGroupWaits()
	q := scenario.Fair(t, w, "big", "big", "big", "small", "big")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(q, promlanes.WithGroupWaits(w)))
	byGroup, waited := groupScrape(t, reg, "agents")
	want := map[string]uint64{"big": 4, "small": 1, exporters.OtherGroup: 0}
	if fmt.Sprint(byGroup) != fmt.Sprint(want) {
		t.Errorf("agents' group series: %v; want %v", byGroup, want)
	}
	if sum := byGroup["big"] + byGroup["small"] + byGroup[exporters.OtherGroup]; sum != waited || waited != 5 {
		t.Errorf("the group series sum to %d, lanes_waited_total is %d; want both 5", sum, waited)
	}
	if thread, _ := groupScrape(t, reg, "thread"); len(thread) != 0 {
		t.Errorf("the keyed thread lane has group series: %v", thread)
	}
}

// With TopGroups(2) and six tenants, agents has 3 group series, "other"
// one of them with the waits of the four tenants without a series; they
// add up to lanes_waited_total.
func TestGroupWaitsAreBounded(t *testing.T) {
	w := exporters.NewGroupWaits(exporters.TopGroups(2))
	q := scenario.Fair(t, w, "t0", "t1", "t2", "t3", "t4", "t5")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(promlanes.New(q, promlanes.WithGroupWaits(w)))
	byGroup, waited := groupScrape(t, reg, "agents")
	var sum uint64
	for g, n := range byGroup {
		sum += n
		if g != exporters.OtherGroup && n != 1 {
			t.Errorf("group %s: %d waits; want 1", g, n)
		}
	}
	if len(byGroup) != 3 || byGroup[exporters.OtherGroup] != 4 || sum != waited || waited != 6 {
		t.Errorf("agents' group series %v, summing to %d, lanes_waited_total %d; want 2 tenants and other 4, summing to 6", byGroup, sum, waited)
	}
}
