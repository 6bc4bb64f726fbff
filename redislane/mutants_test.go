package redislane_test

// Tests of rules that a mutation run found unchecked (issue 25): each of
// them fails with the deliberate bug put back that its comment names.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
)

// deadlineLog is a go-redis hook that records each call of the lane's scripts,
// and each COMMAND (the lane's question whether the server has sharded
// pub/sub): when it came to the client, and the deadline of its context.
type deadlineLog struct {
	commandHook
	mu    sync.Mutex
	calls []loggedCall
}

type loggedCall struct {
	what     string    // the script's name, or "command"
	at       time.Time // when the lane handed the call to the client
	deadline time.Time // of the call's context; zero if it has none
}

func (l *deadlineLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		what := redislane.ScriptOf(cmd)
		if what == "" && cmd.Name() == "command" {
			what = "command"
		}
		if what != "" {
			c := loggedCall{what: what, at: time.Now()}
			c.deadline, _ = ctx.Deadline()
			l.mu.Lock()
			l.calls = append(l.calls, c)
			l.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// take returns the calls logged since the last take.
func (l *deadlineLog) take() []loggedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

// holdCalls is a go-redis hook that, while on, holds each call of one of
// the lane's scripts before it is sent, as a Redis that does not answer
// would: until open is closed (the call then goes through) or the call's
// context ends (it fails with the context's error). It counts the calls
// it held and those that have returned to the lane.
type holdCalls struct {
	commandHook
	script         string
	on             atomic.Bool
	open           chan struct{}
	started, ended atomic.Int64
}

func newHoldCalls(script string) *holdCalls {
	return &holdCalls{script: script, open: make(chan struct{})}
}

func (h *holdCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.on.Load() || redislane.ScriptOf(cmd) != h.script {
			return next(ctx, cmd)
		}
		h.started.Add(1)
		defer h.ended.Add(1)
		select {
		case <-h.open:
			return next(ctx, cmd)
		case <-ctx.Done():
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
	}
}

// A TryAcquire whose grant comes back later than the margin returns false,
// and the grant is given back in the background. The reply is held in the
// client after Redis sent it (a slow network, a descheduled process), so
// the call itself succeeds. Mutation that it catches: tryAcquire without
// its check of the reply's age (it returned the permit).
func TestTryAcquireNeverUsesALateReply(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	rc := newClient(t, srv.Addr)
	const lease = 2 * time.Second // margin 400 ms
	h := &slowReplies{delay: lease/5 + 100*time.Millisecond}
	rc.AddHook(h)
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	h.mu.Lock()
	h.on = true
	h.mu.Unlock()
	p, ok := s.TryAcquire(1)
	h.mu.Lock()
	h.on = false
	h.mu.Unlock()
	refused(t, p, ok, "TryAcquire returned a grant whose reply came back after the margin")
	st := s.Stats()
	// On a loaded machine the call itself may time out: given up either way.
	assert.EqualValues(t, 1, st.LateReplies+st.RedisErrors, "the late reply was not counted")

	waitFor(t, 10*time.Second, "the late grant to be given back", func() bool {
		return direct.ZCard(context.Background(), "{lanes:"+name+"}:g:h").Val() == 0
	})
	waitFor(t, 10*time.Second, "the unit of the late grant to come back", func() bool {
		p, ok = s.TryAcquire(1) // a loaded machine may make this reply late too
		return ok
	})
	p.Release()
}

// With WithMaxHold shorter than the lease, a permit's first deadline is
// already cut to the grant plus the longest hold, for a grant by Acquire
// and by TryAcquire. Mutation that it catches: grant without the cut (the
// deadline was the send time plus four fifths of the lease, until the
// first refresh).
func TestFirstDeadlineIsCutToMaxHold(t *testing.T) {
	srv := startRedis(t)
	const lease = 2 * time.Second // a deadline of 1.6 s after the call
	const hold = 50 * time.Millisecond
	s := newSem(t, srv.Addr, laneName(t), 1, redislane.WithLease(lease), redislane.WithMaxHold(hold))
	for _, way := range []string{"Acquire", "TryAcquire"} {
		var p *redislane.Permit
		if way == "Acquire" {
			var err error
			p, err = s.Acquire(testCtx(t), 1)
			require.NoError(t, err)
		} else {
			waitFor(t, 10*time.Second, "a TryAcquire that grants", func() bool {
				var ok bool
				p, ok = s.TryAcquire(1) // its reply may come late on a loaded machine
				return ok
			})
		}
		got := time.Now() // after the grant
		dl := p.Deadline()
		assert.False(t, dl.After(got.Add(hold)),
			"%s: the first deadline is %v after the permit was returned, past WithMaxHold(%v)", way, dl.Sub(got), hold)
		p.Release()
	}
}

// Close waits for the calls that go on in the background after their
// caller left: here the second try of a Release whose first call Redis
// did not answer within Release's bound. Both are held until their
// deadlines. Mutation that it catches: close without c.wg.Wait (it
// returned while the call was still running).
func TestCloseWaitsForBackgroundCalls(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	h := newHoldCalls("release")
	rc.AddHook(h)
	const lease = 2 * time.Second // margin 400 ms; Release waits 250 ms
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)

	h.on.Store(true)
	assert.True(t, p.Release())
	waitFor(t, 10*time.Second, "the release to be tried again in the background", func() bool { return h.started.Load() == 2 })
	s.Close()
	assert.Equal(t, h.started.Load(), h.ended.Load(), "Close returned with a background call still running")
}

// A refresh in flight when Close begins: Close waits for it, and the
// permit that Close ended stays ended, its deadline where Close put it,
// whether the refresh fails (Redis does not answer) or goes through (it
// extends the lease in Redis; the documented "one in flight at Close may
// still go through"). Mutations that it catches: close without waiting for
// the refresher (it returned with the call in flight), and extend without
// its check of the permit's state (the deadline moved 0.8 lease on).
func TestRefreshInFlightAtClose(t *testing.T) {
	srv := startRedis(t)
	for _, through := range []bool{false, true} {
		t.Run(fmt.Sprintf("goes through=%v", through), func(t *testing.T) {
			rc := newClient(t, srv.Addr)
			h := newHoldCalls("refresh")
			rc.AddHook(h)
			// Refreshed every 667 ms; the deadline is 1.6 s on, time for
			// Close to begin on a loaded machine. Margin 400 ms.
			const lease = 2 * time.Second
			s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)
			defer s.Close() // if the test fails early
			p, err := s.Acquire(testCtx(t), 1)
			require.NoError(t, err)
			defer p.Release()

			h.on.Store(true)
			waitFor(t, 10*time.Second, "the permit's refresh", func() bool { return h.started.Load() == 1 })
			closed := make(chan struct{})
			go func() {
				s.Close()
				close(closed)
			}()
			testkit.Within(t, 10*time.Second, "Close to end the permit", p.Context().Done())
			ended := time.Now()
			if through {
				close(h.open) // Redis still holds the permit: the refresh finds it held
			}
			testkit.Within(t, 10*time.Second, "Close to return", (<-chan struct{})(closed))
			assert.Equal(t, h.started.Load(), h.ended.Load(), "Close returned with a refresh call in flight")
			assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrClosed)
			assert.False(t, p.Deadline().After(ended),
				"the refresh in flight at Close moved the deadline of the permit Close ended, %v past its end", p.Deadline().Sub(ended))
		})
	}
}

