package redislane_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// TestSharedVocabulary: a Redis lane speaks the vocabulary of every lanes
// package (docs/glossary.md): its closed error is semaphore.ErrClosed, also
// through a lanequeue.Queue; a bad setting is an error matching
// semaphore.ErrInvalidConfig (a negative quarantine was taken silently as
// the default before); its Stats embed semaphore.Counters, where a grant
// that waited counts in Waited and a waiter that Close sent away in Failed
// (it counted as Rejected before).
func TestSharedVocabulary(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t)

	_, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithQuarantine(-time.Second))
	assert.ErrorIs(t, err, semaphore.ErrInvalidConfig, "negative quarantine")
	_, err = redislane.NewKeyed(rc, laneName(t), 0)
	assert.ErrorIs(t, err, semaphore.ErrInvalidConfig, "capacity 0")

	name := laneName(t)
	s := newSem(t, srv.Addr, name, 1)
	p, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	served := acquireAsync(ctx, s)
	// Queued in Redis, not only in the local line (Waiters counts it
	// before its first call): a grant then waited, whenever the reply of
	// that call comes back. A release before the call would let the
	// waiter in at once, which does not count in Waited.
	waitFor(t, 5*time.Second, "a waiter queued in Redis", func() bool {
		return rc.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	p.Release()
	require.NoError(t, testkit.Within(t, 10*time.Second, "the waiter to be served", served))
	st := s.Stats()
	assert.EqualValues(t, 2, st.Acquired)
	assert.EqualValues(t, 1, st.Waited)

	p, err = s.Acquire(ctx, 1)
	require.NoError(t, err)
	closedOn := acquireAsync(ctx, s)
	waitFor(t, 5*time.Second, "a waiter", func() bool { return s.Stats().Waiters == 1 })
	q := lanequeue.New[string]()
	require.NoError(t, q.Add("redis", redislane.AsLane[string](s)))
	q.Close() // closes s
	assert.ErrorIs(t, testkit.Within(t, 10*time.Second, "the waiter to be sent away", closedOn), semaphore.ErrClosed)
	p.Release()
	_, err = s.Acquire(ctx, 1)
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	st = s.Stats()
	assert.EqualValues(t, 1, st.Failed, "the waiter that Close sent away")
	assert.EqualValues(t, 1, st.Rejected, "the acquire after Close")
	assert.True(t, st.Closed)
	ls := q.Stats()
	require.Len(t, ls, 1)
	assert.Equal(t, st.Counters, ls[0].Counters, "the lane's counters are the instance's")

	if !errors.Is(redislane.ErrClosed, semaphore.ErrClosed) || redislane.ErrInvalidConfig != semaphore.ErrInvalidConfig {
		t.Error("redislane's shared sentinels must be semaphore's values")
	}
}
