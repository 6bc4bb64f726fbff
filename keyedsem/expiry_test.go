package keyedsem_test

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// use acquires and releases key once.
func use[K comparable](t *testing.T, s *keyedsem.Keyed[K], key K) {
	t.Helper()
	p, err := s.Acquire(bg, key)
	require.NoError(t, err)
	require.True(t, p.Release())
}

// withinSoftCap checks the soft cap's documented bound: the entries may
// exceed the cap only by entries in use (held counts them).
func withinSoftCap[K comparable](t *testing.T, s *keyedsem.Keyed[K], maxKeys, held int, what string) {
	t.Helper()
	require.LessOrEqual(t, s.Len(), max(maxKeys, held), "%s: idle entries over the soft cap", what)
}

// Regression (issue 11, defect 4): keys made while a Sweep held the
// eviction lock skipped eviction, and idle entries stayed over the soft
// cap until the next new key. Now the pass they are owed runs when the
// lock is given back, and a key released over the cap does not stay.
func TestSoftCapHoldsAfterKeysMadeDuringSweep(t *testing.T) {
	const maxKeys = 4
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(maxKeys), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range maxKeys {
		use(t, s, fmt.Sprint("old", i))
		clk.Advance(time.Second)
	}
	unlock := keyedsem.HoldEvictLock(s) // a Sweep is running
	a, ok := s.TryAcquire("new-a")
	require.True(t, ok)
	b, ok := s.TryAcquire("new-b")
	require.True(t, ok)
	use(t, s, "new-c")                                   // made and released over the cap while the pass runs
	withinSoftCap(t, s, maxKeys+2, 2, "during the pass") // the 2 held ones over the cap wait for the lock
	unlock()
	withinSoftCap(t, s, maxKeys, 2, "after the pass")
	require.True(t, keyedsem.Has(s, "new-a"))
	require.True(t, keyedsem.Has(s, "new-b"))
	require.True(t, a.Release())
	require.True(t, b.Release())
	withinSoftCap(t, s, maxKeys, 0, "after the releases")
}

// Regression (issue 11, defect 4): after a pass found every entry over the
// soft cap busy, those entries stayed over the cap once released, and new
// keys skipped eviction until the count grew by an eighth.
func TestSoftCapHoldsAfterABusyBurst(t *testing.T) {
	const maxKeys, burst = 4, 12
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(maxKeys), keyedsem.WithClock(clk))
	defer s.Close()
	var held []semaphore.Permit
	for i := range burst {
		p, ok := s.TryAcquire(fmt.Sprint("busy", i))
		require.True(t, ok)
		held = append(held, p)
		clk.Advance(time.Second)
	}
	require.Equal(t, burst, s.Len(), "entries in use may exceed the cap")
	for i, p := range held {
		require.True(t, p.Release())
		withinSoftCap(t, s, maxKeys, burst-1-i, fmt.Sprintf("after %d releases", i+1))
	}
	// All idle now: new keys keep the count within the cap.
	for i := range 3 {
		p, ok := s.TryAcquire(fmt.Sprint("later", i))
		require.True(t, ok)
		withinSoftCap(t, s, maxKeys, 1, "a new key after the burst")
		require.True(t, p.Release())
	}
	st := s.Stats()
	require.Equal(t, st.Created-st.Evicted, uint64(s.Len()))
}

// Regression (issue 11, defect 5): idle entries expire by normal use of
// the semaphore, without anyone calling Sweep. Before, they stayed until
// a Sweep, or until the soft cap pushed them out.
func TestIdleEntriesExpireWithoutSweep(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	for _, k := range []string{"a", "b", "c"} {
		use(t, s, k)
	}
	use(t, s, "busy")
	clk.Advance(time.Minute / 2)
	use(t, s, "busy")
	require.Equal(t, 4, s.Len(), "nothing expires before the timeout")
	clk.Advance(time.Minute / 2)
	use(t, s, "busy") // a release of another, known key
	for _, k := range []string{"a", "b", "c"} {
		require.False(t, keyedsem.Has(s, k), "%s idle for the timeout is still there", k)
	}
	require.True(t, keyedsem.Has(s, "busy"))
	require.Equal(t, uint64(3), s.Stats().Evicted)

	use(t, s, "d")
	clk.Advance(2 * time.Minute)
	use(t, s, "e") // a new key
	require.False(t, keyedsem.Has(s, "d"))
	require.False(t, keyedsem.Has(s, "busy"))
	require.Equal(t, 1, s.Len())
}

