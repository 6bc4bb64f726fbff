package semaphore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
)

func (s *Weighted) bandV(band int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.fair.lookup(band)
	if b == nil {
		return 0, false
	}
	return b.v, true
}

// A grant of band 1 given back (its Wait's context had ended) must leave
// band 0's virtual time alone: band 0's last grant (a1's) reached its
// waiter. One permit free at a time: every grant goes through the same
// token, so band 0's top still names it when band 1's grant is given
// back. Before, unserved matched the first band whose top was the token,
// band 0, and took its v back (a review found it).
func TestFairGrantGivenBackLeavesOtherBandsAlone(t *testing.T) {
	const U = fairScale
	s := New(2, WithPriorities(time.Hour), WithFairShare(nil))
	// Every wait below is granted at once or never: a deadline, so that a
	// defect fails the test rather than hanging it.
	bg, cancelAll := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancelAll()
	extra, _ := s.TryAcquire(1) // held throughout: a2 (2 permits) cannot fit
	hold, _ := s.TryAcquire(1)
	join := func(n int64, opts ...AcquireOption) Place {
		t.Helper()
		p, err := s.Join(n, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a0 := join(1, Group("a")) // key 0
	a1 := join(1, Group("a")) // key U
	a2 := join(2, Group("a")) // key 2U
	hold.Release()
	p0, err := a0.Wait(bg)
	if err != nil {
		t.Fatal(err)
	}
	p0.Release()
	p1, err := a1.Wait(bg)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.bandV(0); v != U {
		t.Fatalf("band 0 v = %d after a1's grant, want %d", v, U)
	}
	b := join(1, Priority(1), Group("b"))
	p1.Release() // b, of the higher band, is granted
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("b.Wait: %v", err)
	}
	v, _ := s.bandV(0)

	// The order that follows: c joins band 0 twice. Band 0's v is U, so
	// c0 = U, c1 = 2U = a2's key, and a2 (earlier) goes before c1.
	c0 := join(1, Group("c"))
	c1 := join(1, Group("c"))
	extra.Release() // 2 free: c0 goes first; then a2 (2U, earlier) before c1 (2U)
	s.mu.Lock()
	waiting, head := s.q.Len(), s.q.Head()
	headN := head.N
	s.mu.Unlock()
	if v != U {
		t.Errorf("band 0 v = %d after band 1's grant was given back, want %d", v, U)
	}
	if waiting != 2 || headN != 2 {
		t.Fatalf("c1 was served ahead of a2: %d waiting, head N=%d; want a2 (N=2) at the head and c1 behind it", waiting, headN)
	}
	// The rest in that order: c0's release lets a2 in, a2's c1.
	for _, pl := range []Place{c0, a2, c1} {
		p, err := pl.Wait(bg)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	}
	if st := s.Stats(); st.Waiters != 0 || st.Available != st.Capacity {
		t.Fatalf("after every release: %+v", st)
	}
}
