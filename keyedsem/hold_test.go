package keyedsem_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

const holdBound = time.Second

// newHeld returns a semaphore with the reorder hold on a fake clock.
func newHeld(t *testing.T, opts ...keyedsem.Option) (*keyedsem.Keyed[string], *clock.Fake) {
	t.Helper()
	fake := newFake()
	all := append([]keyedsem.Option{keyedsem.WithClock(fake), keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(holdBound)}, opts...)
	s := keyedsem.New[string](all...)
	t.Cleanup(s.Close)
	return s, fake
}

// numbered acquires key as message seq; it must be granted at once.
func numbered(t *testing.T, s *keyedsem.Keyed[string], key string, seq int64) semaphore.Permit {
	t.Helper()
	return testkit.Await(t, "message granted at once", func(ctx context.Context) (semaphore.Permit, error) {
		return s.Acquire(ctx, key, semaphore.Sequence(seq))
	})
}

// goNumbered starts an acquire of key as message seq and waits until it is
// queued with its hold timer armed (the semaphore then has waiters waiters
// and fake timers pending).
func goNumbered(t *testing.T, s *keyedsem.Keyed[string], fake *clock.Fake, ctx context.Context, key string, seq int64, waiters, timers int) <-chan result {
	t.Helper()
	c := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, key, semaphore.Sequence(seq))
		c <- result{p, err}
	}()
	testkit.Eventually(t, "the message to queue and arm its hold", func() bool {
		return s.Stats().Waiters == waiters && fake.Pending() == timers
	})
	return c
}

// assertHeld checks that key is free and its one waiter not served: a
// grant is made under the key's lock by the release, before it returns.
func assertHeld(t *testing.T, s *keyedsem.Keyed[string], waiters int) {
	t.Helper()
	st := s.Stats()
	assert.Equal(t, int64(0), st.Held, "a held message took the key")
	assert.Equal(t, waiters, st.Waiters, "waiters")
}

func TestReorderHoldGapFilled(t *testing.T) {
	s, fake := newHeld(t)
	p1 := numbered(t, s, "k", 1)
	r3 := goNumbered(t, s, fake, bg, "k", 3, 1, 1) // 3 before 2, while 1 runs
	p1.Release()
	assertHeld(t, s, 1)
	p2 := numbered(t, s, "k", 2) // fills the gap: goes at once, ahead of 3
	assert.Equal(t, 1, s.Stats().Waiters, "3 still waits while 2 runs")
	p2.Release()
	r := testkit.Recv(t, r3, "3 after 2")
	require.NoError(t, r.err)
	r.p.Release()
	st := s.Stats()
	assert.Equal(t, uint64(0), st.HoldsRunOut, "no hold ran out")
	assert.Equal(t, 0, fake.Pending(), "3's hold timer stopped")
}

func TestReorderHoldBoundReached(t *testing.T) {
	s, fake := newHeld(t)
	numbered(t, s, "k", 1).Release()
	r3 := goNumbered(t, s, fake, bg, "k", 3, 1, 1) // 2 never comes
	fake.Advance(holdBound - 1)
	assertHeld(t, s, 1)
	fake.Advance(1)
	r := testkit.Recv(t, r3, "3 once the bound has passed")
	require.NoError(t, r.err)
	assert.Equal(t, uint64(1), s.Stats().HoldsRunOut, "the hold that ran out is counted")
	r.p.Release()
	// 2 comes late, below the highest granted: it goes at once, as does a
	// duplicate, and a caller without a number.
	numbered(t, s, "k", 2).Release()
	numbered(t, s, "k", 3).Release()
	testkit.Await(t, "a plain caller", func(ctx context.Context) (semaphore.Permit, error) {
		return s.Acquire(ctx, "k")
	}).Release()
	// The next number goes at once too.
	numbered(t, s, "k", 4).Release()
	assert.Equal(t, uint64(1), s.Stats().HoldsRunOut)
}

// The line goes in number order once any of its waiters has waited the
// bound, even one behind a head that came later.
func TestReorderHoldRunsOutForTheLine(t *testing.T) {
	s, fake := newHeld(t)
	numbered(t, s, "k", 1).Release()
	r5 := goNumbered(t, s, fake, bg, "k", 5, 1, 1)
	fake.Advance(holdBound / 2)
	r3 := goNumbered(t, s, fake, bg, "k", 3, 2, 2) // ahead of 5
	fake.Advance(holdBound / 2)                    // 5 has waited the bound
	r := testkit.Recv(t, r3, "3, the head, once 5 has waited the bound")
	require.NoError(t, r.err)
	assert.Equal(t, 1, s.Stats().Waiters, "5 waits for 3")
	r.p.Release()
	r = testkit.Recv(t, r5, "5 after 3")
	require.NoError(t, r.err)
	r.p.Release()
	assert.Equal(t, uint64(2), s.Stats().HoldsRunOut)
}

func TestReorderHoldFirstOfAKeyGoesAtOnce(t *testing.T) {
	s, _ := newHeld(t)
	numbered(t, s, "k", 7).Release()
	numbered(t, s, "other", 3).Release()
}

// A key with a held message is in use: it is not evicted, and keeps its
// number; once idle and evicted, it forgets it.
func TestReorderHoldKeyNotEvictedWhileHeld(t *testing.T) {
	s, fake := newHeld(t, keyedsem.WithReorderHold(time.Hour), keyedsem.WithIdleTimeout(time.Minute))
	numbered(t, s, "k", 1).Release()
	r3 := goNumbered(t, s, fake, bg, "k", 3, 1, 1)
	fake.Advance(2 * time.Minute)
	s.Sweep()
	assert.Equal(t, uint64(0), s.Stats().Evicted, "the key with a held message was evicted")
	assertHeld(t, s, 1)
	p2 := numbered(t, s, "k", 2)
	p2.Release()
	r := testkit.Recv(t, r3, "3 after 2")
	require.NoError(t, r.err)
	r.p.Release()
	fake.Advance(2 * time.Minute)
	s.Sweep()
	require.Equal(t, uint64(1), s.Stats().Evicted, "the idle key is evicted")
	numbered(t, s, "k", 9).Release() // a new entry knows no number
}

