package keyedsem_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

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
		testkit.WaitAll(t, &wg, "the churning goroutines")
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
		var py semaphore.Permit
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

// A lookup that finds a dead entry still in the map replaces it, and the
// count of entries stays exact (Created - Evicted == Keys) under both caps:
// the new entry takes over the dead one's place in the count, is counted as
// made, and the dead one as evicted when its removal finds it replaced.
func TestReplacedDeadEntryIsCountedOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{{"soft", nil}, {"hard", []keyedsem.Option{keyedsem.WithHardMaxKeys()}}} {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](append(c.opts, keyedsem.WithMaxKeys(4))...)
			defer s.Close()
			p, err := s.Acquire(bg, "x")
			require.NoError(t, err)
			p.Release()
			drop := keyedsem.KillIdle(s, "x")
			p, err = s.Acquire(bg, "x") // replaces the dead entry
			require.NoError(t, err)
			drop() // finds it replaced: removes nothing
			require.True(t, keyedsem.Has(s, "x"))
			assert.Equal(t, 1, s.Len())
			p.Release()
			st := s.Stats()
			assert.Equal(t, uint64(2), st.Created)
			assert.Equal(t, uint64(1), st.Evicted)
			assert.Equal(t, 1, st.Keys)
			for i := range 4 { // the count still binds the cap
				p, err := s.Acquire(bg, fmt.Sprint("k", i))
				require.NoError(t, err)
				p.Release()
			}
			assert.LessOrEqual(t, s.Len(), 4)
		})
	}
}
