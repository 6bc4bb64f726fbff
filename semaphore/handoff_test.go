package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

// A release into a queue hands its token to the head under the lock
// (issue 27; New does it at capacity 1); these pin what that hand-off must
// keep, at any capacity (NewHandOff), and the plain release (NewNoHandOff)
// alike.
var releaseModes = []struct {
	name string
	make func(int64, ...semaphore.Option) *semaphore.Weighted
}{{"handoff", semaphore.NewHandOff}, {"plain", semaphore.NewNoHandOff}}

// The head that takes the released permits may have stood in the way of
// waiters behind it that fit in what was free besides: a hand-off serves
// them too, as the grant loop would.
func TestHandOffServesTheWaitersBehindThatFit(t *testing.T) {
	for _, m := range releaseModes {
		t.Run(m.name, func(t *testing.T) {
			s := m.make(3)
			p := take(t, s, 2)
			a := enqueue(t, context.Background(), s, 2) // 1 free: too few
			b := enqueue(t, context.Background(), s, 1) // behind a
			require.True(t, p.Release())
			ra, rb := recv(t, a), recv(t, b)
			require.NoError(t, ra.err)
			require.NoError(t, rb.err)
			st := s.Stats()
			require.Equal(t, int64(0), st.Available, "%+v", st)
			require.Equal(t, uint64(2), st.Waited, "%+v", st)
			require.True(t, ra.p.Release())
			require.True(t, rb.p.Release())
			requireBalanced(t, s)
		})
	}
}

// A head that asks for fewer permits than the release gives back takes
// its own; the rest go back to the word, for the waiters behind or later
// callers.
func TestHandOffGivesBackWhatTheHeadDoesNotTake(t *testing.T) {
	for _, m := range releaseModes {
		t.Run(m.name, func(t *testing.T) {
			s := m.make(4)
			p := take(t, s, 3)
			q := take(t, s, 1)
			a := enqueue(t, context.Background(), s, 1)
			b := enqueue(t, context.Background(), s, 1)
			c := enqueue(t, context.Background(), s, 2)
			require.True(t, p.Release())
			ra, rb := recv(t, a), recv(t, b)
			require.NoError(t, ra.err)
			require.NoError(t, rb.err)
			stillWaiting(t, c) // 1 free, c asks for 2
			st := s.Stats()
			require.Equal(t, int64(1), st.Available, "%+v", st)
			require.Equal(t, 1, st.Waiters, "%+v", st)
			require.True(t, q.Release())
			rc := recv(t, c)
			require.NoError(t, rc.err)
			for _, r := range []result{ra, rb, rc} {
				require.True(t, r.p.Release())
			}
			requireBalanced(t, s)
		})
	}
}

// A hand-off is a release and a grant: the old permit is released once
// (its copies release nothing, also after the token serves the head), and
// the new one is counted as acquired and waited.
func TestHandOffIsAReleaseAndAGrant(t *testing.T) {
	for _, m := range releaseModes {
		t.Run(m.name, func(t *testing.T) {
			s := m.make(1)
			p := take(t, s, 1)
			w := enqueue(t, context.Background(), s, 1)
			require.True(t, p.Release())
			r := recv(t, w)
			require.NoError(t, r.err)
			require.False(t, p.Release(), "a second Release of the handed-off permit")
			st := s.Stats()
			require.Equal(t, uint64(2), st.Acquired, "%+v", st)
			require.Equal(t, uint64(1), st.Released, "%+v", st)
			require.Equal(t, uint64(1), st.Waited, "%+v", st)
			require.Equal(t, uint64(1), st.DoubleReleases, "%+v", st)
			require.Equal(t, int64(1), st.Held, "%+v", st)
			require.True(t, r.p.Release())
			requireBalanced(t, s)
		})
	}
}

// The hand-off follows the capacity (New and SetCapacity): at capacity 1
// only, so that a lane that starts at 1 and grows (an adaptive one) stops
// handing off, where it would make the line a convoy, and starts again
// when it shrinks back to 1.
func TestHandOffFollowsTheCapacity(t *testing.T) {
	s := semaphore.New(1)
	require.True(t, semaphore.HandsOff(s), "capacity 1")
	s.SetCapacity(8)
	require.False(t, semaphore.HandsOff(s), "grown to 8")
	s.SetCapacity(1)
	require.True(t, semaphore.HandsOff(s), "back to 1")
	s.SetCapacity(0)
	require.False(t, semaphore.HandsOff(s), "capacity 0")
	require.False(t, semaphore.HandsOff(semaphore.New(8)), "made with 8")
	require.True(t, semaphore.HandsOff(semaphore.NewHandOff(8)), "forced on")
	f := semaphore.NewNoHandOff(1)
	f.SetCapacity(2)
	f.SetCapacity(1)
	require.False(t, semaphore.HandsOff(f), "forced off stays off")
	// A barging lane's release grants nothing: it never hands its token on.
	b := semaphore.New(1, semaphore.WithBarging(time.Second))
	require.False(t, semaphore.HandsOff(b), "barging at capacity 1")
	b.SetCapacity(2)
	b.SetCapacity(1)
	require.False(t, semaphore.HandsOff(b), "barging, back to 1")
}
