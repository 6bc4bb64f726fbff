package semaphore

import (
	"context"
	"runtime"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

// acquireContended is the fast path retried after a lost compare-and-swap.
// It runs only when another core changed the state word in between, which
// no test can arrange on demand, so these tests call it directly and check
// that it takes permits exactly when the fast path may: never past a
// queued waiter, never without a free inline token, never beyond the
// permits available.

func TestAcquireContendedTakesFreePermits(t *testing.T) {
	s := New(3)
	p, ok := s.acquireContended(context.Background(), 2)
	if !ok {
		t.Fatal("2 of 3 free permits were not taken")
	}
	if st := s.Stats(); st.Held != 2 || st.Available != 1 || st.Acquired != 1 {
		t.Fatalf("after taking 2: held %d, available %d, acquired %d; want 2, 1, 1", st.Held, st.Available, st.Acquired)
	}
	if !p.Release() {
		t.Fatal("the permit's first Release returned false")
	}
	if st := s.Stats(); st.Available != 3 || st.Released != 1 {
		t.Fatalf("after the release: available %d, released %d; want 3, 1", st.Available, st.Released)
	}
}

func TestAcquireContendedRefusesWhatIsNotFree(t *testing.T) {
	s := New(1)
	held, err := s.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.acquireContended(context.Background(), 1); ok {
		t.Fatal("took a permit that was held")
	}
	held.Release()
}

// A waiter queued for more than is free sets the slow flag; a caller on
// the fast path must then not take the permits that are free, or it would
// overtake the waiter.
func TestAcquireContendedNeverOvertakesAWaiter(t *testing.T) {
	s := New(2)
	held, err := s.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Permit)
	go func() {
		p, err := s.Acquire(context.Background(), 2)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	for i := 0; s.Stats().Waiters != 1; i++ {
		if i == 1_000_000 {
			t.Fatal("the waiter never queued")
		}
		runtime.Gosched()
	}
	if p, ok := s.acquireContended(context.Background(), 1); ok {
		p.Release()
		t.Fatal("took the free permit past a queued waiter")
	}
	held.Release()
	p := testkit.Recv(t, got, "the waiter's grant")
	if p.Weight() != 2 || !p.Release() {
		t.Fatalf("the waiter got weight %d, want 2 and a first release", p.Weight())
	}
}

// With every inline token out, a grant needs a spare token, which only the
// slow path hands out under the lock.
func TestAcquireContendedNeedsAnInlineToken(t *testing.T) {
	s := New(inlineTokens + 1)
	var out []Permit
	for range inlineTokens {
		p, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if _, ok := s.acquireContended(context.Background(), 1); ok {
		t.Fatal("granted a permit without an inline token")
	}
	p, err := s.Acquire(context.Background(), 1) // the slow path, with a spare token
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(out, p) {
		if !q.Release() {
			t.Fatal("a first Release returned false")
		}
	}
	if st := s.Stats(); st.Available != inlineTokens+1 || st.Held != 0 {
		t.Fatalf("after releasing all: available %d, held %d", st.Available, st.Held)
	}
}
