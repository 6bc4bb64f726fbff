package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/lanequeue"
)

// TestTokenLanesMoveChargesToTheGrant: a call that took lane b and then
// waited ten seconds for lane a reaches the provider when a grants it,
// so its charge on b counts from then, not from before the wait: b's
// window holds it until a window after the grant. Left where it was, the
// charge left b's window ten seconds before the provider's count of the
// call did, and b let in a budget's worth more within the provider's
// window of the call.
func TestTokenLanesMoveChargesToTheGrant(t *testing.T) {
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100)) // b is spent for a minute
	if !ok {
		t.Fatal("a fresh lane refused its budget")
	}
	full.Release()
	res := acquireAsync(context.Background(), q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", 1))
	pending(t, clk, 1) // it gave a back and waits for b
	clk.Advance(10 * time.Second)
	spend, ok := q.TryAcquireAll("spend", a, lanequeue.LaneWeight("a", 100)) // a is spent until 72 s
	if !ok {
		t.Fatal("a's budget refused while the call waits for b, holding nothing")
	}
	spend.Release()
	clk.Advance(52 * time.Second) // 62 s: it takes b and waits for a
	pending(t, clk, 1)
	clk.Advance(10 * time.Second) // 72 s: a's 100 leave the window
	r := receive(t, res)
	must(t, r.err)
	r.t.Release()
	clk.Advance(52 * time.Second) // 124 s: a charge of b made at 62 s has left the window
	if probe, ok := q.TryAcquireAll("probe", b, lanequeue.LaneWeight("b", 100)); ok {
		probe.Release()
		t.Fatal("b's charge of the call counts from 62 s, before its 10 s wait for a: the provider counts the call from 72 s")
	}
	clk.Advance(10 * time.Second) // 134 s: a window after the grant
	probe, ok := q.TryAcquireAll("probe", b, lanequeue.LaneWeight("b", 100))
	if !ok {
		t.Fatal("b's moved charge still counts a window after the call's grant")
	}
	probe.Release()
}

// TestTokenLanesMoveStarvesNoCall: lanes busy by turns, each refilled by
// another caller while the call waits for the other one, do not keep the
// call out: after its one give-back it waits for b, then for a holding b
// (a rival that wants b waits behind it), and a's grant moves b's charge
// instead of giving it back. Giving back after every wait, the call would
// lose b to the rival at 62 s, a to the next at 72 s, and so on for good.
func TestTokenLanesMoveStarvesNoCall(t *testing.T) {
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100)) // b is spent for a minute
	if !ok {
		t.Fatal("a fresh lane refused its budget")
	}
	full.Release()
	res := acquireAsync(context.Background(), q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", 60))
	pending(t, clk, 1) // it gave a back and waits for b
	clk.Advance(10 * time.Second)
	spend, ok := q.TryAcquireAll("ra", a, lanequeue.LaneWeight("a", 100)) // a is spent until 72 s
	if !ok {
		t.Fatal("a's budget refused while the call waits for b, holding nothing")
	}
	spend.Release()
	clk.Advance(52 * time.Second) // 62 s: it takes b and waits for a
	pending(t, clk, 1)
	rb := acquireAsync(context.Background(), q, "rb", []string{"b"}, lanequeue.LaneWeight("b", 100))
	pending(t, clk, 2) // the rival waits for b's room: the call holds 60 of it
	clk.Advance(10 * time.Second)
	r := receive(t, res) // 72 s: a has room; the call is let through
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
	pending(t, clk, 1)            // the rival waits on
	clk.Advance(62 * time.Second) // 134 s: the call's charge of b, moved to 72 s, leaves
	got := receive(t, rb)
	must(t, got.err)
	got.t.Release()
}

// TestTokenLanesTakeAgainAChargeThatLeft: a call that waited more than a
// window for lane a, holding b, finds b's charge gone from b's window
// when a grants it: it takes b again, so that b counts the call it lets
// through.
func TestTokenLanesTakeAgainAChargeThatLeft(t *testing.T) {
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100)) // b is spent for a minute
	if !ok {
		t.Fatal("a fresh lane refused its budget")
	}
	full.Release()
	res := acquireAsync(context.Background(), q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", 60))
	pending(t, clk, 1) // it gave a back and waits for b
	clk.Advance(10 * time.Second)
	spend, ok := q.TryAcquireAll("ra", a, lanequeue.LaneWeight("a", 100)) // a is spent until 72 s
	if !ok {
		t.Fatal("a's budget refused while the call waits for b, holding nothing")
	}
	clk.Advance(52 * time.Second) // 62 s: it takes b and waits for a
	pending(t, clk, 1)
	clk.Advance(time.Second)
	must(t, spend.Settle("a", 200)) // 63 s: a debt of 100 keeps a spent until 125 s
	spend.Release()
	clk.Advance(9 * time.Second) // 72 s: the first 100 leave; the debt stays
	pending(t, clk, 1)
	clk.Advance(53 * time.Second) // 125 s: a has room; b's charge of 62 s left at 124 s
	r := receive(t, res)
	must(t, r.err)
	r.t.Release()
	if probe, ok := q.TryAcquireAll("probe", b, lanequeue.LaneWeight("b", 100)); ok {
		probe.Release()
		t.Fatal("the call was let through with a charge of b that had left b's window")
	}
}