// A leader whose leadership ended (its key expired: a pause longer than
// its lease) and that is elected again leads in a new term, and its
// values are written in that term. Mutation that it catches: call keeping
// the first term it led (f.myTerm set only while 0): every later value
// carried the old term and was dropped.
func TestFleetLeaderElectedAgainWritesInItsNewTerm(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	f := newFleet(t, newClient(t, srv.Addr), name, 5)
	controller{f}.setInForce(t, 6)
	first := f.Term()

	require.NoError(t, direct.Del(context.Background(), "{lanes:"+name+"}:leader").Err())
	waitFor(t, 10*time.Second, "the leader to be elected again", func() bool { return f.Term() > first && f.Leader() })
	waitFor(t, 10*time.Second, "the value of the leader elected again in force (a leader that kept its first term could never write)", func() bool {
		f.SetCapacity(7)
		return f.Capacity() == 7
	})
	assert.EqualValues(t, 7, storedLimit(t, direct, name))
}

// Release gives its call to Redis at most a fifth of the lease and at most
// 250 ms (then leaves it to the background): read from the deadline the
// call carries, not from a stopwatch. Mutations that it catches:
// releaseWait returning the margin (1 s with a 5 s lease), or 250 ms
// whatever the lease (the margin is 100 ms with a 500 ms lease).
func TestReleaseWaitsAtMostAMarginAnd250ms(t *testing.T) {
	srv := startRedis(t)
	for _, lease := range []time.Duration{500 * time.Millisecond, 5 * time.Second} {
		bound := min(lease/5, 250*time.Millisecond)
		rc := newClient(t, srv.Addr)
		log := &deadlineLog{}
		rc.AddHook(log)
		s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
		require.NoError(t, err)
		defer s.Close()
		p, err := s.Acquire(testCtx(t), 1)
		require.NoError(t, err)
		log.take()
		p.Release()
		calls := log.take() // EVALSHA, and EVAL if the script was not loaded
		require.NotEmpty(t, calls)
		for _, c := range calls {
			require.Equal(t, "release", c.what)
			require.False(t, c.deadline.IsZero(), "the release call has no deadline")
			assert.LessOrEqual(t, c.deadline.Sub(c.at), bound,
				"lease %v: Release gave its call %v; its bound is min(a fifth of the lease, 250 ms) = %v", lease, c.deadline.Sub(c.at), bound)
		}
	}
}

