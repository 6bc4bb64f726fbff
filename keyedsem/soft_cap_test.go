package keyedsem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// The order of eviction among the keys kept: every key is kept here
// (KeepFresh), as keys that come back are (see TestKeyUsedOnceDropped*).
func TestSoftCapEvictsTheOldestIdleFirst(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	defer s.Close()
	keyedsem.KeepFresh(s)
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
	var ps []semaphore.Permit
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
	var pins []semaphore.Permit
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

// The trims after a pass take the oldest idle entries from what the pass
// kept (its backlog), without a pass of their own, and still in the order
// of idle time: an entry of the backlog used since is not taken for its
// old idle time, and an entry that went idle after the pass comes after
// the backlog's. Every key is kept (KeepFresh), as keys that come back are.
func TestSoftCapTrimsFromTheBacklogOldestFirst(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	defer s.Close()
	keyedsem.KeepFresh(s)
	use := func(key string) {
		t.Helper()
		p, err := s.Acquire(bg, key)
		require.NoError(t, err)
		clk.Advance(time.Second)
		p.Release()
	}
	for i := range 9 { // k0..k8: the ninth key's pass evicts k0..k2, down to 6
		use(fmt.Sprint("k", i))
	}
	require.Equal(t, uint64(1), keyedsem.Passes(s))
	require.Equal(t, 6, s.Len())
	use("k3")  // used since the pass: now the newest idle entry
	use("k9")  // 7 entries
	use("k10") // 8
	use("k11") // 9 > 8: the backlog's oldest, k4, k5 and k6, go; not k3
	assert.Equal(t, uint64(1), keyedsem.Passes(s), "a trim with a backlog runs no pass")
	assert.Equal(t, 6, s.Len())
	for i, want := range []bool{false, false, false, true, false, false, false, true, true, true, true, true} {
		assert.Equal(t, want, keyedsem.Has(s, fmt.Sprint("k", i)), "k%d", i)
	}
	// The backlog has k7 and k8 left, k3's old idle time being stale: the
	// next trim takes those two, then a pass finds the next oldest, k3.
	use("k12")
	use("k13")
	use("k14") // 9 > 8
	assert.Equal(t, uint64(2), keyedsem.Passes(s), "the backlog ran out")
	assert.Equal(t, 6, s.Len())
	for i, want := range []bool{false, false, false, false, false, false, false, false, false, true, true, true, true, true, true} {
		assert.Equal(t, want, keyedsem.Has(s, fmt.Sprint("k", i)), "k%d", i)
	}
	st := s.Stats()
	assert.Equal(t, uint64(9), st.Evicted)
	assert.Equal(t, st.Created-st.Evicted, uint64(s.Len()))
}
