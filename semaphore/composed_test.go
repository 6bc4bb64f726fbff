package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// Priorities and fair share on one semaphore: the higher band first, and
// within each band the groups' turns, so that a small group that came last
// goes before a big group's backlog in its own band. All come at one
// instant (no aging). Each band charges its own waits: big's three in band
// 0 do not put its band-1 call behind small's, which came later.
func TestComposedOrderServesBandThenGroup(t *testing.T) {
	l := newLine(t, semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil))
	at := func(p int, g string) []semaphore.AcquireOption {
		return []semaphore.AcquireOption{semaphore.Priority(p), semaphore.Group(g)}
	}
	l.join("big0", at(0, "big"), false)
	l.join("big1", at(0, "big"), false)
	l.join("big2", at(0, "big"), false)
	l.join("small0", at(0, "small"), false)
	l.join("bigHigh", at(1, "big"), false)
	l.join("smallHigh", at(1, "small"), false)
	require.Equal(t, []string{"bigHigh", "smallHigh", "big0", "small0", "big1", "big2"}, l.served())
}

// A tenant's backlog at a low priority does not put its own calls at a
// high one behind the other tenants' (fair share is within a priority):
// ten cron jobs of small wait at priority 0, then ten user calls of big
// and one of small at priority 1. small's user call is the second served.
// Before, the bands shared the groups' charges, and it came eleventh,
// after every one of big's (a new user's trial of lanequeue found it).
func TestComposedLowBandBacklogDoesNotChargeAHighBand(t *testing.T) {
	l := newLine(t, semaphore.WithPriorities(time.Hour), semaphore.WithFairShare(nil))
	at := func(p int, g string) []semaphore.AcquireOption {
		return []semaphore.AcquireOption{semaphore.Priority(p), semaphore.Group(g)}
	}
	for i := range 10 {
		l.join(fmt.Sprintf("small-cron%d", i), at(0, "small"), false)
	}
	for i := range 10 {
		l.join(fmt.Sprintf("big-user%d", i), at(1, "big"), false)
	}
	l.join("small-user", at(1, "small"), false)
	got := l.served()
	want := []string{"big-user0", "small-user"}
	for i := range 9 {
		want = append(want, fmt.Sprintf("big-user%d", i+1))
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("small-cron%d", i))
	}
	require.Equal(t, want, got)
}

// A head that does not fit holds back every band and group behind it,
// those that would fit included, and no grant is made meanwhile: so it
// holds them back only until the holders of that moment give back what it
// lacks. Here the head (band 1, three permits) waits for two holders; a
// release that frees one permit serves nobody, though a band-1 and a
// band-0 waiter of one permit each wait behind it; the release that makes
// three serves the head alone, and its release serves the other two.
func TestComposedHeavyHeadHoldsBackEveryBandBriefly(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(3, semaphore.WithClock(clk), semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil))
	a, b := take(t, s, 1), take(t, s, 2)
	type got struct {
		name string
		p    semaphore.Permit
		err  error
	}
	done := make(chan got, 3)
	queue := func(name string, n int64, p int, g string) {
		t.Helper()
		want := s.Stats().Waiters + 1
		go func() {
			pm, err := s.Acquire(context.Background(), n, semaphore.Priority(p), semaphore.Group(g))
			done <- got{name, pm, err}
		}()
		waitFor(t, name+" to queue", func() bool { return s.Stats().Waiters == want })
	}
	queue("head", 3, 1, "big")
	queue("low", 1, 0, "small")
	queue("high", 1, 1, "small") // ties with the head's start: behind it
	a.Release()
	st := s.Stats()
	require.Equal(t, 3, st.Waiters, "a release that frees 1 of the head's 3 serves nobody behind it")
	require.Equal(t, int64(1), st.Available)
	b.Release()
	head := testkit.Recv(t, done, "the head, once the holders of its time gave back")
	require.Equal(t, "head", head.name)
	require.NoError(t, head.err)
	require.Equal(t, 2, s.Stats().Waiters, "the head took all three permits")
	head.p.Release()
	first, second := testkit.Recv(t, done, "the next"), testkit.Recv(t, done, "the last")
	require.NoError(t, first.err)
	require.NoError(t, second.err)
	names := map[string]bool{first.name: true, second.name: true}
	require.Equal(t, map[string]bool{"high": true, "low": true}, names)
	first.p.Release()
	second.p.Release()
	requireBalanced(t, s)
}

// Each band keeps its own virtual time: service in another band does not
// move it. Four calls of x at priority 1 are served while a's three wait
// at priority 0; then, while a0 holds the permit, b joins priority 0. Its
// turn counts from priority 0's last grant (a0's), so b goes next, ahead
// of a's backlog. With one virtual time for all the priorities (the first
// version of the per-priority charge), x's grants had moved it past a's
// keys, and b waited behind all of a's.
func TestComposedBandKeepsItsOwnVirtualTime(t *testing.T) {
	s := semaphore.New(1, semaphore.WithPriorities(time.Hour), semaphore.WithFairShare(nil))
	type got struct {
		name string
		p    semaphore.Permit
		err  error
	}
	granted := make(chan got, 16)
	queue := func(name string, prio int, group string) {
		t.Helper()
		want := s.Stats().Waiters + 1
		go func() {
			p, err := s.Acquire(context.Background(), 1, semaphore.Priority(prio), semaphore.Group(group))
			granted <- got{name, p, err}
		}()
		waitFor(t, name+" to queue", func() bool { return s.Stats().Waiters == want })
	}
	var order []string
	next := func(release semaphore.Permit) semaphore.Permit {
		t.Helper()
		release.Release()
		g := testkit.Recv(t, granted, "the next grant")
		require.NoError(t, g.err, g.name)
		order = append(order, g.name)
		return g.p
	}
	hold := take(t, s, 1)
	for i := range 3 {
		queue(fmt.Sprintf("a%d", i), 0, "a")
	}
	for i := range 4 {
		queue(fmt.Sprintf("x%d", i), 1, "x")
	}
	for range 5 { // x0..x3, then a0
		hold = next(hold)
	}
	queue("b", 0, "b")
	for range 3 {
		hold = next(hold)
	}
	hold.Release()
	require.Equal(t, []string{"x0", "x1", "x2", "x3", "a0", "b", "a1", "a2"}, order)
	requireBalanced(t, s)
}
