package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

var bg = context.Background()

// waitForWaiters spins until s has exactly n waiters.
func waitForWaiters[K comparable](s *keyedsem.KeyedSemaphore[K], n int) {
	deadline := time.Now().Add(hangGuard)
	for s.Stats().Waiters != n {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("waited %v for %d waiters; there are %d", hangGuard, n, s.Stats().Waiters))
		}
		runtime.Gosched()
	}
}

type result struct {
	p   keyedsem.Permit
	err error
}

// goAcquire starts AcquireN in a goroutine and returns where its result
// will come.
func goAcquire[K comparable](s *keyedsem.KeyedSemaphore[K], ctx context.Context, key K, n int64) <-chan result {
	c := make(chan result, 1)
	go func() {
		p, err := s.AcquireN(ctx, key, n)
		c <- result{p, err}
	}()
	return c
}

// queue starts an acquire and waits until it is queued (s had want-1
// waiters before).
func queue[K comparable](t *testing.T, s *keyedsem.KeyedSemaphore[K], ctx context.Context, key K, n int64, want int) <-chan result {
	t.Helper()
	c := goAcquire(s, ctx, key, n)
	waitForWaiters(s, want)
	return c
}

func newFake() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

// The layout that keeps an idle key smaller than an x/sync semaphore: an
// entry is five words with a string key (a 48-byte size class), with no
// token inside; a token fits in a cache line.
func TestLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("layout pinned on 64-bit platforms")
	}
	assert.Equal(t, uintptr(40), keyedsem.EntrySizeString, "entry[string] size")
	assert.Equal(t, uintptr(56), keyedsem.TokenSize, "token size")
}

func TestSameKeyServedInArrivalOrder(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	p, err := s.Acquire(bg, "thread-1")
	require.NoError(t, err)

	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		c := queue(t, s, bg, "thread-1", 1, i+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := <-c
			if r.err != nil {
				t.Error(r.err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			r.p.Release() // hands the key to the next in line
		}()
	}
	require.True(t, p.Release())
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	assert.Equal(t, 0, s.Stats().Waiters)
}

// A holder of key A never delays key B: B is granted without waiting while
// A is held and has a queue. A watchdog cancels B's acquire if it ever
// queues, so a B that waits fails the test instead of hanging it.
func TestHolderOfOneKeyNeverDelaysAnother(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxKeys(1))
	defer s.Close()
	pa, err := s.Acquire(bg, "A")
	require.NoError(t, err)
	wa := queue(t, s, bg, "A", 1, 1)

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s.Stats().Waiters > 1 {
				cancel()
				return
			}
			runtime.Gosched()
		}
	}()
	pb, err := s.Acquire(ctx, "B")
	close(stop)
	<-watched
	require.NoError(t, err, "B waited for A")
	assert.Equal(t, 2, s.Len(), "busy entries may exceed the soft cap")

	pc, ok := s.TryAcquire("C")
	require.True(t, ok, "TryAcquire of a third key while A is held")
	pc.Release()
	pb.Release()
	pa.Release()
	r := <-wa
	require.NoError(t, r.err)
	r.p.Release()
}

// A heavy request at the head of a key's queue is not overtaken by later
// lighter ones, nor by TryAcquire.
func TestHeavyRequestIsNotOvertaken(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(3))
	defer s.Close()
	p, err := s.AcquireN(bg, "k", 2)
	require.NoError(t, err)
	heavy := queue(t, s, bg, "k", 3, 1)
	light := queue(t, s, bg, "k", 1, 2)
	_, ok := s.TryAcquireN("k", 1)
	assert.False(t, ok, "TryAcquire overtook a waiter")
	assert.Equal(t, int64(2), s.Stats().Held)

	p.Release()
	rh := <-heavy
	require.NoError(t, rh.err)
	assert.Equal(t, int64(3), rh.p.Weight())
	waitForWaiters(s, 1)
	rh.p.Release()
	rl := <-light
	require.NoError(t, rl.err)
	rl.p.Release()
}