func TestReorderHoldCancelled(t *testing.T) {
	s, fake := newHeld(t)
	numbered(t, s, "k", 1).Release()
	ctx, cancel := context.WithCancel(bg)
	r3 := goNumbered(t, s, fake, ctx, "k", 3, 1, 1)
	r4 := goNumbered(t, s, fake, bg, "k", 4, 2, 2)
	cancel()
	r := testkit.Recv(t, r3, "the cancelled message")
	require.ErrorIs(t, r.err, context.Canceled)
	testkit.Eventually(t, "3's timer to stop", func() bool { return fake.Pending() == 1 })
	assertHeld(t, s, 1) // 4 is looked at again: still held (2 and 3 missing)
	numbered(t, s, "k", 2).Release()
	assertHeld(t, s, 1) // 3 is still missing
	numbered(t, s, "k", 3).Release()
	r = testkit.Recv(t, r4, "4 after 3")
	require.NoError(t, r.err)
	r.p.Release()
	st := s.Stats()
	assert.Equal(t, uint64(1), st.Cancelled)
	assert.Equal(t, int64(0), st.Held)
	assert.Equal(t, 0, fake.Pending())
}

func TestReorderHoldClose(t *testing.T) {
	s, fake := newHeld(t)
	numbered(t, s, "k", 1).Release()
	r3 := goNumbered(t, s, fake, bg, "k", 3, 1, 1)
	s.Close()
	r := testkit.Recv(t, r3, "the held message at Close")
	require.ErrorIs(t, r.err, semaphore.ErrClosed)
	assert.Equal(t, 0, fake.Pending())
}

func TestReorderHoldConfig(t *testing.T) {
	assert.ErrorIs(t, keyedsem.Validate(keyedsem.WithReorderHold(time.Second)), semaphore.ErrInvalidConfig, "without WithSequenceOrder")
	assert.ErrorIs(t, keyedsem.Validate(keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(0)), semaphore.ErrInvalidConfig, "0")
	assert.ErrorIs(t, keyedsem.Validate(keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(-1)), semaphore.ErrInvalidConfig, "negative")
	assert.NoError(t, keyedsem.Validate(keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Second)))
	// Idle timeout 0 drops a key's last number with its entry at every
	// release, so the hold would let a later number go whenever the key
	// was free (accepted before; a new user's trial ran message 3 right
	// after 1 under a one-hour hold).
	assert.ErrorIs(t, keyedsem.Validate(keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Hour), keyedsem.WithIdleTimeout(0)),
		semaphore.ErrInvalidConfig, "with idle timeout 0")
}

func TestReorderHoldTryAcquire(t *testing.T) {
	s, _ := newHeld(t)
	numbered(t, s, "k", 1).Release()
	_, ok := s.TryAcquire("k", semaphore.Sequence(3))
	assert.False(t, ok, "a try of a held number took the key")
	p, ok := s.TryAcquire("k", semaphore.Sequence(2))
	require.True(t, ok, "a try of the next number")
	p.Release()
	p, ok = s.TryAcquire("k", semaphore.Sequence(3)) // 2 was granted
	require.True(t, ok, "a try of the number after it")
	p.Release()
	numbered(t, s, "k", 4).Release()
}

// Numbered messages that arrive at once in any order run in number order
// when none is missing: each waits for its predecessor, whether the key
// is free or busy when it comes.
func TestReorderHoldConcurrentArrivals(t *testing.T) {
	const n = 64
	s := keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Hour))
	t.Cleanup(s.Close)
	for _, key := range []string{"a", "b"} { // two keys, served side by side
		numbered(t, s, key, 1).Release()
	}
	var mu sync.Mutex
	ran := map[string][]int64{}
	var wg sync.WaitGroup
	for _, key := range []string{"a", "b"} {
		for _, seq := range rand.Perm(n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := s.Acquire(bg, key, semaphore.Sequence(int64(seq)+2))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ran[key] = append(ran[key], int64(seq)+2)
				mu.Unlock()
				p.Release()
			}()
		}
	}
	testkit.WaitAll(t, &wg, "every message")
	for _, key := range []string{"a", "b"} {
		want := make([]int64, n)
		for i := range want {
			want[i] = int64(i) + 2
		}
		assert.Equal(t, want, ran[key], "key %s", key)
	}
	assert.Equal(t, uint64(0), s.Stats().HoldsRunOut)
}

// TestReorderHoldEdgesOfTheNumbers: 0 is no number, so -1 then 1 is no
// gap; a key that granted math.MinInt64 still knows it granted a number.
func TestReorderHoldEdgesOfTheNumbers(t *testing.T) {
	s, fake := newHeld(t)
	numbered(t, s, "a", -1).Release()
	numbered(t, s, "a", 1).Release() // not held: nothing is missing between -1 and 1
	numbered(t, s, "b", math.MinInt64).Release()
	r := goNumbered(t, s, fake, bg, "b", math.MinInt64+5, 1, 1) // 4 numbers missing: held
	assertHeld(t, s, 1)
	fake.Advance(holdBound)
	got := testkit.Recv(t, r, "the held message after the bound")
	require.NoError(t, got.err)
	got.p.Release()
}
