package lanequeue_test

import (
	"context"
	"testing"
)

// TestPlaceGrantedAtJoinHandBackCounts: a place whose turn on the session
// lane came at Join, then waited for with a context that has ended, is a
// hand-back on that lane (docs/glossary.md): Wait returns ctx.Err(), the
// turn goes to the place behind, and the session lane counts it only in
// Cancelled, not in Acquired or Released. The global lane, which Wait
// never reached, counts nothing for it.
func TestPlaceGrantedAtJoinHandBackCounts(t *testing.T) {
	q := testQueue(t, 2)
	chat := chatLanes(t, q)
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	first := join(t, q, "alice", chat) // the session lane's turn comes at Join
	behind := join(t, q, "alice", chat)
	if tk, err := first.Wait(ended); err != context.Canceled || tk != nil {
		t.Fatalf("Wait with an ended context of a place granted at Join: ticket %v, %v; want context.Canceled", tk != nil, err)
	}
	st := laneStats(t, q, "session")
	if st.Acquired != 1 || st.Released != 0 || st.Cancelled != 1 || st.Waiters != 0 {
		t.Fatalf("session lane after the hand-back: %+v, %d waiting; want 1 acquired (the place behind), 0 released, 1 cancelled, none waiting", st.Counters, st.Waiters)
	}
	placeWait(t, behind, "the place behind").Release()

	st = laneStats(t, q, "session")
	if st.Acquired != 1 || st.Released != 1 || st.Cancelled != 1 {
		t.Fatalf("session lane at the end: %+v; want 1 acquired and released, 1 cancelled", st.Counters)
	}
	if g := laneStats(t, q, "global"); g.Acquired != 1 || g.Released != 1 || g.Cancelled != 0 {
		t.Fatalf("global lane at the end: %+v; want only the place behind's grant", g.Counters)
	}
	assertNothingHeld(t, q)
}