func TestCancelWhileWaitingLeavesTheQueue(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	ctx1, cancel1 := context.WithCancel(bg)
	w1 := queue(t, s, ctx1, "k", 1, 1)
	w2 := queue(t, s, bg, "k", 1, 2)

	cancel1()
	r1 := <-w1
	assert.ErrorIs(t, r1.err, context.Canceled)
	assert.False(t, r1.p.Valid(), "a failed acquire returns the zero Permit")
	waitForWaiters(s, 1)
	st := s.Stats()
	assert.Equal(t, uint64(1), st.Cancelled)
	assert.Equal(t, uint64(0), st.Released, "a cancelled waiter released something")

	p.Release()
	r2 := <-w2
	require.NoError(t, r2.err, "the waiter behind a cancelled one is served")
	r2.p.Release()
	assert.Equal(t, 0, s.Len())
}

// When the head waiter leaves, the ones behind it that fit are served at
// once.
func TestCancelledHeadServesTheNext(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(2))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	heavy := queue(t, s, ctx, "k", 2, 1)
	light := queue(t, s, bg, "k", 1, 2)
	cancel()
	assert.ErrorIs(t, (<-heavy).err, context.Canceled)
	rl := <-light
	require.NoError(t, rl.err)
	rl.p.Release()
	p.Release()
}

func TestContextAlreadyDoneFailsFast(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := s.Acquire(ctx, "free")
	assert.ErrorIs(t, err, context.Canceled)
	dctx, dcancel := context.WithDeadline(bg, time.Unix(0, 0))
	defer dcancel()
	_, err = s.AcquireN(dctx, "free", 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 0, s.Len(), "a done context made an entry")
	st := s.Stats()
	assert.Equal(t, uint64(2), st.Cancelled)
	assert.Equal(t, uint64(0), st.Acquired)
}

// The grant and the cancellation of a waiter race: whichever wins, the
// permit is owned by exactly one side. If Acquire returned nil, the caller
// owns it and its Release is the first; otherwise the key is free again.
func TestGrantRacingCancelHasOneOwner(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	defer s.Close()
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	won := 0
	for i := range iters {
		p, err := s.Acquire(bg, "k")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(bg)
		w := queue(t, s, ctx, "k", 1, 1)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); p.Release() }()
		go func() { defer wg.Done(); cancel() }()
		r := <-w
		wg.Wait()
		if r.err == nil {
			won++
			require.True(t, r.p.Release(), "iteration %d: the winner's permit was not its own", i)
		} else {
			require.ErrorIs(t, r.err, context.Canceled)
			require.False(t, r.p.Valid())
		}
		st := s.Stats()
		require.Equal(t, int64(0), st.Held, "iteration %d", i)
		require.Equal(t, st.Acquired, st.Released, "iteration %d", i)
		require.Equal(t, 0, s.Len(), "iteration %d", i)
	}
	t.Logf("grant won %d of %d races", won, iters)
	assert.Equal(t, uint64(0), s.Stats().DoubleReleases)
}

func TestDoubleAndStaleReleasesAreCountedAndHarmless(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	cp := p
	assert.True(t, p.Release())
	assert.False(t, p.Release(), "second release")
	assert.False(t, cp.Release(), "release through a copy")

	// The token of p is likely reused for q; p's copy must not free q.
	q, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	assert.False(t, cp.Release(), "stale copy after a re-grant")
	_, ok := s.TryAcquire("k")
	assert.False(t, ok, "a stale release freed the new holder's permit")
	assert.True(t, q.Release())
	st := s.Stats()
	assert.Equal(t, uint64(3), st.DoubleReleases)
	assert.Equal(t, uint64(2), st.Released)
	assert.Equal(t, int64(0), st.Held)
	assert.False(t, keyedsem.Permit{}.Release(), "zero Permit")
}

func TestBadInputFailsAtOnce(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(2), keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys())
	for _, c := range []struct {
		name string
		n    int64
		want error
	}{
		{"zero", 0, semaphore.ErrInvalidWeight},
		{"negative", -1, semaphore.ErrInvalidWeight},
		{"above per-key capacity", 3, semaphore.ErrTooHeavy},
	} {
		_, err := s.AcquireN(bg, "k", c.n)
		assert.ErrorIs(t, err, c.want, c.name)
		_, ok := s.TryAcquireN("k", c.n)
		assert.False(t, ok, c.name)
	}
	p, err := s.Acquire(bg, "held")
	require.NoError(t, err)
	_, err = s.Acquire(bg, "other")
	assert.ErrorIs(t, err, keyedsem.ErrTooManyKeys, "hard cap")
	_, ok := s.TryAcquire("other")
	assert.False(t, ok, "hard cap")

	s.Close()
	_, err = s.Acquire(bg, "held")
	assert.ErrorIs(t, err, keyedsem.ErrClosed)
	_, ok = s.TryAcquire("held")
	assert.False(t, ok, "closed")
	assert.True(t, p.Release(), "a release after Close")
	assert.Equal(t, uint64(5), s.Stats().Rejected)
	assert.Same(t, semaphore.ErrClosed, keyedsem.ErrClosed, "one sentinel, shared by every package")
}

