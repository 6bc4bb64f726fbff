package adaptive_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestLaneDrivenThroughDoRace: goroutines calling a provider through a
// lanequeue lane whose controller they never touch. The provider refuses
// what is over its limit; the controller, told by Do alone, brings the
// lane down from its start, and the lane is sound at the end.
func TestLaneDrivenThroughDoRace(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(32)
	require.NoError(t, q.Add("model", lanequeue.NewGlobalLane[string](sem)))
	ctl, err := adaptive.New(sem, 2, 32)
	require.NoError(t, err)
	require.NoError(t, q.ObserveLane("model", ctl))
	lanes, err := q.Lanes("model")
	require.NoError(t, err)

	const providerLimit = 4
	var inflight atomic.Int64
	call := func(context.Context) error {
		defer inflight.Add(-1)
		if inflight.Add(1) > providerLimit {
			return fmt.Errorf("%w: 429", adaptive.ErrOverload)
		}
		return nil
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				_ = q.Do(context.Background(), fmt.Sprint(g, i), lanes, call)
			}
		}()
	}
	testkit.WaitAll(t, &wg, "the callers")
	st := sem.Stats()
	require.Zero(t, st.Held)
	require.Equal(t, st.Capacity, st.Available)
	require.Equal(t, ctl.Limit(), st.Capacity)
	require.GreaterOrEqual(t, st.Capacity, int64(2))
	require.LessOrEqual(t, st.Capacity, int64(32))
	cs := ctl.Stats()
	require.NotZero(t, cs.Windows, "Do reported")
	if cs.Overloads > 0 {
		require.NotZero(t, cs.OverloadDecreases, "refusals cut the limit")
	}
}

// TestObserveLaneRefusesAControllerOfAnotherLane: a controller given to
// ObserveLane for a lane whose semaphore it does not drive (a user's
// report: the keyed "session" lane, with a controller of "global") is
// refused with an error naming the lane, instead of moving one lane's
// capacity from another's outcomes; the lane it drives takes it.
func TestObserveLaneRefusesAControllerOfAnotherLane(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	require.NoError(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	sem := semaphore.New(8)
	require.NoError(t, q.Add("global", lanequeue.NewGlobalLane[string](sem)))
	require.NoError(t, q.Add("other", lanequeue.NewGlobalLane[string](semaphore.New(8))))
	ctl, err := adaptive.New(sem, 1, 16)
	require.NoError(t, err)

	err = q.ObserveLane("session", ctl)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.ErrorContains(t, err, `ObserveLane("session"): a keyed lane has no single budget`)
	err = q.ObserveLane("other", ctl)
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.ErrorContains(t, err, `ObserveLane("other"): the controller drives another budget than the lane's semaphore`)
	require.NoError(t, q.ObserveLane("global", ctl))
	require.Same(t, sem, ctl.Target())
}
