package keyedsem_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

const kBound = time.Second

// newBargingKeyed returns a keyed semaphore made WithBarging(kBound) on a
// fake clock, per-key capacity c.
func newBargingKeyed(c int64, opts ...keyedsem.Option) (*keyedsem.Keyed[string], *clock.Fake) {
	clk := newFake()
	opts = append([]keyedsem.Option{keyedsem.WithPerKeyCapacity(c), keyedsem.WithBarging(kBound), keyedsem.WithClock(clk)}, opts...)
	return keyedsem.New[string](opts...), clk
}

// queueTimed is queue on a barging semaphore: it returns once the caller
// waits and its bound's timer is armed.
func queueTimed(t *testing.T, s *keyedsem.Keyed[string], clk *clock.Fake, key string, n int64, want int) <-chan result {
	t.Helper()
	timers := clk.Pending()
	c := queue(t, s, bg, key, n, want)
	clk.BlockUntilPending(timers + 1)
	return c
}

// A caller of a key takes its free permits ahead of the key's young
// waiter (here a light caller ahead of a heavy head, which FIFO queues
// behind it); once the waiter has waited the bound, nobody does, and it is
// served first when the holders release. (Against a FIFO keyed semaphore
// the first TryAcquire fails; with the bound ignored, the second succeeds.)
func TestBargingKeyNewcomerOvertakesUntilTheBound(t *testing.T) {
	s, clk := newBargingKeyed(3)
	h, err := s.Acquire(bg, "k", semaphore.Weight(2))
	require.NoError(t, err)
	heavy := queueTimed(t, s, clk, "k", 3, 1)

	p, ok := s.TryAcquire("k")
	require.True(t, ok, "a newcomer may take the key's free permit while its head is young")
	p.Release()
	r := testkit.Recv(t, goAcquire(s, bg, "k", 1), "the newcomer")
	require.NoError(t, r.err, "so may an Acquire")
	r.p.Release()

	clk.Advance(kBound)
	testkit.Eventually(t, "the head to make the key strict", func() bool {
		p, ok := s.TryAcquire("k")
		if ok {
			p.Release()
		}
		return !ok // once the head has waited the bound, nobody overtakes it
	})
	late := queueTimed(t, s, clk, "k", 1, 2)
	h.Release()
	rh := testkit.Recv(t, heavy, "the old head")
	require.NoError(t, rh.err, "the old head is served first")
	select {
	case r := <-late:
		t.Fatalf("the late caller was served (%v) while the old head holds every permit", r.err)
	default:
	}
	rh.p.Release()
	rl := testkit.Recv(t, late, "the late caller")
	require.NoError(t, rl.err)
	rl.p.Release()
	st := s.Stats()
	require.Zero(t, st.Held, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	require.Equal(t, uint64(2), st.Waited, "%+v", st)
	require.Equal(t, st.Acquired, st.Released, "%+v", st)
	require.Zero(t, clk.Pending(), "every bound's timer is stopped")
}

// On a hot key of capacity 1, a release wakes the waiter without handing
// it the permit: a caller that takes the permit first has it, and the
// waiter keeps its place. The contract lets either the caller or the
// woken waiter win, so the test does not race them: the waiter's context
// is a testkit.Gate, which holds the woken waiter where it must look at
// its context, after the release that woke it and before it takes the
// permit (see bargeCompete). While it is held the permit is free. (A
// release that hands the permit over, as FIFO's does, leaves the waiter
// granted: it never stops at the Gate, and the test fails.) Then one
// release without the Gate lets the two race, and exactly one of them has
// the permit. The counts are exact: every grant is counted once.
func TestBargingKeyReleaseWakesWithoutGranting(t *testing.T) {
	const rounds = 3
	s, _ := newBargingKeyed(1)
	gate := testkit.NewGate()
	h, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	a := queue(t, s, gate, "k", 1, 1)
	for i := range rounds {
		gate.Shut()
		h.Release() // wakes the waiter, which the Gate holds
		gate.Held(t, fmt.Sprintf("round %d: the woken waiter to look at its context", i))
		p, ok := s.TryAcquire("k")
		gate.Open()
		require.True(t, ok, "round %d: the permit was not free after the release that woke the waiter", i)
		h = p
		// The woken waiter lost: it takes its place back at the head.
		testkit.Eventually(t, "the woken waiter to rejoin", func() bool { return s.Stats().Waiters == 1 })
		requireWaiting(t, a)
		require.Equal(t, int64(1), s.Stats().Held, "round %d", i)
	}

	// The race the contract allows: either may win, never both.
	h.Release()
	barged, ok := s.TryAcquire("k")
	if ok {
		testkit.Eventually(t, "the woken waiter to rejoin", func() bool { return s.Stats().Waiters == 1 })
		requireWaiting(t, a)
		require.Equal(t, int64(1), s.Stats().Held)
		barged.Release()
	}
	r := testkit.Recv(t, a, "the waiter")
	require.NoError(t, r.err)
	require.Equal(t, int64(1), s.Stats().Held)
	r.p.Release()
	st := s.Stats()
	want := uint64(1 + rounds + 1) // h, the barges, the waiter
	if ok {
		want++
	}
	require.Zero(t, st.Held, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	require.Equal(t, want, st.Acquired, "%+v", st)
	require.Equal(t, st.Acquired, st.Released, "%+v", st)
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
	require.Zero(t, st.Cancelled, "%+v", st)
}

// requireWaiting fails t if the acquire behind c has returned.
func requireWaiting(t *testing.T, c <-chan result) {
	t.Helper()
	select {
	case r := <-c:
		t.Fatalf("the waiter returned (%v, %v) while it should wait", r.p.Weight() != 0, r.err)
	default:
	}
}

func TestBargingKeyCloseFailsWaiters(t *testing.T) {
	s, _ := newBargingKeyed(1, keyedsem.WithIdleTimeout(0))
	pa, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	wa := queue(t, s, bg, "a", 1, 1)
	wa2 := queue(t, s, bg, "a", 1, 2)
	s.Close()
	for _, w := range []<-chan result{wa, wa2} {
		require.ErrorIs(t, testkit.Recv(t, w, "a waiter Close fails").err, semaphore.ErrClosed)
	}
	require.True(t, pa.Release())
	st := s.Stats()
	require.Zero(t, st.Waiters, "%+v", st)
	require.Equal(t, uint64(2), st.Failed, "%+v", st)
	require.Equal(t, 0, s.Len(), "releases after Close still drop entries")
}

func TestBargingKeyConfig(t *testing.T) {
	require.NoError(t, keyedsem.Validate(keyedsem.WithBarging(0)))
	require.ErrorIs(t, keyedsem.Validate(keyedsem.WithBarging(-time.Second)), semaphore.ErrInvalidConfig)
	barge := keyedsem.WithBarging(time.Millisecond)
	for _, o := range []keyedsem.Option{keyedsem.WithPriorities(time.Second), keyedsem.WithSequenceOrder()} {
		for _, opts := range [][]keyedsem.Option{{barge, o}, {o, barge}} {
			err := keyedsem.Validate(opts...)
			require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
			require.Contains(t, err.Error(), "WithBarging")
		}
	}
	require.NoError(t, keyedsem.Validate(barge, barge), "the same option twice")
}

// A barging keyed semaphore keeps no places: Join is refused with a clear
// error and takes nothing, on a free key as on a busy one.
func TestBargingKeyJoinRefused(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithBarging(time.Hour))
	held, err := s.Acquire(context.Background(), "busy")
	require.NoError(t, err)
	for _, key := range []string{"free", "busy"} {
		pl, err := s.Join(key)
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig, key)
		require.Contains(t, err.Error(), "WithBarging", key)
		_, werr := pl.Wait(context.Background())
		require.ErrorIs(t, werr, semaphore.ErrPlaceUsed, key)
	}
	require.Equal(t, 1, s.Len(), "Join made no entry for the free key")
	st := s.Stats()
	require.Equal(t, uint64(2), st.Rejected, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	held.Release()
}

// The keyed counters race test against barging semaphores: a bound that
// never runs out, and one that runs out at once.
func TestBargingEveryKeyedCallEndsInOneCounterRace(t *testing.T) {
	everyKeyedCallEndsInOneCounter(t, 500, keyedsem.WithBarging(time.Hour))
	everyKeyedCallEndsInOneCounter(t, 500, keyedsem.WithBarging(time.Nanosecond))
}

// A hot key under many goroutines: every permit comes back, the key's
// entry goes with idle timeout 0, and the counters balance.
func TestBargingKeyHotRace(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithBarging(50*time.Microsecond), keyedsem.WithIdleTimeout(0))
	const g, ops = 8, 2000
	done := make(chan struct{}, g)
	for range g {
		go func() {
			for range ops {
				p, err := s.Acquire(context.Background(), "hot")
				if err != nil {
					panic(err)
				}
				runtime.Gosched()
				p.Release()
			}
			done <- struct{}{}
		}()
	}
	for range g {
		testkit.Recv(t, (<-chan struct{})(done), "the goroutines to finish")
	}
	st := s.Stats()
	require.Equal(t, uint64(g*ops), st.Acquired, "%+v", st)
	require.Equal(t, st.Acquired, st.Released, "%+v", st)
	require.Zero(t, st.Held, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	require.Equal(t, 0, s.Len(), "%+v", st)
}

// WithHistograms on a barging keyed semaphore: a waiter woken by a release
// that takes the key's permit itself has its wait timed, once, beside the
// zero wait of the grant that did not queue.
func TestBargingKeyTimings(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := keyedsem.New[string](keyedsem.WithBarging(time.Hour), keyedsem.WithHistograms(), keyedsem.WithClock(clk))
	ctx := context.Background()
	first, err := s.Acquire(ctx, "k")
	require.NoError(t, err)
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, "k")
		if err == nil {
			p.Release()
		}
		return err
	})
	testkit.Eventually(t, "the waiter queues", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(5 * time.Millisecond)
	first.Release()
	require.NoError(t, testkit.Recv(t, got, "the woken waiter"))
	st := s.Stats()
	w := st.WaitTime
	require.Equal(t, uint64(1), st.Waited, "%+v", st)
	require.Equal(t, st.Acquired, w.Count, "one wait per grant: %+v", w)
	require.Equal(t, 5*time.Millisecond, w.Sum, "%+v", w)
}