func TestMisuseAndBadOptionsPanic(t *testing.T) {
	panicsWithPrefix := func(name string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if err, ok := r.(error); ok { // a bad option panics with Validate's error
				assert.ErrorIs(t, err, keyedsem.ErrInvalidConfig, name)
				r = err.Error()
			}
			if s, ok := r.(string); !ok || !strings.HasPrefix(s, "keyedsem: ") {
				t.Errorf("%s: panic %v, want a keyedsem: message", name, r)
			}
		}()
		f()
	}
	s := keyedsem.New[string]()
	defer s.Close()
	//lint:ignore SA1012 the nil context is the point
	panicsWithPrefix("nil ctx", func() { s.Acquire(nil, "k") })
	panicsWithPrefix("capacity 0", func() { keyedsem.New[int](keyedsem.WithPerKeyCapacity(0)) })
	panicsWithPrefix("capacity too big", func() { keyedsem.New[int](keyedsem.WithPerKeyCapacity(keyedsem.MaxPerKeyCapacity + 1)) })
	panicsWithPrefix("negative idle", func() { keyedsem.New[int](keyedsem.WithIdleTimeout(-1)) })
	panicsWithPrefix("max keys 0", func() { keyedsem.New[int](keyedsem.WithMaxKeys(0)) })
}

func TestHardMaxKeysEvictsIdleBeforeRefusing(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(2), keyedsem.WithHardMaxKeys(), keyedsem.WithClock(clk))
	defer s.Close()
	a, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	b, err := s.Acquire(bg, "b")
	require.NoError(t, err)
	_, err = s.Acquire(bg, "c")
	require.ErrorIs(t, err, keyedsem.ErrTooManyKeys)
	assert.Equal(t, 2, s.Len())

	b.Release() // b idle: may be evicted to make room
	c, err := s.Acquire(bg, "c")
	require.NoError(t, err)
	assert.False(t, keyedsem.Has(s, "b"))
	assert.LessOrEqual(t, s.Len(), 2)
	a.Release()
	c.Release()
	assert.Equal(t, uint64(1), s.Stats().Rejected)
}

func TestMaxWaitersPerKey(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	w := queue(t, s, bg, "k", 1, 1)
	_, err = s.Acquire(bg, "k")
	assert.ErrorIs(t, err, keyedsem.ErrQueueFull)
	q, err := s.Acquire(bg, "other") // the bound is per key
	require.NoError(t, err)
	q.Release()
	p.Release()
	r := <-w
	require.NoError(t, r.err)
	r.p.Release()
}

func TestCloseWakesWaitersAndRefusesLater(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	pa, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	pb, err := s.Acquire(bg, "b")
	require.NoError(t, err)
	wa := queue(t, s, bg, "a", 1, 1)
	wb := queue(t, s, bg, "b", 1, 2)
	wb2 := queue(t, s, bg, "b", 1, 3)

	s.Close()
	s.Close() // idempotent
	for _, w := range []<-chan result{wa, wb, wb2} {
		assert.ErrorIs(t, (<-w).err, keyedsem.ErrClosed)
	}
	_, err = s.Acquire(bg, "c")
	assert.ErrorIs(t, err, keyedsem.ErrClosed)
	st := s.Stats()
	assert.True(t, st.Closed)
	assert.Equal(t, 0, st.Waiters)
	assert.Equal(t, int64(2), st.Held, "holders keep their permits")
	assert.True(t, pa.Release())
	assert.True(t, pb.Release())
	assert.Equal(t, 0, s.Len(), "releases after Close still drop entries")
}

