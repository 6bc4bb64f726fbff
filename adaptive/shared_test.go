package adaptive_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// fleet is a budget shared by instances of which one leads: only the
// leader's SetCapacity calls take effect (a redislane.Fleet, without
// Redis and without its lag).
type fleet struct {
	mu     sync.Mutex
	limit  int64
	leader int
	term   int64 // raised by elect
	// lag makes the leader's SetCapacity a proposal (want) that apply
	// puts in force, as a store's write does after the call.
	lag  bool
	want int64
}

// apply puts the leader's last proposal in force (with lag).
func (f *fleet) apply() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit = f.want
}

// elect makes id the leader in a new term, as a fleet's election does.
func (f *fleet) elect(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader, f.term = id, f.term+1
}

// member is one instance's view of a fleet.
type member struct {
	f  *fleet
	id int
}

func (m member) Capacity() int64 { m.f.mu.Lock(); defer m.f.mu.Unlock(); return m.f.limit }
func (m member) Leader() bool    { m.f.mu.Lock(); defer m.f.mu.Unlock(); return m.f.leader == m.id }
func (m member) Term() int64     { m.f.mu.Lock(); defer m.f.mu.Unlock(); return m.f.term }
func (m member) SetCapacity(n int64) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	switch {
	case m.f.leader != m.id:
	case m.f.lag:
		m.f.want = n
	default:
		m.f.limit = n
	}
}

var _ adaptive.Shared = member{}

// roundOf reports one round trip of c at its limit, each held rtt, those
// beyond truth refused.
func roundOf(clk *clock.Fake, c *adaptive.Controller, truth int64, rtt time.Duration) {
	n := c.Limit()
	clk.Advance(rtt)
	for i := range n {
		o := adaptive.Success
		if i >= truth {
			o = adaptive.Overload
		}
		c.Report(o, rtt)
	}
}

