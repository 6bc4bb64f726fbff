package keyedsem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// fastPathGuard bounds every wait of the tests in this file.
const fastPathGuard = time.Minute

// errGatedCtx is a context whose Err, the first time it is called, reads
// the context's error, reports the call by closing asked, blocks until
// proceed is closed, and then returns the error it read. The test cancels
// and releases in between: the acquirer's check then saw a live context,
// and everything it does after the check happens after the release.
type errGatedCtx struct {
	context.Context
	asked, proceed chan struct{}
	first          bool
}

func newErrGatedCtx() (*errGatedCtx, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	return &errGatedCtx{Context: ctx, asked: make(chan struct{}), proceed: make(chan struct{}), first: true}, cancel
}

// Err is called by one goroutine only (the acquirer).
func (c *errGatedCtx) Err() error {
	err := c.Context.Err()
	if c.first {
		c.first = false
		close(c.asked)
		<-c.proceed
	}
	return err
}

func awaitOrFail(t *testing.T, c <-chan struct{}, round int, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(fastPathGuard):
		t.Fatalf("round %d: %s within %v", round, what, fastPathGuard)
	}
}

func recvOrFail(t *testing.T, c <-chan result, round int) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(fastPathGuard):
		t.Fatalf("round %d: the acquire did not return within %v", round, fastPathGuard)
		return result{}
	}
}

// checkCancelledRound checks the outcome of one round: the acquire whose
// context was cancelled before the key's permit came free failed with
// context.Canceled and holds nothing, and the key is free.
func checkCancelledRound(t *testing.T, s *keyedsem.Keyed[string], r result, round int) {
	t.Helper()
	if r.err == nil {
		r.p.Release()
	}
	require.ErrorIs(t, r.err, context.Canceled, "round %d: the acquire took a permit that came free after its context was cancelled", round)
	require.False(t, r.p.Weight() != 0, "round %d", round)
	require.Equal(t, int64(0), s.Stats().Held, "round %d", round)
	p, ok := s.TryAcquire("k")
	require.True(t, ok, "round %d: the key is not free after the cancelled acquire", round)
	require.True(t, p.Release(), "round %d", round)
}

// Regression: an acquire checked its context once, at entry, and then
// looked the key up and claimed a free permit lock-free. A release (and,
// with idle timeout 0, the removal of the entry and a new one made by the
// acquirer) between the check and the claim gave the permit, with a nil
// error, to a caller whose context had been cancelled before the release.
// The check now follows the load of the state that the claim is made from.
// The context here stops the acquirer inside its first ctx check, whichever
// place that check is at, while the test cancels and releases.
func TestCancelBeforeReleaseWinsFastPathRace(t *testing.T) {
	for _, tc := range idleModes {
		t.Run(tc.name, func(t *testing.T) {
			s := keyedsem.New[string](tc.opts...)
			defer s.Close()
			const rounds = 1000
			for i := range rounds {
				p, err := s.Acquire(bg, "k")
				require.NoError(t, err)
				ctx, cancel := newErrGatedCtx()
				res := goAcquire(s, context.Context(ctx), "k", 1)
				awaitOrFail(t, ctx.asked, i, "the acquire did not check its context")
				cancel()                     // strictly before the release
				require.True(t, p.Release()) // the key's permit comes free only now
				close(ctx.proceed)
				checkCancelledRound(t, s, recvOrFail(t, res, i), i)
			}
			st := s.Stats()
			require.Equal(t, uint64(rounds), st.Cancelled)
			require.Equal(t, st.Acquired, st.Released)
			require.Equal(t, uint64(2*rounds), st.Acquired, "the holder's and TryAcquire's grants only")
		})
	}
}

// The same window on the way to the key's queue: an acquire that found the
// key held keeps its reference on the entry and goes to wait, where it
// claimed the permit without looking at its context again if the release
// came in between.
func TestCancelBeforeReleaseWinsBeforeQueueRace(t *testing.T) {
	for _, tc := range idleModes {
		t.Run(tc.name, func(t *testing.T) {
			s := keyedsem.New[string](tc.opts...)
			defer s.Close()
			var asked, proceed chan struct{}
			keyedsem.SetBeforeWait(s, func() {
				close(asked)
				<-proceed
			})
			const rounds = 1000
			for i := range rounds {
				p, err := s.Acquire(bg, "k")
				require.NoError(t, err)
				asked, proceed = make(chan struct{}), make(chan struct{})
				ctx, cancel := context.WithCancel(bg)
				res := goAcquire(s, ctx, "k", 1)
				awaitOrFail(t, asked, i, "the acquire did not reach its wait")
				cancel()
				require.True(t, p.Release())
				close(proceed)
				checkCancelledRound(t, s, recvOrFail(t, res, i), i)
			}
			st := s.Stats()
			require.Equal(t, uint64(rounds), st.Cancelled)
			require.Equal(t, uint64(2*rounds), st.Acquired)
			require.Equal(t, st.Acquired, st.Released)
		})
	}
}