func TestIdleEntriesExpireAfterTheTimeout(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	p.Release()
	assert.Equal(t, 1, s.Len(), "idle entry kept")

	clk.Advance(time.Minute - time.Nanosecond)
	assert.Equal(t, 0, s.Sweep(), "evicted before the timeout")
	clk.Advance(time.Nanosecond)
	assert.Equal(t, 1, s.Sweep())
	assert.Equal(t, 0, s.Len())
	assert.Equal(t, uint64(1), s.Stats().Evicted)
}

// An entry with a holder survives any Sweep, however long it is held; its
// idle time starts at the release.
func TestHeldEntrySurvivesSweep(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	w := queue(t, s, bg, "k", 1, 1)
	clk.Advance(time.Hour)
	assert.Equal(t, 0, s.Sweep())
	assert.Equal(t, 1, s.Len())
	p.Release()
	r := <-w
	require.NoError(t, r.err)
	clk.Advance(time.Hour)
	assert.Equal(t, 0, s.Sweep())
	_, ok := s.TryAcquire("k")
	assert.False(t, ok, "the entry of a held key was replaced")
	r.p.Release()
	clk.Advance(time.Minute - 1)
	assert.Equal(t, 0, s.Sweep(), "idle time counted from before the release")
	clk.Advance(1)
	assert.Equal(t, 1, s.Sweep())
}

func TestSoftCapEvictsTheOldestIdleFirst(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range 8 {
		p, err := s.Acquire(bg, fmt.Sprint("k", i))
		require.NoError(t, err)
		clk.Advance(time.Second)
		p.Release()
	}
	// Reuse k0, so that it is no longer the oldest.
	p, err := s.Acquire(bg, "k0")
	require.NoError(t, err)
	clk.Advance(time.Second)
	p.Release()

	held, err := s.Acquire(bg, "k8") // 9 > 8: down to 8 - 8/4 = 6
	require.NoError(t, err)
	assert.Equal(t, 6, s.Len())
	for i, want := range []bool{true, false, false, false, true, true, true, true, true} {
		assert.Equal(t, want, keyedsem.Has(s, fmt.Sprint("k", i)), "k%d", i)
	}
	held.Release()
	assert.Equal(t, uint64(3), s.Stats().Evicted)
}

// Entries in use may exceed the soft cap; once they are released, the next
// new key brings the count back under it.
func TestSoftCapLetsBusyEntriesExceedIt(t *testing.T) {
	s := keyedsem.New[int](keyedsem.WithMaxKeys(2))
	defer s.Close()
	var ps []keyedsem.Permit
	for i := range 5 {
		p, err := s.Acquire(bg, i)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	assert.Equal(t, 5, s.Len())
	for _, p := range ps {
		p.Release()
	}
	p, err := s.Acquire(bg, 99)
	require.NoError(t, err)
	assert.LessOrEqual(t, s.Len(), 2)
	assert.True(t, keyedsem.Has(s, 99))
	p.Release()
}

// Memory stays bounded over 100k distinct keys: the entry count never goes
// above the cap plus the entries in use, at any step; the idle ones expire
// after the timeout. (20k keys under the race detector, or with -short:
// still twenty times the cap.)
func TestMemoryBoundedOverManyKeys(t *testing.T) {
	const maxKeys, pinned = 1000, 10
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 20_000
	}
	clk := newFake()
	s := keyedsem.New[int](keyedsem.WithMaxKeys(maxKeys), keyedsem.WithIdleTimeout(time.Hour), keyedsem.WithClock(clk))
	defer s.Close()
	var pins []keyedsem.Permit
	for i := range pinned {
		p, err := s.Acquire(bg, -1-i)
		require.NoError(t, err)
		pins = append(pins, p)
	}
	peak := 0
	for i := range n {
		if i%1000 == 0 {
			clk.Advance(time.Second)
		}
		p, err := s.Acquire(bg, i)
		require.NoError(t, err)
		if l := s.Len(); l > maxKeys+pinned+1 {
			t.Fatalf("step %d: %d entries, cap %d + %d in use", i, l, maxKeys, pinned+1)
		}
		p.Release()
		peak = max(peak, s.Len())
	}
	t.Logf("peak entries %d", peak)
	assert.LessOrEqual(t, s.Len(), maxKeys+pinned)
	clk.Advance(time.Hour)
	s.Sweep()
	assert.Equal(t, pinned, s.Len(), "only the entries in use are left")
	for _, p := range pins {
		p.Release()
	}
	clk.Advance(time.Hour)
	s.Sweep()
	assert.Equal(t, 0, s.Len())
	st := s.Stats()
	assert.Equal(t, st.Created, st.Evicted)
}

