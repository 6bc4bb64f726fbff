package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

const bargeBound = time.Second

// newBarging returns a semaphore made WithBarging(bargeBound) on a fake
// clock, and the clock.
func newBarging(t *testing.T, capacity int64, opts ...semaphore.Option) (*semaphore.Weighted, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	opts = append([]semaphore.Option{semaphore.WithBarging(bargeBound), semaphore.WithClock(clk)}, opts...)
	return semaphore.New(capacity, opts...), clk
}

// enqueueTimed is enqueue for a barging semaphore on a fake clock: it
// returns once the call waits and its bound's timer is armed.
func enqueueTimed(t *testing.T, ctx context.Context, s *semaphore.Weighted, clk *clock.Fake, n int64) <-chan result {
	t.Helper()
	timers := clk.Pending()
	ch := enqueue(t, ctx, s, n)
	clk.BlockUntilPending(timers + 1)
	return ch
}

// A caller takes free permits ahead of a waiter that has not waited the
// bound: here a light one ahead of a heavy head, which FIFO would make
// wait behind it. (Against a semaphore without WithBarging the newcomer
// queues and the test fails.)
func TestBargingNewcomerOvertakesYoungWaiter(t *testing.T) {
	s, clk := newBarging(t, 3)
	h := take(t, s, 2)
	heavy := enqueueTimed(t, context.Background(), s, clk, 3)

	n1 := acquireAsync(context.Background(), s, 1)
	r := recv(t, n1)
	require.NoError(t, r.err, "a newcomer may take the free permit while the head is young")
	stillWaiting(t, heavy)
	_, ok := s.TryAcquire(1)
	require.False(t, ok, "no permit is free")
	r.p.Release()
	p, ok := s.TryAcquire(1)
	require.True(t, ok, "TryAcquire barges too while the head is young")
	p.Release()

	st := s.Stats()
	require.Equal(t, 1, st.Waiters, "%+v", st)
	require.Zero(t, st.Waited, "the newcomers did not wait: %+v", st)
	h.Release()
	rh := recv(t, heavy)
	require.NoError(t, rh.err)
	require.True(t, rh.p.Release())
	st = requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
	require.Zero(t, clk.Pending(), "every bound's timer is stopped")
}

// Once a waiter has waited the bound, nobody takes permits ahead of it: not
// TryAcquire, not a new Acquire, even when permits are free and the
// newcomer is lighter than it; it is served as soon as the holders of that
// moment release, before any later caller. When no waiter that old is
// left, newcomers barge again. (With the bound ignored, TryAcquire takes
// the free permit and the test fails.)
func TestBargingBoundServesTheOldWaiterFirst(t *testing.T) {
	s, clk := newBarging(t, 3)
	h := take(t, s, 2)
	heavy := enqueueTimed(t, context.Background(), s, clk, 3)

	clk.Advance(bargeBound - time.Nanosecond)
	p, ok := s.TryAcquire(1)
	require.True(t, ok, "the head has not waited the bound yet")
	p.Release()

	clk.Advance(time.Nanosecond)
	waitFor(t, "the head to set strict", func() bool { return semaphore.BargingStrict(s) })
	_, ok = s.TryAcquire(1)
	require.False(t, ok, "a waiter has waited the bound: TryAcquire must not overtake it")
	late := enqueueTimed(t, context.Background(), s, clk, 1)
	stillWaiting(t, heavy)

	h.Release() // the holders of that moment release: the old head first
	rh := recv(t, heavy)
	require.NoError(t, rh.err)
	stillWaiting(t, late)
	require.False(t, semaphore.BargingStrict(s), "the old waiter's wait has ended, the head is young")
	require.True(t, rh.p.Release())
	rl := recv(t, late)
	require.NoError(t, rl.err)

	// The late one is served; with nobody old left newcomers barge again.
	q := enqueueTimed(t, context.Background(), s, clk, 3)
	p, ok = s.TryAcquire(1)
	require.True(t, ok, "the head is young again: barging is back")
	p.Release()
	rl.p.Release()
	rq := recv(t, q)
	require.NoError(t, rq.err)
	rq.p.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(3), st.Waited, "%+v", st)
}

// The mutex case, capacity 1: the oldest waiter, once it has waited the
// bound, gets the permit at the next release, and a caller that comes
// right after that release finds nothing free. (Without the bound, the
// release only wakes the waiter to compete and the caller takes the
// permit first.)
func TestBargingBoundHandsOffAtCapacityOne(t *testing.T) {
	for round := range 200 {
		s, clk := newBarging(t, 1)
		h := take(t, s, 1)
		a := enqueueTimed(t, context.Background(), s, clk, 1)
		b := enqueueTimed(t, context.Background(), s, clk, 1)
		clk.Advance(bargeBound)
		waitFor(t, "the waiters to set strict", func() bool { return semaphore.BargingStrict(s) })
		h.Release()
		_, ok := s.TryAcquire(1)
		require.False(t, ok, "round %d: the release handed the permit to the oldest waiter", round)
		ra := recv(t, a)
		require.NoError(t, ra.err)
		stillWaiting(t, b)
		ra.p.Release()
		_, ok = s.TryAcquire(1)
		require.False(t, ok, "round %d: the next old waiter is served before any newcomer", round)
		rb := recv(t, b)
		require.NoError(t, rb.err)
		rb.p.Release()
		requireBalanced(t, s)
	}
}