// Regression: a waiter granted the permit whose context had ended by the
// time it woke gives the grant back; that grant counted in Acquired (and
// Released) as well as in Cancelled, where package semaphore counts it
// only in Cancelled, as if the waiter had left before the grant. Now
// keyedsem counts it the same way.
func TestGivenBackGrantCountsOnlyCancelledRace(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	const rounds = 200
	for i := range rounds {
		p, err := s.Acquire(bg, "k")
		require.NoError(t, err)
		ctx, cancel := newGatedCtx(bg)
		first := goAcquire(s, context.Context(ctx), "k", 1)
		awaitOrFail(t, ctx.asked, i, "the waiter did not ask for Done")
		cancel()
		require.True(t, p.Release()) // grants the waiter, which gives it back
		close(ctx.proceed)
		r := recvOrFail(t, first, i)
		require.ErrorIs(t, r.err, context.Canceled, "round %d", i)
	}
	st := s.Stats()
	require.Equal(t, uint64(rounds), st.Cancelled)
	require.Equal(t, uint64(rounds), st.Acquired, "a grant given back must not count as acquired")
	require.Equal(t, uint64(rounds), st.Released, "a grant given back must not count as released")
	require.Equal(t, int64(0), st.Held)
	p, ok := s.TryAcquire("k")
	require.True(t, ok)
	p.Release()
}

// The zero Keyed is not usable (package doc): every method says
// so, instead of failing with a misleading error.
func TestZeroValuePanics(t *testing.T) {
	var s keyedsem.Keyed[string]
	for name, f := range map[string]func(){
		"Acquire":            func() { _, _ = s.Acquire(bg, "k") },
		"Acquire(Weight)":    func() { _, _ = s.Acquire(bg, "k", semaphore.Weight(2)) },
		"TryAcquire":         func() { _, _ = s.TryAcquire("k") },
		"TryAcquire(Weight)": func() { _, _ = s.TryAcquire("k", semaphore.Weight(2)) },
		"Do":                 func() { _ = s.Do(bg, "k", func(context.Context) error { return nil }) },
		"Close":              func() { s.Close() },
		"Stats":              func() { _ = s.Stats() },
		"Sweep":              func() { _ = s.Sweep() },
		"Len":                func() { _ = s.Len() },
	} {
		require.PanicsWithValue(t, "keyedsem: use New", f, name)
	}
}

// An acquire whose context has already ended fails at once, also for a new
// key (the context is now looked at when the map has no entry, before one
// is made) and for a free key, and makes and takes nothing.
func TestEndedContextFailsAtOnceOnNewAndFreeKeys(t *testing.T) {
	for _, tc := range idleModes {
		t.Run(tc.name, func(t *testing.T) {
			s := keyedsem.New[string](tc.opts...)
			defer s.Close()
			ctx, cancel := context.WithCancel(bg)
			cancel()
			p, err := s.Acquire(ctx, "new")
			require.ErrorIs(t, err, context.Canceled)
			require.False(t, p.Weight() != 0)
			require.False(t, keyedsem.Has(s, "new"), "an entry was made for an ended context")
			q, ok := s.TryAcquire("free")
			require.True(t, ok)
			require.True(t, q.Release()) // "free" is idle (default) or gone (idle0)
			p, err = s.Acquire(ctx, "free")
			require.ErrorIs(t, err, context.Canceled)
			require.False(t, p.Weight() != 0)
			// Refusals come after the ended context, as before.
			_, err = s.Acquire(ctx, "new", semaphore.Weight(0))
			require.ErrorIs(t, err, context.Canceled)
			st := s.Stats()
			require.Equal(t, uint64(3), st.Cancelled)
			require.Equal(t, uint64(1), st.Acquired)
			require.Equal(t, uint64(1), st.Created)
			require.Equal(t, int64(0), st.Held)
		})
	}
}