func TestDoReleasesOnReturnAndPanic(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	boom := errors.New("boom")
	assert.ErrorIs(t, s.Do(bg, "k", func(context.Context) error { return boom }), boom)
	func() {
		defer func() { assert.Equal(t, "fn panicked", recover()) }()
		_ = s.Do(bg, "k", func(context.Context) error { panic("fn panicked") })
	}()
	assert.Equal(t, int64(0), s.Stats().Held, "Do kept the permit after fn")

	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		done <- s.Do(ctx, "k", func(context.Context) error {
			t.Error("fn ran although the acquire was cancelled")
			return nil
		})
	}()
	waitForWaiters(s, 1)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	p.Release()
}

func TestStatsAddUp(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(3))
	defer s.Close()
	a, _ := s.AcquireN(bg, "a", 2)
	b, _ := s.AcquireN(bg, "b", 3)
	c, _ := s.TryAcquireN("a", 1)
	w := queue(t, s, bg, "b", 2, 1)
	st := s.Stats()
	assert.Equal(t, keyedsem.Stats{
		Keys: 2, Capacity: 3, Held: 6, Waiters: 1, Counters: semaphore.Counters{Acquired: 3}, Created: 2,
	}, st)
	b.Release()
	r := <-w
	require.NoError(t, r.err)
	a.Release()
	c.Release()
	r.p.Release()
	st = s.Stats()
	assert.Equal(t, keyedsem.Stats{Keys: 2, Capacity: 3, Counters: semaphore.Counters{Acquired: 4, Released: 4, Waited: 1}, Created: 2}, st)
	assert.Equal(t, int64(3), s.PerKeyCapacity())
}

// Exclusion under constant eviction: many goroutines on few keys, with a
// cap of 2 entries, so that entries are evicted (or dropped, with idle
// timeout 0) and made again all the time, while acquires are cancelled at
// random and Sweep runs at random. An oracle counter per key checks that a
// key's capacity is never exceeded.
func TestExclusionUnderEvictionStress(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int64
		idle     time.Duration
	}{
		{"idle0/capacity1", 1, 0},
		{"idle0/capacity2", 2, 0},
		{"kept/capacity1", 1, time.Millisecond}, // fake time: evicted by Sweep, by the cap and by expiry passes
		{"kept/capacity2", 2, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			const workers, keys = 32, 4
			iters := 400
			if testing.Short() {
				iters = 100
			}
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			clk := newFake()
			s := keyedsem.New[int](
				keyedsem.WithPerKeyCapacity(c.capacity),
				keyedsem.WithIdleTimeout(c.idle),
				keyedsem.WithMaxKeys(2),
				keyedsem.WithClock(clk),
			)
			defer s.Close()
			var held [keys]atomic.Int64
			var over atomic.Int64
			var granted atomic.Int64
			var wg, cancellers sync.WaitGroup
			use := func(key int, p keyedsem.Permit) {
				if h := held[key].Add(p.Weight()); h > c.capacity {
					over.Add(1)
				}
				runtime.Gosched()
				held[key].Add(-p.Weight())
				granted.Add(1)
				if !p.Release() {
					over.Add(1)
				}
			}
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(w)))
					for range iters {
						key := rng.IntN(keys)
						n := 1 + rng.Int64N(c.capacity)
						switch op := rng.IntN(20); {
						case op < 10:
							p, err := s.AcquireN(bg, key, n)
							if err != nil {
								t.Error(err)
								return
							}
							use(key, p)
						case op < 14: // cancelled at a random moment
							ctx, cancel := context.WithCancel(bg)
							cancellers.Add(1)
							go func() {
								defer cancellers.Done()
								runtime.Gosched()
								cancel()
							}()
							p, err := s.AcquireN(ctx, key, n)
							if err == nil {
								use(key, p)
							} else if !errors.Is(err, context.Canceled) {
								t.Error(err)
							}
						case op < 16:
							if p, ok := s.TryAcquireN(key, n); ok {
								use(key, p)
							}
						case op < 17:
							ctx, cancel := context.WithCancel(bg)
							cancel()
							if _, err := s.AcquireN(ctx, key, n); !errors.Is(err, context.Canceled) {
								t.Error("done context:", err)
							}
						case op < 18:
							if err := s.Do(bg, key, func(context.Context) error {
								if h := held[key].Add(1); h > c.capacity {
									over.Add(1)
								}
								runtime.Gosched()
								held[key].Add(-1)
								return nil
							}); err != nil {
								t.Error(err)
							}
						case op < 19:
							s.Sweep()
						default:
							clk.Advance(time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
			cancellers.Wait()
			require.Zero(t, over.Load(), "a key's capacity was exceeded, or a release was refused")
			st := s.Stats()
			assert.Equal(t, int64(0), st.Held)
			assert.Equal(t, 0, st.Waiters)
			assert.Equal(t, st.Acquired, st.Released)
			assert.Equal(t, uint64(0), st.DoubleReleases)
			if c.idle > 0 {
				clk.Advance(c.idle)
				s.Sweep()
			}
			assert.Equal(t, 0, s.Len(), "entries left after the workload settled")
			st = s.Stats()
			assert.Equal(t, st.Created, st.Evicted)
			t.Logf("%d grants, %d entries made, %d cancelled", granted.Load(), st.Created, st.Cancelled)
		})
	}
}

