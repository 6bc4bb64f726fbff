package lanequeue

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
)

// TestSettleRefundAfterAFillKeepsTheDebt replays an interleaving that the
// model test, one step at a time, cannot reach: a refund of a grant of
// second S reads filled before a fill of S (so settle lets it through),
// the fill runs, a debt is settled in S lock-free (pend holds +20 for S),
// and only then does the refund reach pend. Summed in one word with the
// debt, the fold would drop the debt with the covered refund (-10) or let
// part of the refund through; kept apart, the debt stands and the refund
// is dropped: the fill's 100 plus the debt's 20.
func TestSettleRefundAfterAFillKeepsTheDebt(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	l := newTokenLane[string](100, clk, nil)
	defer l.Close()
	sec, _, ok := l.take(30)
	if !ok {
		t.Fatal("30 of 100 refused")
	}
	now := clk.Now().Unix()
	l.fill()             // the provider refused for its tokens: the window is full
	l.settle(sec, 20)    // a call used 20 more than its estimate: a debt, in pend
	l.add(sec, -30, now) // the refund that passed settle's check before the fill
	l.mu.Lock()
	l.sync(now)
	total := l.total
	l.mu.Unlock()
	if total != 120 {
		t.Fatalf("the window counts %d tokens; want 120: the fill's 100 and the debt's 20", total)
	}
}