// TryAcquire returns within one margin: every call it makes, the first
// TryAcquire of a client's question whether the server has sharded
// pub/sub included, ends by one margin after the first of them began.
// Read from the deadlines the calls carry. Mutations that it catches: the
// acquire call given a whole lease; and, before the fix, the question and
// the acquire call each given a margin of their own (two in all).
func TestTryAcquireCallsEndWithinOneMargin(t *testing.T) {
	srv := startRedis(t)
	const lease = 2 * time.Second
	const margin = lease / 5
	rc := newClient(t, srv.Addr)
	log := &deadlineLog{}
	rc.AddHook(log)
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	for i := range 2 {
		p, ok := s.TryAcquire(1) // false if its reply came late: the bound holds all the same
		calls := log.take()
		if ok {
			p.Release()
		}
		log.take()
		require.NotEmpty(t, calls)
		if i == 0 {
			require.Equal(t, "command", calls[0].what, "the first TryAcquire of a client asks about sharded pub/sub first")
		}
		by := calls[0].at.Add(margin)
		for _, c := range calls {
			require.False(t, c.deadline.IsZero(), "TryAcquire %d: its %s call has no deadline", i, c.what)
			assert.False(t, c.deadline.After(by),
				"TryAcquire %d: its %s call may run until %v after the first call began; the bound is one margin, %v",
				i, c.what, c.deadline.Sub(calls[0].at), margin)
		}
	}
}

// On a Cluster client, each lane's shard channel has a pub/sub connection
// of its own (a shard channel can be subscribed only on its slot's node),
// and classic channels share one. The suite's cluster has one node, where
// a shared connection would work too, so the connections are counted.
// Mutation that it catches: the hub putting every channel of a Cluster
// client on one connection (perChannel false).
func TestClusterShardChannelsHaveAConnectionEach(t *testing.T) {
	addr := startCluster(t)
	direct := clusterClient(t, addr)
	ctx := context.Background()
	info, err := direct.Do(ctx, "COMMAND", "INFO", "SPUBLISH").Slice()
	require.NoError(t, err)
	if len(info) == 0 || info[0] == nil {
		t.Skip("the server has no sharded pub/sub")
	}
	for _, classic := range []bool{false, true} {
		var opts = []redislane.Option{redislane.WithLease(testLease), redislane.WithQuarantine(0)}
		kind, want := "sharded", 3
		if classic {
			opts = append(opts, redislane.WithClassicPubSub())
			kind, want = "classic", 1
		}
		rc := clusterClient(t, addr)
		var lanes []*redislane.Weighted
		for range 3 {
			s, err := redislane.NewWeighted(rc, laneName(t), 1, opts...)
			require.NoError(t, err)
			defer s.Close()
			warm(t, s) // its first waiter subscribes
			lanes = append(lanes, s)
		}
		assert.Equal(t, want, redislane.HubConns(lanes[0]), "%s pub/sub: connections of a Cluster client with three lanes", kind)
	}
}