// The expiry is amortised: at the same instant, many operations run one
// pass between them, and the next pass waits for an entry to be due (or
// for at least an eighth of the timeout).
func TestExpiryPassesAreAmortised(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[int](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range 100 {
		use(t, s, i)
	}
	require.Equal(t, uint64(0), keyedsem.Passes(s), "no entry was due")
	clk.Advance(time.Minute)
	for i := range 1000 {
		use(t, s, 1000+i%10)
	}
	require.Equal(t, uint64(1), keyedsem.Passes(s))
	require.Equal(t, 10, s.Len())
	// The 10 entries left went idle just now: no pass until they are due.
	clk.Advance(time.Minute - time.Nanosecond)
	for range 1000 {
		use(t, s, 1000)
	}
	require.Equal(t, uint64(1), keyedsem.Passes(s))
	clk.Advance(time.Nanosecond)
	use(t, s, 1000)
	require.Equal(t, uint64(2), keyedsem.Passes(s))
	require.Equal(t, 1, s.Len())
}

// An idle timeout near the largest Duration does not overflow the next
// due time into the past: no pass runs, and nothing is evicted.
func TestHugeIdleTimeoutNeverExpires(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[int](keyedsem.WithIdleTimeout(math.MaxInt64), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range 10 {
		use(t, s, i)
		clk.Advance(time.Hour * 24 * 365)
	}
	require.Equal(t, 0, s.Sweep())
	for i := range 10 {
		use(t, s, i)
	}
	require.Equal(t, 10, s.Len())
	require.Equal(t, uint64(1), keyedsem.Passes(s), "only the Sweep")
}

// With WithJanitor, idle entries expire also while nobody uses the
// semaphore; Close stops the janitor (goleak checks it in TestMain).
func TestJanitorExpiresEntriesOfAnUnusedSemaphore(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk),
		keyedsem.WithJanitor(time.Millisecond))
	use(t, s, "a")
	use(t, s, "b")
	p, err := s.Acquire(bg, "held")
	require.NoError(t, err)
	clk.Advance(time.Minute)
	deadline := time.Now().Add(hangGuard)
	for s.Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the janitor left %d entries, want 1 (the held one)", s.Len())
		}
		runtime.Gosched() // the janitor ticks on the system clock
	}
	require.True(t, keyedsem.Has(s, "held"))
	require.Equal(t, uint64(2), s.Stats().Evicted)
	require.True(t, p.Release())
	s.Close()
	s.Close() // idempotent
	require.Panics(t, func() { keyedsem.New[int](keyedsem.WithJanitor(-time.Second)) })
	// 0 and a nanosecond were taken: "no janitor" in silence, and a ticker
	// that keeps a core busy (a new user's trial).
	require.Panics(t, func() { keyedsem.New[int](keyedsem.WithJanitor(0)) })
	require.Panics(t, func() { keyedsem.New[int](keyedsem.WithJanitor(time.Nanosecond)) })
	keyedsem.New[int](keyedsem.WithJanitor(time.Second), keyedsem.WithIdleTimeout(0)).Close() // nothing to expire: no goroutine
}

// Under concurrent use with a small soft cap, bursts of held keys and
// Sweeps running meanwhile, the bound holds once everything is released:
// at most the cap of entries, all idle. Before, idle entries stayed over
// the cap after a pass found everything busy, or after keys were made
// during a Sweep.
func TestSoftCapBoundAfterConcurrentUseRace(t *testing.T) {
	const maxKeys, workers = 8, 4
	rounds := 200
	if raceEnabled {
		rounds = 60
	}
	for round := range rounds {
		s := keyedsem.New[int](keyedsem.WithMaxKeys(maxKeys))
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				held := make([]semaphore.Permit, 0, 8)
				for i := range 40 {
					if p, ok := s.TryAcquire((w*40 + i*7) % 48); ok {
						held = append(held, p)
					}
					if len(held) == cap(held) || i%5 == 4 {
						for _, p := range held {
							p.Release()
						}
						held = held[:0]
					}
					if w == 0 && i%13 == 0 {
						s.Sweep()
					}
				}
				for _, p := range held {
					p.Release()
				}
				// A closing burst: keys of its own, held at once, then
				// released (the old code's passes found them all busy).
				for i := range 2 * maxKeys {
					if p, ok := s.TryAcquire(100 + w*2*maxKeys + i); ok {
						held = append(held, p)
					}
				}
				for _, p := range held {
					p.Release()
				}
			}()
		}
		testkit.WaitAll(t, &wg, "the workers")
		st := s.Stats()
		require.Equal(t, int64(0), st.Held)
		require.LessOrEqual(t, s.Len(), maxKeys, "round %d: idle entries over the soft cap", round)
		require.Equal(t, st.Created-st.Evicted, uint64(s.Len()), "round %d", round)
		s.Close()
	}
}

// After Close, releases evict nothing, also over the soft cap and with an
// expiry due (found by TestKeyedMatchesModel: a release after Close ran a
// trim); Sweep still does.
func TestNoEvictionByReleasesAfterClose(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(1), keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	a, ok := s.TryAcquire("a")
	require.True(t, ok)
	b, ok := s.TryAcquire("b") // over the cap; the pass finds nothing idle
	require.True(t, ok)
	s.Close()
	clk.Advance(time.Hour)
	require.True(t, a.Release())
	require.True(t, b.Release())
	require.Equal(t, 2, s.Len())
	require.Equal(t, 2, s.Sweep())
	require.Equal(t, 0, s.Len())
}
