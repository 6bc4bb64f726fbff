package keyedsem_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
)

// TestPlaceGrantedAtJoinHandBackCounts: a place granted at Join and then
// waited for with a context that has ended is a hand-back (docs/glossary.md):
// Wait returns ctx.Err(), the permit goes to the place behind it, and the
// grant counts only in Cancelled, not in Acquired or Released, nor as a
// hold in the hold-time histogram. Alone on its key, the hand-back leaves
// the key idle, and with an idle timeout of 0 evicts it.
func TestPlaceGrantedAtJoinHandBackCounts(t *testing.T) {
	for _, timed := range []bool{false, true} {
		name := "plain"
		opts := []keyedsem.Option{keyedsem.WithIdleTimeout(0)}
		if timed {
			name = "histograms"
			opts = append(opts, keyedsem.WithHistograms())
		}
		t.Run(name, func(t *testing.T) {
			s := keyedsem.New[string](opts...)
			defer s.Close()
			ended, cancel := context.WithCancel(bg)
			cancel()

			pl := plJoin(t, s, "a", 1)
			behind := plJoin(t, s, "a", 1)
			plCheck(t, s, "a place granted at Join and one behind it", 1, 1)
			if p, err := pl.Wait(ended); err != context.Canceled || p.Weight() != 0 {
				t.Fatalf("Wait with an ended context of a place granted at Join: valid %v, %v; want context.Canceled", p.Weight() != 0, err)
			}
			plCheck(t, s, "after the hand-back", 1, 0) // behind was served
			if st := s.Stats(); st.Acquired != 1 || st.Released != 0 || st.Cancelled != 1 || st.Waited != 0 {
				t.Fatalf("after the hand-back: %+v; want 1 acquired (the place behind), 0 released, 1 cancelled", st.Counters)
			}
			plWait(t, behind, "the place behind").Release()

			alone := plJoin(t, s, "b", 1)
			if _, err := alone.Wait(ended); err != context.Canceled {
				t.Fatalf("Wait with an ended context of a place alone on its key: %v; want context.Canceled", err)
			}
			plCheck(t, s, "end", 0, 0)
			st := s.Stats()
			if st.Acquired != 1 || st.Released != 1 || st.Cancelled != 2 {
				t.Fatalf("at the end: %+v; want 1 acquired and released, 2 cancelled", st.Counters)
			}
			if st.Keys != 0 || st.Created != st.Evicted {
				t.Fatalf("at the end: %d keys, %d created, %d evicted; want every key evicted (idle timeout 0)", st.Keys, st.Created, st.Evicted)
			}
			if timed && st.HoldTime.Count != st.Released {
				t.Fatalf("hold-time histogram counts %d holds; want %d (the hand-backs held nothing)", st.HoldTime.Count, st.Released)
			}
		})
	}
}
