package adaptive_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
)

// sharingMember is a member of a fleet whose instances share overloads:
// shared counts its ShareOverload calls; the fleet's count stays at 0.
type sharingMember struct {
	member
	shared *int
}

func (m sharingMember) ShareOverload()        { *m.shared++ }
func (m sharingMember) FleetOverloads() int64 { return 0 }

var _ adaptive.OverloadSharer = sharingMember{}

// Review: the store fails over before it writes the leader's cut (the
// write is dropped with the term, as redislane's Fleet drops a proposal of
// a term that is over) and the same instance is elected again. The
// fleet's limit stays 10, the provider refuses everything, and the
// controller must go on cutting. On 9e70d77 cutPending (9) waits for a
// capacity that never comes: every refusal is dropped, none decides.
func TestReviewCutDroppedWithItsTermStillHearsRefusals(t *testing.T) {
	clk, f, c := laggingCut(t, member{id: 0}) // 10 -> 9, proposed, never written
	m := member{f, 0}
	f.elect(0) // a failover: a new term, the same leader; the proposal is gone
	for range 50 {
		clk.Advance(time.Second)
		c.Report(adaptive.Overload, time.Millisecond) // granted at 10, after the cut was decided
	}
	require.Greater(t, c.Stats().OverloadDecreases, uint64(1),
		"50 refusals of work granted at the fleet's 10 cut nothing: limit %d, fleet %d", c.Limit(), m.Capacity())
}

// Review: the leader loses the leadership before its cut is written; the
// new leader keeps the fleet's 10. The old leader, now a follower, must
// pass its refusals on (ShareOverload) for the new leader to hear. On
// 9e70d77 its cutPending (9) never clears: none is counted or shared.
func TestReviewExLeaderSharesItsRefusals(t *testing.T) {
	shared := 0
	clk, f, c := laggingCut(t, sharingMember{member{id: 0}, &shared}) // 10 -> 9, proposed, never written
	require.Equal(t, int64(9), c.Limit())
	shared = 0
	f.elect(1) // another instance leads, from the fleet's 10
	for range 50 {
		clk.Advance(time.Second)
		c.Report(adaptive.Overload, time.Millisecond)
	}
	require.NotZero(t, shared, "50 refusals at the fleet's limit of 10 were neither counted nor shared")
}

// Review: the cut comes in force at T (apply); the first report after
// it is at T+1s, the refusal of work granted at T+0.5s, at the cut limit.
// It is a refusal of the cut limit and should cut again. On 9e70d77 that
// report moves lastCut to T+1s and the refusal is dropped.
func TestReviewRefusalAtTheCutLimitBeforeTheNextReportCounts(t *testing.T) {
	clk, f, c := laggingCut(t, member{id: 0})
	clk.Advance(time.Second)
	f.apply() // 9 in force from here (T)
	clk.Advance(time.Second)
	c.Report(adaptive.Overload, 500*time.Millisecond) // granted at T+0.5s, at 9
	require.Equal(t, uint64(2), c.Stats().OverloadDecreases, "a refusal of work granted at the cut limit was dropped")
}
