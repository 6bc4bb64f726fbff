package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
)

// heldB is a call for 60 of a and bw of b, on two token lanes of 100 a
// minute, that holds b's charge and waits for a: b was spent when it
// came, so it gave a back and waited for b; meanwhile (at 10 s) another
// caller spent a, by spend (not released), until 72 s. The clock is at 62
// s, when b had room again and the call took it.
type heldB struct {
	q     *lanequeue.Queue[string]
	clk   *clock.Fake
	a, b  lanequeue.LaneSet[string]
	res   <-chan acquireResult
	spend *lanequeue.Ticket[string]
}

func holdB(t *testing.T, bw int64) heldB {
	t.Helper()
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100)) // b is spent for a minute
	if !ok {
		t.Fatal("a fresh lane refused its budget")
	}
	full.Release()
	res := acquireAsync(context.Background(), q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", bw))
	pending(t, clk, 1) // it gave a back and waits for b
	clk.Advance(10 * time.Second)
	spend, ok := q.TryAcquireAll("spend", a, lanequeue.LaneWeight("a", 100)) // a is spent until 72 s
	if !ok {
		t.Fatal("a's budget refused while the call waits for b, holding nothing")
	}
	clk.Advance(52 * time.Second) // 62 s: it takes b and waits for a
	pending(t, clk, 1)
	return heldB{q: q, clk: clk, a: a, b: b, res: res, spend: spend}
}

// TestTokenLanesMoveChargesToTheGrant: a call that took lane b and then
// waited ten seconds for lane a reaches the provider when a grants it,
// so its charge on b counts from then, not from before the wait: b's
// window holds it until a window after the grant. Left where it was, the
// charge left b's window ten seconds before the provider's count of the
// call did, and b let in a budget's worth more within the provider's
// window of the call.
func TestTokenLanesMoveChargesToTheGrant(t *testing.T) {
	h := holdB(t, 1)
	h.spend.Release()
	h.clk.Advance(10 * time.Second) // 72 s: a's 100 leave the window
	r := receive(t, h.res)
	must(t, r.err)
	r.t.Release()
	h.clk.Advance(52 * time.Second) // 124 s: a charge of b made at 62 s has left the window
	if probe, ok := h.q.TryAcquireAll("probe", h.b, lanequeue.LaneWeight("b", 100)); ok {
		probe.Release()
		t.Fatal("b's charge of the call counts from 62 s, before its 10 s wait for a: the provider counts the call from 72 s")
	}
	h.clk.Advance(10 * time.Second) // 134 s: a window after the grant
	probe, ok := h.q.TryAcquireAll("probe", h.b, lanequeue.LaneWeight("b", 100))
	if !ok {
		t.Fatal("b's moved charge still counts a window after the call's grant")
	}
	probe.Release()
}

// TestTokenLanesMoveStarvesNoCall: lanes busy by turns, each taken by
// another caller while the call waits for the other one, do not keep the
// call out: after its one give-back it waits for b, then for a holding b
// (a rival that wants b waits behind it), and a's grant moves b's charge
// instead of giving it back. Giving back after every wait, the call would
// lose b to the rival at 72 s, and a to the next caller while it waits
// for b again, for good.
func TestTokenLanesMoveStarvesNoCall(t *testing.T) {
	h := holdB(t, 60)
	h.spend.Release()
	rb := acquireAsync(context.Background(), h.q, "rb", []string{"b"}, lanequeue.LaneWeight("b", 100))
	pending(t, h.clk, 2) // the rival waits for b's room: the call holds 60 of it
	h.clk.Advance(10 * time.Second)
	r := receive(t, h.res) // 72 s: a has room; the call is let through
	must(t, r.err)
	r.t.Release()
	select {
	case got := <-rb:
		if got.err == nil {
			got.t.Release()
		}
		t.Fatalf("the rival for b was answered (%v) while the call's moved charge of b fills it", got.err)
	default:
	}
	pending(t, h.clk, 1)            // the rival waits on
	h.clk.Advance(62 * time.Second) // 134 s: the call's charge of b, moved to 72 s, leaves
	got := receive(t, rb)
	must(t, got.err)
	got.t.Release()
}

// TestTokenLanesTakeAgainAChargeThatLeft: a call that waited more than a
// window for lane a, holding b, finds b's charge gone from b's window
// when a grants it: it takes b again, so that b counts the call it lets
// through.
func TestTokenLanesTakeAgainAChargeThatLeft(t *testing.T) {
	h := holdB(t, 60)
	h.clk.Advance(time.Second)
	must(t, h.spend.Settle("a", 200)) // 63 s: a debt of 100 keeps a spent until 125 s
	h.spend.Release()
	h.clk.Advance(9 * time.Second) // 72 s: the first 100 leave; the debt stays
	pending(t, h.clk, 1)
	h.clk.Advance(53 * time.Second) // 125 s: a has room; b's charge of 62 s left at 124 s
	r := receive(t, h.res)
	must(t, r.err)
	r.t.Release()
	if probe, ok := h.q.TryAcquireAll("probe", h.b, lanequeue.LaneWeight("b", 100)); ok {
		probe.Release()
		t.Fatal("the call was let through with a charge of b that had left b's window")
	}
}
