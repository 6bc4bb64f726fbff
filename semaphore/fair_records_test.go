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

// fairLine holds the only permit of a semaphore of capacity 1 and queues
// calls behind it, a goroutine each, served one release at a time.
type fairLine struct {
	t    *testing.T
	s    *Weighted
	hold Permit
	done chan fairResult
	next int // the id of the next call queued
}

type fairResult struct {
	id  int
	p   Permit
	err error
}

func newFairLine(t *testing.T, s *Weighted) *fairLine {
	t.Helper()
	hold, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire(1) on a fresh semaphore failed")
	}
	return &fairLine{t: t, s: s, hold: hold, done: make(chan fairResult, 64)}
}

// queue starts a call of one permit with opts and returns its id once it
// waits.
func (l *fairLine) queue(ctx context.Context, what string, opts ...AcquireOption) int {
	l.t.Helper()
	id, want := l.next, l.s.Stats().Waiters+1
	l.next++
	go func() {
		p, err := l.s.Acquire(ctx, 1, opts...)
		l.done <- fairResult{id, p, err}
	}()
	testkit.Eventually(l.t, what+" to queue", func() bool { return l.s.Stats().Waiters == want })
	return id
}

// serve releases the permit held, and holds the next grant's; it returns
// the id of the call granted.
func (l *fairLine) serve() int {
	l.t.Helper()
	l.hold.Release()
	r := testkit.Recv(l.t, l.done, "a grant")
	if r.err != nil {
		l.t.Fatal(r.err)
	}
	l.hold = r.p
	return r.id
}

// drain serves every call still waiting, then releases the permit.
func (l *fairLine) drain() {
	l.t.Helper()
	for l.s.Stats().Waiters > 0 {
		l.serve()
	}
	l.hold.Release()
}

// The per-group records of WithFairShare stay few while the semaphore is
// busy for good: a steady group keeps someone waiting through 1000
// rounds, and in each round a group never seen before waits once. Each
// newcomer's record stops mattering as soon as the turn passes its
// request, and the sweep drops it within a few waits; and once nobody
// waits, the next wait starts with one record, its own.
func TestFairShareRecordsStayBounded(t *testing.T) {
	s := New(1, WithFairShare(nil))
	l := newFairLine(t, s)
	bg := context.Background()
	l.queue(bg, "steady", Group("steady"))
	most := 0
	for i := range 1000 {
		g := fmt.Sprintf("once-%d", i)
		l.queue(bg, g, Group(g))
		l.queue(bg, "steady", Group("steady"))
		l.serve()
		l.serve()
		most = max(most, s.fairRecords())
	}
	if most > 8 {
		t.Fatalf("up to %d records for 2 or 3 groups waiting at a time", most)
	}
	for s.Stats().Waiters > 0 {
		l.serve()
	}
	l.queue(bg, "after", Group("after"))
	if n := s.fairRecords(); n != 1 {
		t.Fatalf("%d records after a wait into an empty queue, want 1", n)
	}
	l.drain()
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
	l := newFairLine(t, s)
	bg := context.Background()
	var groupOf []string
	queue := func(g string) {
		t.Helper()
		l.queue(bg, g, Group(g))
		groupOf = append(groupOf, g)
	}
	var order []int
	serve := func() { order = append(order, l.serve()) }
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
	l.hold.Release()
	// Every waiter served once, each group's in arrival order (the
	// order itself is the model's business: TestFairShareMatchesModel).
	next := l.next
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
	l := newFairLine(t, s)
	bg := context.Background()
	l.queue(bg, "steady", Priority(0), Group("steady"))
	most := 0
	for i := range 300 {
		ctx, cancel := context.WithCancel(bg)
		l.queue(ctx, "gone", Priority(-1-i), Group("gone")) // a priority never seen before, left unserved
		g := fmt.Sprintf("once-%d", i)
		l.queue(bg, g, Priority(1+i), Group(g))
		l.queue(bg, "steady", Priority(0), Group("steady"))
		most = max(most, s.fairBands())
		cancel()
		if r := testkit.Recv(t, l.done, "the cancelled call"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the cancelled call: %v", r.err)
		}
		l.serve()
		l.serve()
	}
	if most > 3 {
		t.Fatalf("up to %d bands with state for 3 priorities waiting at a time", most)
	}
	l.drain()
	if n := s.fairBands(); n != 0 {
		t.Fatalf("%d bands with state once nobody waits, want 0", n)
	}
}
