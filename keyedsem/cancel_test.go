package keyedsem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
)

func TestCancelWhileWaitingLeavesTheQueue(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	defer s.Close()
	p, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	ctx1, cancel1 := context.WithCancel(bg)
	w1 := queue(t, s, ctx1, "k", 1, 1)
	w2 := queue(t, s, bg, "k", 1, 2)

	cancel1()
	r1 := recv(t, w1, "the cancelled waiter")
	assert.ErrorIs(t, r1.err, context.Canceled)
	assert.False(t, r1.p.Weight() != 0, "a failed acquire returns the zero Permit")
	waitForWaiters(s, 1)
	st := s.Stats()
	assert.Equal(t, uint64(1), st.Cancelled)
	assert.Equal(t, uint64(0), st.Released, "a cancelled waiter released something")

	p.Release()
	r2 := recv(t, w2, "the waiter behind it")
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
	assert.ErrorIs(t, recv(t, heavy, "the cancelled head").err, context.Canceled)
	rl := recv(t, light, "the waiter behind it")
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
	_, err = s.Acquire(dctx, "free")
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
		r := recv(t, w, "the waiter")
		testkit.WaitAll(t, &wg, "the release and the cancel")
		if r.err == nil {
			won++
			require.True(t, r.p.Release(), "iteration %d: the winner's permit was not its own", i)
		} else {
			require.ErrorIs(t, r.err, context.Canceled)
			require.False(t, r.p.Weight() != 0)
		}
		st := s.Stats()
		require.Equal(t, int64(0), st.Held, "iteration %d", i)
		require.Equal(t, st.Acquired, st.Released, "iteration %d", i)
		require.Equal(t, 0, s.Len(), "iteration %d", i)
	}
	t.Logf("grant won %d of %d races", won, iters)
	assert.Equal(t, uint64(0), s.Stats().DoubleReleases)
}