// Tiny scenario run many times: two goroutines churn two keys with idle
// timeout 0, so each entry is dropped and its memory reused for the other
// key while a lookup may still hold a pointer to it. A third holds one key
// across the churn: it must stay exclusive.
func TestReusedEntryIsNotJoinedByTheWrongKey(t *testing.T) {
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for range iters {
		s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
		var wg sync.WaitGroup
		var inX atomic.Int32
		var bad atomic.Bool
		for _, key := range []string{"x", "y", "x"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					p, err := s.Acquire(bg, key)
					if err != nil {
						bad.Store(true)
						return
					}
					if key == "x" && inX.Add(1) > 1 {
						bad.Store(true)
					}
					runtime.Gosched()
					if key == "x" {
						inX.Add(-1)
					}
					p.Release()
				}
			}()
		}
		wg.Wait()
		require.False(t, bad.Load(), "two holders of x at once")
		require.Equal(t, 0, s.Len())
		s.Close()
	}
}

// A lookup that got an entry from the map just before it was dropped and
// reused for another key must not join it: it recognises the entry by its
// key, backs off, and leaves the other key's holder alone.
func TestLookupRecognisesAReusedEntry(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	defer s.Close()
	sawReuse := false
	for range 100 {
		px, err := s.Acquire(bg, "x")
		require.NoError(t, err)
		var py keyedsem.Permit
		stale, reused := keyedsem.JoinAfter(s, "x", func() {
			px.Release()                 // x's entry is dropped and pooled...
			py, err = s.Acquire(bg, "y") // ...and most likely reused for y
			require.NoError(t, err)
		})
		require.True(t, stale, "joined an entry that was dropped (reused for another key: %v)", reused)
		sawReuse = sawReuse || reused
		_, ok := s.TryAcquire("y")
		require.False(t, ok, "the stale join freed y's permit")
		require.Equal(t, int64(1), s.Stats().Held)
		require.True(t, py.Release())
		require.Equal(t, 0, s.Len())
	}
	if !sawReuse {
		t.Log("the pool never handed x's entry to y: only the dead-entry case was checked")
	}
}

// A lookup that got an idle entry from the map just before Sweep evicted
// it backs off, and a real acquire then makes a new entry.
func TestLookupBacksOffFromAnEvictedEntry(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(time.Minute), keyedsem.WithClock(clk))
	defer s.Close()
	p, err := s.Acquire(bg, "x")
	require.NoError(t, err)
	p.Release()
	stale, _ := keyedsem.JoinAfter(s, "x", func() {
		clk.Advance(time.Minute)
		require.Equal(t, 1, s.Sweep())
	})
	require.True(t, stale, "joined an evicted entry")
	require.Equal(t, 0, s.Len())

	p, err = s.Acquire(bg, "x")
	require.NoError(t, err)
	p.Release()
	st := s.Stats()
	assert.Equal(t, uint64(2), st.Created)
	assert.Equal(t, uint64(1), st.Evicted)
	assert.Equal(t, 1, st.Keys)
}
