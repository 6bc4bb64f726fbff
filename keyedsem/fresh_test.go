package keyedsem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
)

// A key used once, with nobody joining it, is dropped as it goes idle once
// the entries are at three quarters of the soft cap (8 - 8/4 = 6), but for
// one new entry in sixteen (keepFresh: of the first 20 made, the 13th),
// which is kept so that keys that come back get in; no eviction pass runs
// for the flood.
func TestKeyUsedOnceDroppedOverThreeQuarters(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range 20 { // made 1st..20th
		p, err := s.Acquire(testCtx(t), fmt.Sprint("k", i))
		require.NoError(t, err)
		clk.Advance(time.Second)
		p.Release()
	}
	// k0..k4 went idle under 6 entries: kept. From k5 on each went idle at
	// 6 entries or more: dropped, but for the 13th made (k12).
	for i := range 20 {
		want := i < 5 || i == 12
		assert.Equal(t, want, keyedsem.Has(s, fmt.Sprint("k", i)), "k%d", i)
	}
	assert.Equal(t, 6, s.Len())
	st := s.Stats()
	assert.Equal(t, uint64(20), st.Created)
	assert.Equal(t, uint64(14), st.Evicted)
	assert.Zero(t, keyedsem.Passes(s), "no eviction pass ran: the keys used once went by themselves")
}

// A key whose use overlaps another call's, or that comes back while kept, is
// kept, whatever the count: only a key used once goes.
func TestKeyUsedAgainIsKept(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithPerKeyCapacity(2), keyedsem.WithClock(clk))
	defer s.Close()
	for i := range 6 { // k0..k5: k5 goes idle at 6 entries, used once
		p, err := s.Acquire(testCtx(t), fmt.Sprint("k", i))
		require.NoError(t, err)
		p.Release()
	}
	require.Equal(t, 5, s.Len(), "k5, used once at 6 entries, went")
	// Two holders of a new key at once: the second joined it.
	a, err := s.Acquire(testCtx(t), "both")
	require.NoError(t, err)
	b, err := s.Acquire(testCtx(t), "both")
	require.NoError(t, err)
	a.Release()
	b.Release()
	assert.True(t, keyedsem.Has(s, "both"), "a key two callers held at once is kept")
	// A kept key used again at 6 entries stays.
	p, err := s.Acquire(testCtx(t), "k0")
	require.NoError(t, err)
	p.Release()
	assert.True(t, keyedsem.Has(s, "k0"), "a kept key used again is kept")
	assert.Equal(t, 6, s.Len())
}

// Keys used once are kept, as before, where an idle entry holds what the
// next call needs (WithReorderHold: the key's last number) or where none
// is ever idle (idle timeout 0 drops every entry anyway), and by releases
// after Close (only Sweep evicts then).
func TestKeyUsedOnceKeptWhereItMatters(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk),
		keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Second))
	defer s.Close()
	for i := range 8 {
		p, err := s.Acquire(testCtx(t), fmt.Sprint("k", i))
		require.NoError(t, err)
		p.Release()
	}
	assert.Equal(t, 8, s.Len(), "with a reorder hold every key used once is kept up to the cap")

	c := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	var held []func() bool
	for i := range 8 {
		p, err := c.Acquire(testCtx(t), fmt.Sprint("k", i))
		require.NoError(t, err)
		held = append(held, p.Release)
	}
	c.Close()
	for _, r := range held {
		r()
	}
	assert.Equal(t, 8, c.Len(), "releases after Close evict nothing")
}

// A key that comes back at a fixed period of new keys is made at counts
// in an arithmetic sequence; the pick of the kept ones scrambles the count,
// so such a key is kept after a few periods, not dropped every time (a
// pick by the count's low bits never kept one that came back every 16 new
// keys at a count that is not a multiple of 16).
func TestReturningKeyKeptAtLast(t *testing.T) {
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithMaxKeys(8), keyedsem.WithClock(clk))
	defer s.Close()
	use := func(k string) {
		t.Helper()
		p, err := s.Acquire(testCtx(t), k)
		require.NoError(t, err)
		p.Release()
	}
	for i := range 7 { // made 1st..7th: the entries at three quarters of the cap
		use(fmt.Sprint("warm", i))
	}
	for round := range 16 {
		use("x") // made 8th, 24th, 40th...
		if keyedsem.Has(s, "x") {
			t.Logf("kept at its use %d", round+1)
			return
		}
		for i := range 15 {
			use(fmt.Sprint("once", round, "-", i))
		}
	}
	t.Fatalf("a key used 16 times, once in every 16 new keys, was never kept (%+v)", s.Stats())
}
