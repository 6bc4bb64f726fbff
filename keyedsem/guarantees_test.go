package keyedsem_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// gatedCtx is a context whose Done, the first time it is asked for,
// reports that by closing asked and then blocks until proceed is closed.
// A waiter asks for Done after it is queued and before its select, so the
// test can cancel and grant while the waiter is held between the two: its
// select then finds both the grant and Done ready.
type gatedCtx struct {
	context.Context
	asked, proceed chan struct{}
	first          bool
}

func newGatedCtx(parent context.Context) (*gatedCtx, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	return &gatedCtx{Context: ctx, asked: make(chan struct{}), proceed: make(chan struct{}), first: true}, cancel
}

// Done is called by one goroutine only (the acquirer).
func (c *gatedCtx) Done() <-chan struct{} {
	if c.first {
		c.first = false
		close(c.asked)
		<-c.proceed
	}
	return c.Context.Done()
}

func awaitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		t.Fatal(what)
	}
}

// recv returns the result on c, failing the test if none comes within
// hangGuard.
func recv(t *testing.T, c <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(hangGuard):
		t.Fatalf("%s: no result within %v", what, hangGuard)
		return result{}
	}
}

// Regression (issue 11, defect 1): a waiter whose context was cancelled
// strictly before the release that granted it must fail with the
// context's error, and hand the permit on to the next waiter, as a waiter
// that left in time would. Before, the waiter's select chose at random
// between the grant and Done, so Acquire succeeded half of the time.
func TestCancelBeforeGrantWinsRace(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	const rounds = 1000
	for i := range rounds {
		p, err := s.Acquire(bg, "k")
		require.NoError(t, err)
		ctx, cancel := newGatedCtx(bg)
		first := goAcquire(s, context.Context(ctx), "k", 1)
		awaitClosed(t, ctx.asked, "the waiter never asked for Done")
		second := queue(t, s, bg, "k", 1, 2)
		cancel()                     // strictly before the release
		require.True(t, p.Release()) // grants the first waiter, whose select is not run yet
		close(ctx.proceed)
		r := recv(t, first, "the first waiter")
		if r.err == nil {
			r.p.Release()
		}
		require.ErrorIs(t, r.err, context.Canceled, "round %d: the acquire succeeded after its context was cancelled", i)
		require.False(t, r.p.Weight() != 0)
		r2 := recv(t, second, "the second waiter")
		require.NoError(t, r2.err, "round %d: the permit was not handed on", i)
		require.True(t, r2.p.Release())
	}
	st := s.Stats()
	require.Equal(t, uint64(rounds), st.Cancelled)
	require.Equal(t, st.Acquired, st.Released)
	require.Equal(t, int64(0), st.Held)
	require.Equal(t, 0, st.Waiters)
}

// The same for Do: fn must not run when the context was cancelled before
// the permit came free.
func TestDoCancelBeforeGrantRace(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	for i := range 1000 {
		p, err := s.Acquire(bg, "k")
		require.NoError(t, err)
		ctx, cancel := newGatedCtx(bg)
		ran := false
		res := make(chan error, 1)
		go func() {
			res <- s.Do(ctx, "k", func(context.Context) error { ran = true; return nil })
		}()
		awaitClosed(t, ctx.asked, "Do never asked for Done")
		cancel()
		require.True(t, p.Release())
		close(ctx.proceed)
		select {
		case err := <-res:
			require.ErrorIs(t, err, context.Canceled, "round %d", i)
		case <-time.After(hangGuard):
			t.Fatalf("round %d: Do did not return within %v", i, hangGuard)
		}
		require.False(t, ran, "round %d: fn ran although its context ended before the permit came free", i)
	}
	require.Equal(t, int64(0), s.Stats().Held)
}

// A waiter failed by Close keeps returning ErrClosed even if its context
// ended meanwhile (documented on Acquire).
func TestClosedWaiterWithEndedContextReturnsErrClosedRace(t *testing.T) {
	for i := range 200 {
		s := keyedsem.New[string]()
		p, err := s.Acquire(bg, "k")
		require.NoError(t, err)
		ctx, cancel := newGatedCtx(bg)
		w := goAcquire(s, context.Context(ctx), "k", 1)
		awaitClosed(t, ctx.asked, "the waiter never asked for Done")
		s.Close()
		cancel()
		close(ctx.proceed)
		r := recv(t, w, "the waiter failed by Close")
		require.ErrorIs(t, r.err, semaphore.ErrClosed, "round %d", i)
		p.Release()
	}
}

