package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// A paired semaphore (idle timeout 0, capacity 1) under every way a
// grant can end: released (and released again through a stale copy),
// tried, cancelled while queued (a grant handed back), joined and waited
// or left, with histograms (each grant stamps its token), priorities,
// sequence order and a hard cap (a reorder hold needs idle entries, so it
// takes no idle timeout 0: see WithReorderHold). Each key stays exclusive, no stale
// Release frees anything, and once the calls are done the counts close.
func TestPairedMixedEndingsKeepCounts(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{
		{"fifo", nil},
		{"histograms", []keyedsem.Option{keyedsem.WithHistograms()}},
		{"barging", []keyedsem.Option{keyedsem.WithBarging(0)}},
		{"priorities", []keyedsem.Option{keyedsem.WithPriorities(1000)}},
		{"hardcap", []keyedsem.Option{keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys()}},
		{"sequence", []keyedsem.Option{keyedsem.WithSequenceOrder()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](append([]keyedsem.Option{keyedsem.WithIdleTimeout(0)}, c.opts...)...)
			defer s.Close()
			require.True(t, keyedsem.Paired(s))
			keys := []string{"k0", "k1"}
			var in [2]atomic.Int32
			var bad atomic.Value
			var stale sync.Mutex
			var olds []semaphore.Permit
			var staleTrue atomic.Int64
			var wg sync.WaitGroup
			const goroutines, rounds = 6, 400
			hold := func(k int, p semaphore.Permit) {
				if in[k].Add(1) != 1 {
					bad.Store(fmt.Sprintf("two holders of %s", keys[k]))
				}
				in[k].Add(-1)
				if !p.Release() {
					bad.Store("a first Release returned false")
				}
				stale.Lock()
				olds = append(olds, p)
				if len(olds) > 8 {
					o := olds[0]
					olds = olds[1:]
					stale.Unlock()
					if o.Release() {
						staleTrue.Add(1)
					}
				} else {
					stale.Unlock()
				}
			}
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range rounds {
						k := (g + r) % len(keys)
						switch (g + r) % 4 {
						case 0:
							p, err := s.Acquire(bg, keys[k])
							if errors.Is(err, keyedsem.ErrTooManyKeys) {
								continue // the hard cap's refusal: the other key is in use
							}
							if err != nil {
								bad.Store(err.Error())
								return
							}
							hold(k, p)
						case 1:
							if p, ok := s.TryAcquire(keys[k]); ok {
								hold(k, p)
							}
						case 2:
							ctx, cancel := context.WithCancel(bg)
							go cancel()
							p, err := s.Acquire(ctx, keys[k])
							if err == nil {
								hold(k, p)
							}
							cancel()
						case 3:
							if c.name == "barging" {
								continue
							}
							pl, err := s.Join(keys[k])
							if errors.Is(err, keyedsem.ErrTooManyKeys) {
								continue
							}
							if err != nil {
								bad.Store(err.Error())
								return
							}
							if r%2 == 0 {
								pl.Leave()
								continue
							}
							ctx, cancel := context.WithCancel(bg)
							if r%3 == 0 {
								cancel()
							}
							p, err := pl.Wait(ctx)
							cancel()
							if err == nil {
								hold(k, p)
							}
						}
					}
				}()
			}
			testkit.WaitAll(t, &wg, "the goroutines")
			require.Nil(t, bad.Load())
			assert.Zero(t, staleTrue.Load(), "a stale permit's Release returned true")
			st := s.Stats()
			assert.Equal(t, st.Acquired, st.Released)
			assert.Zero(t, st.Held)
			assert.Zero(t, st.Keys)
			assert.Zero(t, st.Waiters)
			assert.Equal(t, st.Created, st.Evicted)
			for k := range keys {
				p, ok := s.TryAcquire(keys[k])
				require.True(t, ok, "key %s is not free once all is done", keys[k])
				_, ok = s.TryAcquire(keys[k])
				require.False(t, ok, "key %s is free twice", keys[k])
				p.Release()
			}
		})
	}
}
