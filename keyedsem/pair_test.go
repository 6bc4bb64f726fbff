package keyedsem_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
)

// With idle timeout 0 and capacity 1 an entry carries its own token (a
// pair). A permit of a key whose entry was dropped and reused for another
// key holds the reused entry's token: its second Release must find the
// generation moved on, free nothing and count a double release, however
// the token is now in use.
func TestPairedStalePermitFreesNothing(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	defer s.Close()
	require.True(t, keyedsem.Paired(s))
	reused, tries := false, uint64(0)
	for ; tries < 100 && !reused; tries++ { // the pool may hand out another pair (a collection empties it)
		p, err := s.Acquire(bg, "a")
		require.NoError(t, err)
		require.True(t, p.Release())
		q, err := s.Acquire(bg, "b")
		require.NoError(t, err)
		reused = keyedsem.SameToken(p, q)
		assert.False(t, p.Release(), "a stale permit released again")
		_, ok := s.TryAcquire("b")
		assert.False(t, ok, "b is held, yet free after a's stale release")
		require.True(t, q.Release())
	}
	require.True(t, reused, "no pair was reused: the test saw nothing")
	st := s.Stats()
	assert.Equal(t, st.Acquired, st.Released)
	assert.Equal(t, tries, st.DoubleReleases, "double releases")
	assert.Zero(t, st.Keys)
	assert.Equal(t, st.Created, st.Evicted)
}

// Goroutines churn a few keys of a paired semaphore, each entry made and
// dropped over and over and its pair reused across keys, some calls
// waiting: each key stays exclusive, and once they are done every permit
// was released once and every entry made was dropped.
func TestPairedChurnKeepsExclusionAndCounts(t *testing.T) {
	for _, knob := range []string{"pair", "nopair"} {
		t.Run(knob, func(t *testing.T) {
			s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
			defer s.Close()
			if knob == "nopair" {
				keyedsem.NoPair(s)
			}
			keys := []string{"k0", "k1", "k2"}
			// One call waits on each key first, for sure: the churn below
			// waits only when the scheduler lets it (a stress run of ten
			// once saw no wait at all), and the queued path must run.
			for _, k := range keys {
				held, err := s.Acquire(bg, k)
				require.NoError(t, err)
				waited := testkit.Go(func() error {
					p, err := s.Acquire(bg, k)
					if err == nil {
						p.Release()
					}
					return err
				})
				testkit.Eventually(t, "a waiter on "+k, func() bool { return s.Stats().Waiters == 1 })
				held.Release()
				require.NoError(t, testkit.Recv(t, waited, "the waiter on "+k))
			}
			var in [3]atomic.Int32
			var bad atomic.Value
			var wg sync.WaitGroup
			const goroutines, rounds = 6, 300
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range rounds {
						k := (g + r) % len(keys)
						p, err := s.Acquire(bg, keys[k])
						if err != nil {
							bad.Store(err.Error())
							return
						}
						if in[k].Add(1) != 1 {
							bad.Store(fmt.Sprintf("two holders of %s", keys[k]))
						}
						runtime.Gosched()
						in[k].Add(-1)
						if !p.Release() {
							bad.Store("a first Release returned false")
						}
					}
				}()
			}
			testkit.WaitAll(t, &wg, "the churning goroutines")
			require.Nil(t, bad.Load())
			st := s.Stats()
			assert.Equal(t, uint64(goroutines*rounds+2*len(keys)), st.Acquired)
			assert.Equal(t, st.Acquired, st.Released)
			assert.Zero(t, st.DoubleReleases)
			assert.Zero(t, st.Held)
			assert.Zero(t, st.Keys)
			assert.Equal(t, st.Created, st.Evicted)
			assert.Positive(t, st.Waited, "no call waited: the queued path was not run")
		})
	}
}

// A key of capacity 2 can have two permits out, which one token cannot
// tell apart: such a semaphore takes its tokens from the pool, and each
// permit is released once.
func TestTwoPermitsOfAKeyHaveTwoTokens(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0), keyedsem.WithPerKeyCapacity(2))
	defer s.Close()
	assert.False(t, keyedsem.Paired(s))
	p, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	q, err := s.Acquire(bg, "a")
	require.NoError(t, err)
	assert.False(t, keyedsem.SameToken(p, q))
	assert.True(t, p.Release())
	assert.True(t, q.Release())
	st := s.Stats()
	assert.Zero(t, st.DoubleReleases)
	assert.Zero(t, st.Keys)
	assert.Equal(t, st.Acquired, st.Released)
}

// Only a semaphore whose entries are never idle makes pairs: an idle
// entry keeps its 48 bytes, without a token's 64.
func TestOnlyIdleZeroCapacityOneIsPaired(t *testing.T) {
	for _, c := range []struct {
		opts   []keyedsem.Option
		paired bool
	}{
		{nil, false},
		{[]keyedsem.Option{keyedsem.WithIdleTimeout(0)}, true},
		{[]keyedsem.Option{keyedsem.WithIdleTimeout(0), keyedsem.WithHardMaxKeys()}, true},
		{[]keyedsem.Option{keyedsem.WithIdleTimeout(0), keyedsem.WithPerKeyCapacity(2)}, false},
		{[]keyedsem.Option{keyedsem.WithIdleTimeout(1)}, false},
	} {
		s := keyedsem.New[string](c.opts...)
		assert.Equal(t, c.paired, keyedsem.Paired(s), "%d options", len(c.opts))
		s.Close()
	}
}
