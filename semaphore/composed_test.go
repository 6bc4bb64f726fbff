package semaphore_test

import (
	"context"
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
// instant (no aging). The groups' charges are shared by the bands: big's
// three waits in band 0 put its band-1 call behind small's.
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
	require.Equal(t, []string{"smallHigh", "bigHigh", "big0", "small0", "big1", "big2"}, l.served())
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
