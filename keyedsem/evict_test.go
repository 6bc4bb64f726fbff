package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Regression: when the entries over the soft cap were all in use, every new
// key ran a full eviction pass that found nothing, so a burst of n held
// keys cost n²/2 entry visits (100k held keys took 11 minutes). Passes must
// now grow logarithmically with the burst.
func TestBusyBurstOverSoftCapRunsFewPasses(t *testing.T) {
	const maxKeys, burst = 64, 64 * 40
	s := keyedsem.New[string](keyedsem.WithMaxKeys(maxKeys))
	defer s.Close()
	held := make([]semaphore.Permit, 0, burst)
	for i := range burst {
		p, ok := s.TryAcquire(fmt.Sprintf("burst-%d", i))
		require.True(t, ok)
		held = append(held, p)
	}
	require.Equal(t, burst, s.Len(), "busy entries may exceed the soft cap")
	// From 64 to 2560 keys in steps of an eighth: about 32 passes; one
	// per new key would be about 2500.
	require.LessOrEqual(t, keyedsem.Passes(s), uint64(60))

	for _, p := range held {
		require.True(t, p.Release())
	}
	// Once idle, they are trimmed to the cap by Sweep (or by new keys).
	s.Sweep()
	require.LessOrEqual(t, s.Len(), maxKeys)
}

// With a hard cap full of busy entries, a flood of new keys is refused at
// once without a pass each; as soon as one entry goes idle, a new key
// evicts it and gets in.
func TestHardCapFullOfBusyKeysRefusesWithoutScanning(t *testing.T) {
	const maxKeys = 32
	s := keyedsem.New[string](keyedsem.WithMaxKeys(maxKeys), keyedsem.WithHardMaxKeys())
	defer s.Close()
	held := make([]semaphore.Permit, 0, maxKeys)
	for i := range maxKeys {
		p, ok := s.TryAcquire(fmt.Sprintf("busy-%d", i))
		require.True(t, ok)
		held = append(held, p)
	}
	for i := range 1000 {
		_, err := s.Acquire(t.Context(), fmt.Sprintf("new-%d", i))
		require.True(t, errors.Is(err, keyedsem.ErrTooManyKeys), "got %v", err)
	}
	require.LessOrEqual(t, keyedsem.Passes(s), uint64(2), "a refused flood must not scan per key")

	require.True(t, held[0].Release()) // busy-0 goes idle
	p, err := s.Acquire(t.Context(), "newcomer")
	require.NoError(t, err, "an idle entry must be evicted to make room")
	require.True(t, p.Release())
	for _, p := range held[1:] {
		p.Release()
	}
}

// Regression (review): a TryAcquire whose lookup raced with the eviction of
// its key's entry, reused meanwhile for another key that is busy, answered
// "busy" for a key that had no entry at all. The join must instead ask for
// a look under the map's lock, and the TryAcquire must succeed.
func TestTryAcquireIsNotRefusedByAnotherKeysReusedEntry(t *testing.T) {
	for attempt := 0; attempt < 200; attempt++ {
		clk := newFake()
		s := keyedsem.New[string](keyedsem.WithClock(clk), keyedsem.WithIdleTimeout(time.Minute))
		p, ok := s.TryAcquire("a")
		require.True(t, ok)
		p.Release()
		var other semaphore.Permit
		stale, reused := keyedsem.TryJoinAfter(s, "a", func() {
			clk.Advance(time.Minute)
			require.Equal(t, 1, s.Sweep()) // "a" is evicted; its entry goes to the pool
			var ok bool
			other, ok = s.TryAcquire("b") // may reuse that entry, and holds it
			require.True(t, ok)
		})
		if reused {
			require.True(t, stale, "a busy entry of another key must not answer for this one")
		}
		q, ok := s.TryAcquire("a")
		require.True(t, ok, "key a has no holder: TryAcquire must succeed")
		q.Release()
		other.Release()
		s.Close()
		if reused {
			return
		}
	}
	t.Skip("the pool never handed the evicted entry to the next key")
}

// waitingCtx is a context that reports, by closing waiting, the first time
// its Done is asked for: on a new key's path, that is makeRoom about to
// wait for the eviction lock (Acquire's entry check asks Err only).
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// A new key that the hard cap refused waits for a running eviction pass
// before it is refused or admitted, but not past the end of its context.
// Before, it waited on a mutex and could not stop.
func TestNewKeyStopsWaitingForAPassWhenItsContextEnds(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys())
	defer s.Close()
	a, err := s.Acquire(t.Context(), "a") // the cap's one entry, in use
	require.NoError(t, err)

	unlock := keyedsem.HoldEvictLock(s) // as a running Sweep would
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := &waitingCtx{Context: ctx, waiting: make(chan struct{})}
	res := make(chan error, 1)
	go func() {
		p, err := s.Acquire(c, "b")
		if err == nil {
			p.Release()
		}
		res <- err
	}()
	select {
	case <-c.waiting: // about to wait for the pass: the cancel ends that wait
	case <-time.After(hangGuard):
		t.Fatal("the new key never waited on its context for the pass")
	}
	cancel()
	select {
	case err := <-res:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(hangGuard):
		t.Fatal("the new key still waits for the pass after its context ended")
	}
	st := s.Stats()
	require.Equal(t, uint64(1), st.Cancelled, "the ended wait counts as cancelled")
	require.Equal(t, uint64(0), st.Rejected, "and not as refused by the cap")
	require.False(t, keyedsem.Has(s, "b"))
	unlock()

	// With the pass over, the cap decides as before: refused while "a" is
	// in use, admitted (evicting "a") once it is idle.
	_, err = s.Acquire(t.Context(), "b")
	require.ErrorIs(t, err, keyedsem.ErrTooManyKeys)
	require.True(t, a.Release())
	b, err := s.Acquire(t.Context(), "b")
	require.NoError(t, err)
	require.True(t, b.Release())
}