// Regression (issue 11, defect 1, the hard cap's wait): a new key that
// waits for a running eviction pass, and whose context ends before the
// pass gives the lock back, must fail with the context's error and make
// no entry. Before, its select chose at random between the lock and Done.
func TestNewKeyCancelledBeforePassEndsRace(t *testing.T) {
	for i := range 1000 {
		s := keyedsem.New[string](keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys())
		a, err := s.Acquire(bg, "a")
		require.NoError(t, err)
		unlock := keyedsem.HoldEvictLock(s)
		ctx, cancel := newGatedCtx(bg)
		res := goAcquire(s, context.Context(ctx), "b", 1)
		awaitClosed(t, ctx.asked, "the new key never waited for the pass")
		cancel()
		require.True(t, a.Release()) // room could be made now...
		unlock()                     // ...and the pass is over: both are ready
		close(ctx.proceed)
		r := recv(t, res, "the new key")
		if r.err == nil {
			r.p.Release()
		}
		require.ErrorIs(t, r.err, context.Canceled, "round %d: a new key was admitted after its context ended", i)
		require.False(t, keyedsem.Has(s, "b"), "round %d", i)
		st := s.Stats()
		require.Equal(t, uint64(1), st.Cancelled, "round %d", i)
		require.Equal(t, uint64(0), st.Rejected, "round %d", i)
		s.Close()
	}
}

// Regression (issue 11, defect 3): keys that are not equal to themselves
// are refused at the door with ErrNaNKey, before any entry is made.
// Before, each such key made an entry that could never be found or
// removed: the map grew, a held permit was counted twice in Stats, and
// under the hard cap a few of them locked every new key out.
func TestNaNKeysAreRefused(t *testing.T) {
	type withNaN struct {
		Name string
		F    float64
	}
	nan := math.NaN()
	checkRefused(t, keyedsem.New[float64](), nan)
	checkRefused(t, keyedsem.New[float32](), float32(nan))
	checkRefused(t, keyedsem.New[complex128](), complex(0, nan))
	checkRefused(t, keyedsem.New[withNaN](), withNaN{"x", nan})
	checkRefused(t, keyedsem.New[[2]float64](), [2]float64{1, nan})
	checkRefused(t, keyedsem.New[any](), any(nan))
	checkRefused(t, keyedsem.New[any](), any(withNaN{"x", nan}))
	checkRefused(t, keyedsem.New[struct{ A any }](), struct{ A any }{nan})

	// Keys of those types that are equal to themselves work as before.
	s := keyedsem.New[any]()
	defer s.Close()
	for _, k := range []any{1.5, withNaN{"x", 2}, "s", math.Inf(1)} {
		p, err := s.Acquire(bg, k)
		require.NoError(t, err, "key %v", k)
		require.True(t, p.Release())
	}
}

func checkRefused[K comparable](t *testing.T, s *keyedsem.Keyed[K], key K) {
	t.Helper()
	defer s.Close()
	var held []semaphore.Permit
	for range 3 {
		p, err := s.Acquire(bg, key)
		if err == nil {
			held = append(held, p)
		}
		require.ErrorIs(t, err, keyedsem.ErrNaNKey, "key %v", key)
		p, err = s.Acquire(bg, key)
		if err == nil {
			held = append(held, p)
		}
		require.ErrorIs(t, err, keyedsem.ErrNaNKey, "key %v", key)
		p, ok := s.TryAcquire(key)
		if ok {
			held = append(held, p)
		}
		require.False(t, ok, "TryAcquire of key %v", key)
		ran := false
		err = s.Do(bg, key, func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, keyedsem.ErrNaNKey, "key %v", key)
		require.False(t, ran)
	}
	st := s.Stats()
	require.Equal(t, 0, st.Keys, "key %v: the map grew", key)
	require.Equal(t, 0, s.Len())
	require.Equal(t, int64(0), st.Held, "key %v", key)
	require.Equal(t, uint64(0), st.Acquired, "key %v", key)
	require.Equal(t, uint64(0), st.Created, "key %v", key)
	require.Equal(t, uint64(9), st.Rejected, "key %v: Acquire, Acquire and Do refusals count", key)
	for _, p := range held {
		p.Release()
	}
	require.Equal(t, int64(0), s.Stats().Held, "key %v: Held counted twice", key)
}

// Under the hard cap, refused NaN keys take no room: a new key still gets
// in. Before, two NaN keys filled a cap of 2 for good.
func TestNaNKeysDoNotLockOutTheHardCap(t *testing.T) {
	s := keyedsem.New[float64](keyedsem.WithMaxKeys(2), keyedsem.WithHardMaxKeys(), keyedsem.WithIdleTimeout(0))
	defer s.Close()
	for range 10 {
		p, err := s.Acquire(bg, math.NaN())
		if err == nil {
			p.Release()
		}
		if p, ok := s.TryAcquire(math.NaN()); ok {
			p.Release()
		}
	}
	for i := range 4 {
		p, err := s.Acquire(bg, float64(i))
		require.NoError(t, err, "key %d locked out", i)
		require.True(t, p.Release())
	}
	require.Equal(t, 0, s.Len())
	st := s.Stats()
	require.Equal(t, st.Created, st.Evicted)
}
