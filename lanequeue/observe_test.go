package lanequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// recorder is an Observer that keeps what it was told, and the weight its
// lane's semaphore held at that moment.
type recorder struct {
	mu       sync.Mutex
	errs     []error
	heldThen []int64
	held     func() int64
}

func (r *recorder) Observe(err error, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	r.heldThen = append(r.heldThen, r.held())
}

func (r *recorder) seen() ([]error, []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...), append([]int64(nil), r.heldThen...)
}

func observed(t *testing.T, q *lanequeue.Queue[string], lane string) *recorder {
	t.Helper()
	s, err := lanequeue.GlobalSemaphore(q, lane)
	must(t, err)
	r := &recorder{held: func() int64 { return s.Stats().Held }}
	must(t, q.ObserveLane(lane, r))
	return r
}

// TestDoReportsOutcomeBeforeRelease: Do tells the lane's observer fn's
// error while the ticket still holds its permit (so that a controller's
// decrease is in force before the permit admits the next caller), once
// per call; the lanes without an observer are not asked.
func TestDoReportsOutcomeBeforeRelease(t *testing.T) {
	q := testQueue(t, 4)
	r := observed(t, q, "global")
	lanes, err := q.Lanes("session", "global")
	must(t, err)
	boom := errors.New("429")
	require.NoError(t, q.Do(context.Background(), "a", lanes, func(context.Context) error { return nil }))
	require.ErrorIs(t, q.Do(context.Background(), "a", lanes, func(context.Context) error { return boom }), boom)
	errs, held := r.seen()
	require.Equal(t, []error{nil, boom}, errs)
	require.Equal(t, []int64{1, 1}, held, "reported while the permit was held")
	assertNothingHeld(t, q)
}

// TestTicketFinishReportsOnceReleaseNever: Finish reports and releases;
// a second Finish, or a Release, reports nothing; a plain Release never
// reports; a Do whose fn panics reports nothing and releases.
func TestTicketFinishReportsOnceReleaseNever(t *testing.T) {
	q := testQueue(t, 4)
	r := observed(t, q, "global")
	lanes, err := q.Lanes("global")
	must(t, err)
	ctx := context.Background()
	tk, err := q.AcquireAll(ctx, "a", lanes)
	must(t, err)
	require.True(t, tk.Release())
	tk, err = q.AcquireAll(ctx, "a", lanes)
	must(t, err)
	boom := errors.New("503")
	require.True(t, tk.Finish(boom))
	require.False(t, tk.Finish(nil))
	require.False(t, tk.Release())
	require.Panics(t, func() {
		_ = q.Do(ctx, "a", lanes, func(context.Context) error { panic("fn") })
	})
	errs, _ := r.seen()
	require.Equal(t, []error{boom}, errs)
	assertNothingHeld(t, q)

	must(t, q.ObserveLane("global", nil)) // removed: nothing more
	require.NoError(t, q.Do(ctx, "a", lanes, func(context.Context) error { return nil }))
	errs, _ = r.seen()
	require.Len(t, errs, 1)
	require.ErrorIs(t, q.ObserveLane("nope", r), semaphore.ErrInvalidConfig)
}

type panicky struct{}

func (panicky) Observe(error, time.Duration) { panic("observer") }

// TestObserverPanicReleasesThePermits: an observer that panics in Finish
// does not keep the ticket's permits.
func TestObserverPanicReleasesThePermits(t *testing.T) {
	q := testQueue(t, 4)
	must(t, q.ObserveLane("global", panicky{}))
	lanes, err := q.Lanes("session", "global")
	must(t, err)
	tk, err := q.AcquireAll(context.Background(), "a", lanes)
	must(t, err)
	require.Panics(t, func() { tk.Finish(nil) })
	require.True(t, lanequeue.TicketReleased(tk))
	assertNothingHeld(t, q)
}