// A woken waiter is not granted: the release leaves the permit free, and
// a caller that takes it first has it; the waiter keeps its place and
// competes again at the next release. The contract lets either the caller
// or the woken waiter win, so the test does not race them: the waiter's
// context is a testkit.Gate, which holds the woken waiter where it must
// look at its context, after the release that woke it and before it takes
// the permit (see the design in barging.go). While it is held the permit
// is free. (A release that hands the permit over, as FIFO's does, leaves
// the waiter granted: it never stops at the Gate, and the test fails.)
// Then one release without the Gate lets the two race, and exactly one of
// them has the permit. The counts are exact: every grant is counted once.
func TestBargingReleaseWakesWithoutGranting(t *testing.T) {
	const rounds = 3
	s, clk := newBarging(t, 1)
	gate := testkit.NewGate()
	h := take(t, s, 1)
	a := enqueueTimed(t, gate, s, clk, 1)
	for i := range rounds {
		gate.Shut()
		h.Release() // wakes the waiter, which the Gate holds
		gate.Held(t, fmt.Sprintf("round %d: the woken waiter to look at its context", i))
		p, ok := s.TryAcquire(1)
		gate.Open()
		require.True(t, ok, "round %d: the permit was not free after the release that woke the waiter", i)
		h = p
		// The woken waiter lost: it takes its place back at the head.
		waitFor(t, "the woken waiter to rejoin", func() bool {
			return s.Stats().Waiters == 1 && !semaphore.BargingWoken(s)
		})
		stillWaiting(t, a)
		require.Equal(t, int64(1), s.Stats().Held, "round %d", i)
	}

	// The race the contract allows: either may win, never both.
	h.Release()
	barged, ok := s.TryAcquire(1)
	if ok {
		waitFor(t, "the woken waiter to rejoin", func() bool {
			return s.Stats().Waiters == 1 && !semaphore.BargingWoken(s)
		})
		stillWaiting(t, a)
		require.Equal(t, int64(1), s.Stats().Held)
		barged.Release()
	}
	r := recv(t, a)
	require.NoError(t, r.err)
	require.Equal(t, int64(1), s.Stats().Held)
	r.p.Release()
	st := requireBalanced(t, s)
	want := uint64(1 + rounds + 1) // h, the barges, the waiter
	if ok {
		want++
	}
	require.Equal(t, want, st.Acquired, "%+v", st)
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
	require.Zero(t, st.Cancelled, "%+v", st)
}

func TestBargingConfig(t *testing.T) {
	require.NoError(t, semaphore.Validate(1, semaphore.WithBarging(0)), "0 means the default bound")
	require.NoError(t, semaphore.Validate(1, semaphore.WithBarging(time.Millisecond)))
	err := semaphore.Validate(1, semaphore.WithBarging(-time.Second))
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.Contains(t, err.Error(), "WithBarging(-1s)")
	require.NoError(t, semaphore.Validate(1, semaphore.WithBarging(time.Second), semaphore.WithBarging(time.Millisecond)), "the same option twice: the last wins")
}

// Close fails every waiter of a barging semaphore, also one that is woken
// and competing, and later calls fail; the permits held stay valid.
func TestBargingCloseFailsWaiters(t *testing.T) {
	s, clk := newBarging(t, 3)
	h := take(t, s, 2)
	a := enqueueTimed(t, context.Background(), s, clk, 2)
	b := enqueueTimed(t, context.Background(), s, clk, 3)
	s.Close()
	for _, w := range []<-chan result{a, b} {
		r := recv(t, w)
		require.ErrorIs(t, r.err, semaphore.ErrClosed)
		require.False(t, r.p.Weight() != 0)
	}
	_, err := s.Acquire(context.Background(), 1)
	require.ErrorIs(t, err, semaphore.ErrClosed)
	_, ok := s.TryAcquire(1)
	require.False(t, ok, "TryAcquire after Close, with a permit free")
	require.True(t, h.Release())
	st := requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Failed, "%+v", st)
	require.Equal(t, uint64(1), st.Rejected, "%+v", st)
	require.Zero(t, clk.Pending())
}

