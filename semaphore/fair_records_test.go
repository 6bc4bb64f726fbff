package semaphore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
)

// fairRecords counts the records of every band.
func (s *Weighted) fairRecords() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.fair.bands {
		n += len(b.recs)
	}
	return n
}

// The per-group records of WithFairShare stay few while the semaphore is
// busy for good: a steady group keeps someone waiting through 1000
// rounds, and in each round a group never seen before waits once. Each
// newcomer's record stops mattering as soon as the turn passes its
// request, and the sweep drops it within a few waits; and once nobody
// waits, the next wait starts with one record, its own.
func TestFairShareRecordsStayBounded(t *testing.T) {
	s := New(1, WithFairShare(nil))
	ctx := context.Background()
	hold, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire(1) on a fresh semaphore failed")
	}
	type result struct {
		p   Permit
		err error
	}
	done := make(chan result, 8)
	queue := func(g string) {
		t.Helper()
		want := s.Stats().Waiters + 1
		go func() {
			p, err := s.Acquire(ctx, 1, Group(g))
			done <- result{p, err}
		}()
		testkit.Eventually(t, "a waiter of "+g+" to queue", func() bool { return s.Stats().Waiters == want })
	}
	serve := func() {
		t.Helper()
		hold.Release()
		r := testkit.Recv(t, done, "a grant")
		if r.err != nil {
			t.Fatal(r.err)
		}
		hold = r.p
	}
	queue("steady")
	most := 0
	for i := range 1000 {
		queue(fmt.Sprintf("once-%d", i))
		queue("steady")
		serve()
		serve()
		most = max(most, s.fairRecords())
	}
	if most > 8 {
		t.Fatalf("up to %d records for 2 or 3 groups waiting at a time", most)
	}
	for s.Stats().Waiters > 0 {
		serve()
	}
	queue("after")
	if n := s.fairRecords(); n != 1 {
		t.Fatalf("%d records after a wait into an empty queue, want 1", n)
	}
	serve()
	hold.Release()
}

// fairIndexOK reports whether each band's index, once made, names every
// record at its place.
func (s *Weighted) fairIndexOK() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.fair.bands {
		if err := f.indexOK(); err != nil {
			return err
		}
	}
	return nil
}

func (f *fairBand) indexOK() error {
	if !f.indexed {
		if len(f.recs) > fairScan {
			return fmt.Errorf("%d records and no index", len(f.recs))
		}
		return nil
	}
	if len(f.index) != len(f.recs) {
		return fmt.Errorf("%d index entries for %d records", len(f.index), len(f.recs))
	}
	for i, r := range f.recs {
		if j, ok := f.index[r.group]; !ok || int(j) != i {
			return fmt.Errorf("record %d (%q) indexed at %d, %v", i, r.group, j, ok)
		}
	}
	return nil
}

// With more groups waiting than fairKey compares by name, the records are
// found through the index, which must stay right while the sweep drops
// records from the middle: 16 groups, two waiters joining and two served
// per round.
func TestFairShareIndexWithManyGroups(t *testing.T) {
	s := New(1, WithFairShare(nil))
	ctx := context.Background()
	hold, _ := s.TryAcquire(1)
	type result struct {
		id  int
		p   Permit
		err error
	}
	done := make(chan result, 64)
	next := 0
	var groupOf []string
	queue := func(g string) {
		t.Helper()
		id, want := next, s.Stats().Waiters+1
		next++
		groupOf = append(groupOf, g)
		go func() {
			p, err := s.Acquire(ctx, 1, Group(g))
			done <- result{id, p, err}
		}()
		testkit.Eventually(t, "a waiter of "+g+" to queue", func() bool { return s.Stats().Waiters == want })
	}
	var order []int
	serve := func() {
		t.Helper()
		hold.Release()
		r := testkit.Recv(t, done, "a grant")
		if r.err != nil {
			t.Fatal(r.err)
		}
		order = append(order, r.id)
		hold = r.p
	}
	for g := range 16 {
		queue(fmt.Sprintf("g%d", g))
	}
	for i := range 300 {
		queue(fmt.Sprintf("g%d", i%16))
		queue(fmt.Sprintf("g%d", (i*7+3)%16))
		serve()
		serve()
		if err := s.fairIndexOK(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	for s.Stats().Waiters > 0 {
		serve()
	}
	hold.Release()
	// Every waiter served once, each group's in arrival order (the
	// order itself is the model's business: TestFairShareMatchesModel).
	if len(order) != next {
		t.Fatalf("%d served of %d", len(order), next)
	}
	last := make(map[string]int)
	for _, id := range order {
		if j, ok := last[groupOf[id]]; ok && j > id {
			t.Fatalf("group %s: waiter %d served after %d", groupOf[id], j, id)
		}
		last[groupOf[id]] = id
	}
}

func (s *Weighted) fairBands() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fair.bands)
}

// A band has state only while it has waiters: a steady group keeps
// someone waiting at priority 0 through 300 rounds, while in each round a
// call at a priority never seen before waits once (and one more is
// cancelled while it waits). The bands with state stay at most three,
// and none is left once nobody waits.
func TestFairShareBandsStayBounded(t *testing.T) {
	s := New(1, WithFairShare(nil), WithPriorities(time.Hour))
	hold, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire(1) on a fresh semaphore failed")
	}
	type result struct {
		p   Permit
		err error
	}
	done := make(chan result, 8)
	queue := func(ctx context.Context, prio int, g string) {
		t.Helper()
		want := s.Stats().Waiters + 1
		go func() {
			p, err := s.Acquire(ctx, 1, Priority(prio), Group(g))
			done <- result{p, err}
		}()
		testkit.Eventually(t, "a waiter of "+g+" to queue", func() bool { return s.Stats().Waiters == want })
	}
	serve := func() {
		t.Helper()
		hold.Release()
		r := testkit.Recv(t, done, "a grant")
		if r.err != nil {
			t.Fatal(r.err)
		}
		hold = r.p
	}
	queue(context.Background(), 0, "steady")
	most := 0
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		queue(ctx, -1-i, "gone") // a priority never seen before, left unserved
		queue(context.Background(), 1+i, fmt.Sprintf("once-%d", i))
		queue(context.Background(), 0, "steady")
		most = max(most, s.fairBands())
		cancel()
		if r := testkit.Recv(t, done, "the cancelled call"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the cancelled call: %v", r.err)
		}
		serve()
		serve()
	}
	if most > 3 {
		t.Fatalf("up to %d bands with state for 3 priorities waiting at a time", most)
	}
	for s.Stats().Waiters > 0 {
		serve()
	}
	hold.Release()
	if n := s.fairBands(); n != 0 {
		t.Fatalf("%d bands with state once nobody waits, want 0", n)
	}
}
