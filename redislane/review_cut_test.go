package redislane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/redislane"
)

// Review of 9e70d77: the leader's controller cuts while Redis is down;
// Redis comes back empty (a restart), the same instance leads again in a
// new term, and its proposal of 9, made in the term that ended, is
// dropped (as documented). The fleet's limit stays 10 and the provider
// keeps refusing: the controller must cut again. On 9e70d77 its
// cutPending (9) waits for a capacity that never comes, and every refusal
// is dropped until a round trip of successes.
func TestReviewFleetCutDroppedWithItsTermStillHearsRefusals(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	// a lease of 3 s: a still counts itself the leader while Redis restarts
	a := newFleet(t, newClient(t, srv.Addr), name, 10, redislane.WithLimitRefresh(time.Second))
	ca, err := adaptive.New(a, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "a to lead", a.Leader)
	t0 := a.Term()

	srv.Kill()
	require.True(t, a.Leader(), "a's lease ran out before the cut: the test needs it to lead")
	roundTrip(clk, ca, adaptive.Overload) // 10 -> 9, proposed; Redis is down
	require.Equal(t, uint64(1), ca.Stats().OverloadDecreases)
	require.NoError(t, srv.Restart())
	waitFor(t, 10*time.Second, "a to lead in a new term", func() bool { return a.Leader() && a.Term() > t0 })
	pickedUp(t, a, 10, "a, in the new term")

	for range 5 {
		roundTrip(clk, ca, adaptive.Overload) // granted at the fleet's 10, refused
	}
	require.Greater(t, ca.Stats().OverloadDecreases, uint64(1),
		"5 round trips of refusals at the fleet's limit of %d cut nothing (controller's limit %d)", a.Capacity(), ca.Limit())
}