// A woken waiter racing Close: whichever comes first, the waiter gets a
// permit or ErrClosed, and the books balance.
func TestBargingCloseWhileWokenRace(t *testing.T) {
	for round := range 1000 {
		s := semaphore.New(1, semaphore.WithBarging(time.Hour))
		h := take(t, s, 1)
		a := enqueue(t, context.Background(), s, 1)
		h.Release()
		s.Close()
		r := recv(t, a)
		if r.err == nil {
			r.p.Release()
		} else {
			require.ErrorIs(t, r.err, semaphore.ErrClosed, "round %d", round)
		}
		st := s.Stats()
		require.Equal(t, st.Capacity, st.Available, "round %d: %+v", round, st)
		require.Zero(t, st.Waiters, "round %d: %+v", round, st)
		require.Equal(t, uint64(2)-b2u(r.err != nil), st.Acquired, "round %d: %+v", round, st)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// SetCapacity on a barging semaphore: a shrink fails the waiters too heavy
// for it, a grow serves the others.
func TestBargingSetCapacity(t *testing.T) {
	s, clk := newBarging(t, 2)
	h := take(t, s, 2)
	heavy := enqueueTimed(t, context.Background(), s, clk, 2)
	light := enqueueTimed(t, context.Background(), s, clk, 1)
	s.SetCapacity(1)
	r := recv(t, heavy)
	require.ErrorIs(t, r.err, semaphore.ErrTooHeavy)
	stillWaiting(t, light)
	s.SetCapacity(3)
	rl := recv(t, light)
	require.NoError(t, rl.err)
	rl.p.Release()
	h.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Failed, "%+v", st)
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
}

// The endwins tests (a context or a max wait that ended before the permits
// came free wins) against a barging semaphore: the release wakes the
// waiter instead of granting it, and the waiter must still fail and pass
// the permits on.
func TestBargingEndBeforeReleaseWinsRace(t *testing.T) {
	for i := range endRounds {
		endThenGrant(t, i, i%2 == 1, i/2%grantKinds, func(r *endRound) <-chan result {
			return acquireAsync(r.ctx, r.s, 2)
		}, semaphore.WithBarging(time.Hour))
	}
}

// The counters race test against barging semaphores, with a bound that
// never runs out and with one that runs out at once (strict hand-off from
// the start), so that grants race cancellations, timeouts, shrinks and
// Close through the woken waiter's paths too.
func TestBargingEveryCallEndsInOneCounterRace(t *testing.T) {
	everyCallEndsInOneCounter(t, 500, semaphore.WithBarging(time.Hour))
	everyCallEndsInOneCounter(t, 500, semaphore.WithBarging(time.Nanosecond))
}

// A cancelled waiter of a barging semaphore leaves; if it was the head, the
// next one is served if it fits.
func TestBargingCancelHeadServesNext(t *testing.T) {
	s, clk := newBarging(t, 3)
	h := take(t, s, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heavy := enqueueTimed(t, ctx, s, clk, 3)
	clk.Advance(bargeBound)
	waitFor(t, "the head to set strict", func() bool { return semaphore.BargingStrict(s) })
	light := enqueueTimed(t, context.Background(), s, clk, 1) // strict: it queues
	cancel()
	require.True(t, errors.Is(recv(t, heavy).err, context.Canceled))
	r := recv(t, light)
	require.NoError(t, r.err, "the light waiter fits once the heavy head left")
	r.p.Release()
	h.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(1), st.Cancelled, "%+v", st)
	require.False(t, semaphore.BargingStrict(s))
}

// A barging semaphore keeps no places: Join is refused with a clear error
// and takes nothing, also when the permits are free; the line it would have
// joined is unchanged.
func TestBargingJoinRefused(t *testing.T) {
	s, _ := newBarging(t, 1)
	pl, err := s.Join(1)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.Contains(t, err.Error(), "WithBarging")
	_, werr := pl.Wait(context.Background())
	require.ErrorIs(t, werr, semaphore.ErrPlaceUsed, "the refused place is the zero Place")
	st := s.Stats()
	require.Equal(t, int64(1), st.Available, "%+v", st)
	require.Equal(t, uint64(1), st.Rejected, "%+v", st)
	p, ok := s.TryAcquire(1)
	require.True(t, ok)
	p.Release()
}

// WithHistograms on a barging semaphore: a waiter that a release wakes and
// that takes the permits itself (not through the queue's grant) has its
// wait timed, and the grants that did not queue count as waits of 0, so
// that the wait histogram counts every grant once.
func TestBargingTimings(t *testing.T) {
	s, clk := newBarging(t, 1, semaphore.WithHistograms())
	ctx := context.Background()
	first := take(t, s, 1)
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, 1)
		if err == nil {
			p.Release()
		}
		return err
	})
	testkit.Eventually(t, "the waiter queues", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(40 * time.Millisecond) // under the bound: it is woken, not handed the permit
	first.Release()
	require.NoError(t, testkit.Recv(t, got, "the woken waiter"))
	st := s.Stats()
	w := st.WaitTime
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
	require.Equal(t, st.Acquired, w.Count, "one wait per grant: %+v", w)
	require.Equal(t, 40*time.Millisecond, w.Sum, "%+v", w)
	require.Equal(t, uint64(1), w.Counts[0], "the grant that did not queue: %+v", w)
}
