package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/lanequeue"
)

// TestTokenLanesSettleAMovedCharge: a moved charge settles from its new
// second: settled to 0, b has its whole budget again (found by review:
// with restampHeld not re-marking the permit, the refund came from the
// old, empty second and no other test failed).
func TestTokenLanesSettleAMovedCharge(t *testing.T) {
	h := holdB(t, 60)
	h.spend.Release()
	h.clk.Advance(10 * time.Second) // 72 s: a grants; b's 60 moves to 72 s
	r := receive(t, h.res)
	must(t, r.err)
	must(t, r.t.Settle("b", 0))
	r.t.Release()
	probe, ok := h.q.TryAcquireAll("probe", h.b, lanequeue.LaneWeight("b", 100))
	if !ok {
		t.Fatal("the refund of the moved charge was taken from the old second")
	}
	probe.Release()
}

// TestTokenLanesCancelWhileHoldingGivesBack: a call whose context ends
// while it waits for a, holding b's charge, gives b's charge back.
func TestTokenLanesCancelWhileHoldingGivesBack(t *testing.T) {
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100))
	if !ok {
		t.Fatal("refused")
	}
	full.Release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := acquireAsync(ctx, q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", 60))
	pending(t, clk, 1)
	clk.Advance(10 * time.Second)
	spend, ok := q.TryAcquireAll("spend", a, lanequeue.LaneWeight("a", 100))
	if !ok {
		t.Fatal("a refused")
	}
	defer spend.Release()
	clk.Advance(52 * time.Second) // 62 s: takes b, waits for a
	pending(t, clk, 1)
	cancel()
	if r := receive(t, res); r.err == nil {
		r.t.Release()
		t.Fatal("granted after cancel")
	}
	probe, ok := q.TryAcquireAll("probe", b, lanequeue.LaneWeight("b", 100))
	if !ok {
		t.Fatal("b's charge was not given back")
	}
	probe.Release()
}
