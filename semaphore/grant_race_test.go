package semaphore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// grantRace runs one round of a grant racing a waiter's departure. A holder
// has the only permit; waiter A waits for it, waiter B waits behind A. The
// holder's release and leave (which ends A's wait: a cancel, a max wait
// running out) happen concurrently (mode 0); or the release comes first and
// A has returned with the permit before leave (mode 1: A keeps it, and its
// later leave changes nothing); or leave comes strictly first (mode 2: A
// must fail, even when the release granted it before it ran). Whichever
// wins, the permit has exactly one owner: A if its Acquire returned nil,
// else the semaphore, which must pass it on to B. Never both, never
// neither.
//
// It returns what happened to A: "kept" (A owns the permit) or "left" (A
// failed: it left before the grant, or was granted, saw its wait end, and
// the semaphore took the permit back; Stats are the same either way, as if
// A had left first).
func grantRace(t *testing.T, mode int, s *semaphore.Weighted, h semaphore.Permit, a, b <-chan result, leave func(), leaveErr error) string {
	t.Helper()
	switch mode {
	case 0:
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; h.Release() }()
		go func() { defer wg.Done(); <-start; leave() }()
		close(start)
		testkit.WaitAll(t, &wg, "the release and the leave")
	case 1:
		h.Release()
		ra := recv(t, a)
		leave()
		a = replay(ra)
	case 2:
		leave()
		h.Release()
	}

	ra := recv(t, a)
	if mode == 2 && ra.err == nil {
		ra.p.Release()
		t.Fatalf("A's wait ended before the release, yet A kept the permit")
	}
	if ra.err == nil {
		st := s.Stats()
		require.Equal(t, int64(1), st.Held, "A owns the permit: %+v", st)
		require.Equal(t, 1, st.Waiters, "B must still wait: %+v", st)
		stillWaiting(t, b)
		require.True(t, ra.p.Release(), "A's permit is released once, by A")
	} else {
		require.ErrorIs(t, ra.err, leaveErr)
		require.False(t, ra.p.Weight() != 0)
	}
	rb := recv(t, b)
	require.NoError(t, rb.err, "the permit must reach B")
	require.Equal(t, int64(1), s.Stats().Held)
	require.True(t, rb.p.Release())
	require.False(t, rb.p.Release())

	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.DoubleReleases)
	switch {
	case ra.err == nil:
		require.Zero(t, st.Cancelled+st.TimedOut)
		require.Equal(t, uint64(3), st.Acquired)
		require.Equal(t, uint64(2), st.Waited)
		return "kept"
	default:
		// A grant taken back counts as if A had left first.
		require.Equal(t, uint64(2), st.Acquired)
		require.Equal(t, uint64(1), st.Cancelled+st.TimedOut)
		require.Equal(t, uint64(1), st.Waited)
		return "left"
	}
}

// requireRaceExercised checks that the rounds hit both outcomes. Mode 2
// always makes A leave (often after the release granted it before it ran:
// the semaphore then takes the grant back), mode 1 always makes it keep
// the permit, so missing either means the test no longer tests both paths
// (mode 0, the race itself, may go either way).
func requireRaceExercised(t *testing.T, seen map[string]int) {
	t.Helper()
	require.Positive(t, seen["left"], "no round had A leave: %v", seen)
	require.Positive(t, seen["kept"], "no round had A keep the permit: %v", seen)
}

// replay returns a channel that yields r, for a result already received.
func replay(r result) <-chan result {
	c := make(chan result, 1)
	c <- r
	return c
}

func TestGrantCancelRaceHasExactlyOneOwner(t *testing.T) {
	const rounds = 2000
	seen := map[string]int{}
	for i := range rounds {
		s := semaphore.New(1)
		h := take(t, s, 1)
		ctx, cancel := context.WithCancel(context.Background())
		a := enqueue(t, ctx, s, 1)
		b := enqueue(t, context.Background(), s, 1)
		seen[grantRace(t, i%3, s, h, a, b, cancel, context.Canceled)]++
	}
	t.Logf("outcomes for A: %v", seen)
	requireRaceExercised(t, seen)
}

func TestGrantMaxWaitRaceHasExactlyOneOwner(t *testing.T) {
	const rounds = 1000
	seen := map[string]int{}
	for i := range rounds {
		clk := clock.NewFake(time.Unix(0, 0))
		s := semaphore.New(1, semaphore.WithMaxWait(time.Second), semaphore.WithClock(clk))
		h := take(t, s, 1)
		a := enqueue(t, context.Background(), s, 1)
		clk.BlockUntilPending(1)
		clk.Advance(time.Second / 2)
		b := enqueue(t, context.Background(), s, 1) // times out half a second after A
		clk.BlockUntilPending(2)
		seen[grantRace(t, i%3, s, h, a, b, func() { clk.Advance(time.Second / 2) }, semaphore.ErrWaitTooLong)]++
		require.Zero(t, clk.Pending(), "every timer is stopped")
	}
	t.Logf("outcomes for A: %v", seen)
	requireRaceExercised(t, seen)
}
