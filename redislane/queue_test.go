package redislane_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// A lanequeue.Queue takes a local session lane and a Redis global lane in
// one AcquireAll: per key one at a time (locally), across two "processes"
// (two queues on two clients) never more than the Redis limit.
func TestQueueMixesLocalSessionAndRedisGlobal(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	const limit = 3
	var queues []*lanequeue.Queue[string]
	for range 2 {
		s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, limit,
			redislane.WithLease(testLease), redislane.WithQuarantine(0))
		require.NoError(t, err)
		q := lanequeue.New[string]()
		require.NoError(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
		require.NoError(t, q.Add("global", redislane.AsLane[string](s)))
		t.Cleanup(q.Close) // closes s too
		queues = append(queues, q)
	}

	var global oracle
	perKey := map[string]*oracle{"t1": {}, "t2": {}, "t3": {}, "t4": {}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, q := range queues {
		lanes, err := q.Lanes("global", "session")
		require.NoError(t, err)
		for g := range 8 {
			key := []string{"t1", "t2", "t3", "t4"}[g%4]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					tk, err := q.AcquireAll(ctx, key, lanes)
					if err != nil {
						continue
					}
					sp := span{Start: redistest.Now(), W: 1}
					time.Sleep(time.Millisecond) // the work
					sp.End = redistest.Now()
					global.add(sp)
					if key == "t1" && q == queues[0] {
						perKey[key].add(sp) // one process: its session lane serialises t1
					}
					tk.Release()
				}
			}()
		}
	}
	wg.Wait()
	require.NotEmpty(t, global.spans)
	assert.LessOrEqual(t, maxInUse(global.spans), int64(limit))
	assert.LessOrEqual(t, maxInUse(perKey["t1"].spans), int64(1))
	for _, q := range queues {
		for _, st := range q.Stats() {
			assert.Zero(t, st.Held, "lane %s still held", st.Name)
		}
	}
}

// A queue's work on a fleet lane ends when Redis loses the lane's state:
// Do's fn sees its context end with the lease's cause (a new user's trial
// of the chat gateway on Redis found a handler still running when another
// replica, after the quarantine, ran the thread's next message).
func TestQueueWorkEndsWhenTheLeaseIsLost(t *testing.T) {
	srv := startRedis(t)
	k, err := redislane.NewKeyed(newClient(t, srv.Addr), laneName(t), 1,
		redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	q := lanequeue.New[string]()
	require.NoError(t, q.Add("thread", redislane.AsKeyedLane(k, func(s string) string { return s })))
	t.Cleanup(q.Close) // closes k too
	ls, err := q.Lanes("thread")
	require.NoError(t, err)
	inFn := make(chan struct{})
	done := testkit.Go(func() error {
		return q.Do(testCtx(t), "t1", ls, func(ctx context.Context) error {
			close(inFn)
			<-ctx.Done()
			return context.Cause(ctx)
		})
	})
	testkit.Recv(t, inFn, "Do's fn")
	require.NoError(t, srv.Restart())
	err = testkit.Within(t, 10*testLease+testkit.Deadline, "fn's context, after Redis lost the lane", done)
	assert.True(t, errors.Is(err, redislane.ErrLeaseLost) || errors.Is(err, redislane.ErrLeaseExpired), "fn's context ended with %v; want the lease's cause", err)
}