// A follower's controller takes the fleet's limit at each decision and
// moves nothing; once elected it continues from the fleet's limit, not
// from its start value.
func TestSharedTargetOnlyTheLeaderMoves(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := &fleet{limit: 10, leader: 0}
	lead, err := adaptive.New(member{f, 0}, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	follow, err := adaptive.New(member{f, 1}, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)

	roundOf(clk, lead, 5, time.Second) // 10 -> 9
	roundOf(clk, lead, 5, time.Second) // 9 -> 8
	require.Equal(t, int64(8), f.limit)
	roundOf(clk, follow, 100, time.Second) // a follower's round trip: takes 8, moves nothing
	require.Equal(t, int64(8), follow.Limit())
	require.Equal(t, int64(8), f.limit)
	st := follow.Stats()
	require.Equal(t, uint64(1), st.Windows)
	require.Zero(t, st.Increases, "a follower counted a move that was dropped")

	roundOf(clk, lead, 5, time.Second) // 8 -> 7, the follower has not seen it
	f.elect(1)                         // the leader goes; the follower is elected
	roundOf(clk, follow, 100, time.Second)
	require.Equal(t, int64(8), f.limit, "the new leader moved from a stale limit: 7 + 1 expected")
	require.Equal(t, int64(8), follow.Limit())
	require.Equal(t, uint64(1), follow.Stats().Increases)
}

// A target whose capacity another changed: the controller moves from it.
func TestControllerMovesFromACapacitySetBehindItsBack(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	s.SetCapacity(30)                 // an operator
	roundOf(clk, c, 100, time.Second) // 10 reports: the lane looks a third used at 30
	require.Equal(t, int64(30), s.Capacity(), "the controller set its own limit back")
	roundOf(clk, c, 100, time.Second)
	require.Equal(t, int64(31), s.Capacity())
	require.Equal(t, int64(31), c.Limit())
}

// A capacity set out of [floor, ceiling] behind the controller's back is
// set back to the nearer bound at its next decision, not left in force.
func TestControllerBringsAForeignCapacityIntoRange(t *testing.T) {
	clk := clock.NewFake(epoch)
	s := semaphore.New(10)
	c, err := adaptive.New(s, 2, 20, adaptive.WithClock(clk))
	require.NoError(t, err)
	s.SetCapacity(0) // an operator
	for range 10 {   // the outcomes of the work admitted before
		c.Report(adaptive.Overload, time.Millisecond)
	}
	require.Equal(t, int64(2), s.Capacity(), "a capacity below the floor stayed in force")
	require.Equal(t, int64(2), c.Limit())
	s.SetCapacity(50)
	clk.Advance(time.Second)
	for range 2 {
		c.Report(adaptive.Success, time.Second)
	}
	require.Equal(t, int64(20), s.Capacity(), "a capacity above the ceiling stayed in force")
}

// TestReElectedLeaderContinuesFromTheFleetsLimit: instance 0 leads, loses
// the leadership (1 leads and cuts the fleet's limit on overloads), and is
// elected again, all between two decisions of its controller. It sees
// Leader true at both, so only the new term tells it to take the fleet's
// limit before it moves, rather than undo the other leader's cuts from its
// own stale limit.
func TestReElectedLeaderContinuesFromTheFleetsLimit(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := &fleet{limit: 20}
	a, err := adaptive.New(member{f, 0}, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	b, err := adaptive.New(member{f, 1}, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	roundOf(clk, a, 100, time.Second) // a leads: 20 -> 21
	require.Equal(t, int64(21), f.limit)

	f.elect(1) // a failover: b is elected
	for range 12 {
		roundOf(clk, b, 3, time.Second) // the provider refuses above 3: b cuts
	}
	cut := f.limit
	require.Less(t, cut, int64(10))

	f.elect(0) // a is elected again before its next decision
	n := a.Limit()
	clk.Advance(time.Second)
	for range n {
		a.Report(adaptive.Success, time.Second)
	}
	require.LessOrEqual(t, f.limit, cut+1, "the re-elected leader moved from its stale limit %d, not the fleet's %d", n, cut)
}

// usingMember is a member of a fleet that reports the fleet's use: peak
// is what FleetInUse returns (and keeps: a test sets it).
type usingMember struct {
	member
	peak *int64
}

func (m usingMember) FleetInUse() int64 { return *m.peak }

var _ adaptive.UseSharer = usingMember{}

// A leader over a target that reports the fleet's use grows the limit
// only after a round trip whose peak use was at least half the limit; an
// unknown use (-1) counts as used, as without the report.
func TestSharedTargetGrowsOnlyWhenTheFleetUsesIt(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := &fleet{limit: 10, leader: 0}
	peak := int64(4)
	lead, err := adaptive.New(usingMember{member{f, 0}, &peak}, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	roundOf(clk, lead, 100, time.Second)
	require.Equal(t, int64(10), f.limit, "grown with 4 of 10 in use")
	peak = 5
	roundOf(clk, lead, 100, time.Second)
	require.Equal(t, int64(11), f.limit, "not grown with 5 of 10 in use")
	peak = -1
	roundOf(clk, lead, 100, time.Second)
	require.Equal(t, int64(12), f.limit, "not grown with the use unknown")
}

// A cut on a Shared target counts from when the target shows it, not from
// the decision: the store writes it later, and until then the work it
// admits is still admitted above the cut, whose refusals the cut answers.
// Counted from the decision, the refusal of work admitted between the two
// cut the limit a second time for one overshoot (a fleet's limit sat a
// step below the provider's).
func TestSharedCutCountsFromWhenInForce(t *testing.T) {
	clk, f, c := laggingCut(t, member{id: 0})
	m := member{f, 0}
	require.Equal(t, int64(9), c.Limit())
	require.Equal(t, int64(10), m.Capacity(), "the store has not written it yet")

	clk.Advance(time.Second)
	c.Report(adaptive.Overload, time.Millisecond) // admitted after the decision, at 10
	require.Equal(t, uint64(1), c.Stats().OverloadDecreases, "a refusal of work admitted before the cut was in force cut again")

	f.apply() // 9 in force
	clk.Advance(time.Second)
	c.Report(adaptive.Overload, 1500*time.Millisecond) // admitted before that
	require.Equal(t, uint64(1), c.Stats().OverloadDecreases, "a refusal of work admitted before the cut showed cut again")

	clk.Advance(time.Second)
	c.Report(adaptive.Overload, time.Millisecond) // admitted at 9: a refusal of the cut limit
	require.Equal(t, uint64(2), c.Stats().OverloadDecreases)
	require.Equal(t, int64(8), c.Limit())
}

// laggingCut returns a controller, on the fake clock clk, over the
// instance as (its fleet set to f: a fleet of 10 whose writes lag, led by
// instance 0), after a first round trip that cut 10 to 9: proposed, not
// yet in force (f.apply puts it in force).
func laggingCut(t *testing.T, as adaptive.Target) (*clock.Fake, *fleet, *adaptive.Controller) {
	t.Helper()
	clk := clock.NewFake(epoch)
	f := &fleet{limit: 10, lag: true}
	switch m := as.(type) {
	case member:
		m.f = f
		as = m
	case sharingMember:
		m.f = f
		as = m
	}
	c, err := adaptive.New(as, 1, 100, adaptive.WithClock(clk))
	require.NoError(t, err)
	f.apply()
	roundOf(clk, c, 9, time.Second) // 10 -> 9, proposed
	require.Equal(t, uint64(1), c.Stats().OverloadDecreases)
	return clk, f, c
}
