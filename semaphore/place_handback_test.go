package semaphore_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/semaphore"
)

// endedCtx returns a context that has ended already.
func endedCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestPlaceGrantedAtJoinHandBackCounts: a place granted at Join and then
// waited for with a context that has ended is a hand-back (docs/glossary.md):
// Wait returns ctx.Err(), the permits go to the place behind it, and the
// grant counts only in Cancelled, not in Acquired or Released, nor as a
// hold in the hold-time histogram. Both kinds of token are covered: an
// inline one, and a spare one (taken once the inline tokens are out).
func TestPlaceGrantedAtJoinHandBackCounts(t *testing.T) {
	for _, c := range []struct {
		name  string
		held  int64 // permits held through inline tokens before the Join
		timed bool
	}{
		{"inline", 0, false},
		{"inline/histograms", 0, true},
		{"spare", 14, false}, // a semaphore keeps 14 inline tokens
		{"spare/histograms", 14, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts []semaphore.Option
			if c.timed {
				opts = append(opts, semaphore.WithHistograms())
			}
			s := semaphore.New(c.held+2, opts...)
			holders := make([]semaphore.Permit, c.held)
			for i := range holders {
				holders[i] = take(t, s, 1)
			}
			pl := placeJoin(t, s, 1)
			placeCheck(t, s, "a place granted at Join", c.held+1, 0)
			behind := placeJoin(t, s, 2)
			placeCheck(t, s, "a place behind it", c.held+1, 1)

			if p, err := pl.Wait(endedCtx()); err != context.Canceled || p.Weight() != 0 {
				t.Fatalf("Wait with an ended context of a place granted at Join: valid %v, %v; want context.Canceled", p.Weight() != 0, err)
			}
			placeCheck(t, s, "after the hand-back", c.held+2, 0) // behind was served
			st := s.Stats()
			if st.Acquired != uint64(c.held)+1 || st.Released != 0 || st.Cancelled != 1 || st.Waited != 1 {
				t.Fatalf("after the hand-back: %+v; want %d acquired (the holders and the place behind, which waited), 0 released, 1 cancelled", st.Counters, c.held+1)
			}

			placeWait(t, behind, "the place behind").Release()
			for _, p := range holders {
				p.Release()
			}
			st = requireBalanced(t, s)
			if st.Acquired != uint64(c.held)+1 || st.Cancelled != 1 {
				t.Fatalf("at the end: %+v; want %d acquired and released, 1 cancelled", st.Counters, c.held+1)
			}
			if c.timed && st.HoldTime.Count != st.Released {
				t.Fatalf("hold-time histogram counts %d holds; want %d (the hand-back held nothing)", st.HoldTime.Count, st.Released)
			}
		})
	}
}
