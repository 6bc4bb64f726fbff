package redislane_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
)

// Faults that no other test provokes: a client clock that is off, replies
// and pub/sub messages that come late, and a restart that leaves a holder
// cut off. Each test here fails on a lane with the matching deliberate bug
// (see the test's comment).

// validity is what a holder relies on of a lease: the lease minus its
// margin, a fifth of it (see Permit.Deadline).
func validity(lease time.Duration) time.Duration { return lease - lease/5 }

// skewHook makes a client look, to Redis, as if its clock were off by skew:
// every argument of every command that reads as the current time (seconds,
// milliseconds, microseconds or nanoseconds since the epoch, give or take a
// day) is moved by skew. A lane that reads only Redis's TIME sends no such
// argument, and the hook changes nothing.
type skewHook struct {
	skew    time.Duration
	shifted atomic.Int64 // arguments moved
}

func (h *skewHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *skewHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.shift(cmd)
		return next(ctx, cmd)
	}
}
func (h *skewHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.shift(c)
		}
		return next(ctx, cmds)
	}
}

func (h *skewHook) shift(cmd redis.Cmder) {
	args := cmd.Args()
	now := time.Now().UnixNano()
	for i, a := range args {
		var v int64
		str := false
		switch x := a.(type) {
		case int:
			v = int64(x)
		case int64:
			v = x
		case uint64:
			v = int64(x)
		case float64:
			v = int64(x)
		case string:
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				continue
			}
			v, str = n, true
		default:
			continue
		}
		for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond, time.Nanosecond} {
			cur, day := now/int64(unit), int64(24*time.Hour/unit)
			if v <= cur-day || v >= cur+day {
				continue
			}
			v += int64(h.skew / unit)
			if str {
				args[i] = strconv.FormatInt(v, 10)
			} else {
				args[i] = v
			}
			h.shifted.Add(1)
			break
		}
	}
}

// Scenario 7a: the clocks of two instances differ by twenty minutes (one is
// ten minutes behind, the other ten minutes ahead), which changes nothing:
// a permit of either holds against the other, a hand-over between them
// works, and the permit of the one ahead, cut off from Redis, ends within a
// lease for the one behind. A lane that took the time from the client
// (instead of Redis's TIME) would see the permits of the instance behind as
// expired long ago, and those of the one ahead as valid for ten minutes.
func TestClientClockSkewChangesNothing(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	// A refresh may come 700 ms late, for a loaded machine, before the
	// permit held across the first steps ends.
	const lease = 1500 * time.Millisecond
	instance := func(addr string, skew time.Duration) (*redislane.Weighted, *skewHook) {
		h := &skewHook{skew: skew}
		rc := newClient(t, addr, func(o *redis.Options) {
			o.MaxRetries = -1
			o.ReadTimeout = lease / 2
			o.WriteTimeout = lease / 2
		})
		rc.AddHook(h)
		s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s, h
	}
	behind, hb := instance(srv.Addr, -10*time.Minute)
	px := startProxy(t, srv.Addr)
	ahead, ha := instance(px.addr(), 10*time.Minute)
	ctx := testCtx(t)
	direct := newClient(t, srv.Addr)

	p, err := behind.Acquire(ctx, 1)
	require.NoError(t, err)
	q, ok := ahead.TryAcquire(1)
	refused(t, q, ok, "the instance ahead took the permit of the instance behind for expired")

	got := make(chan *redislane.Permit, 1)
	go func() {
		q, err := ahead.Acquire(ctx, 1)
		assert.NoError(t, err)
		got <- q
	}()
	waitFor(t, 5*time.Second, "the instance ahead to queue", func() bool {
		return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	p.Release()
	q = testkit.Within(t, 30*time.Second, "the hand-over to the instance ahead", got)
	require.NotNil(t, q)
	assert.Greater(t, q.Fence(), p.Fence())
	assert.LessOrEqual(t, time.Until(q.Deadline()), validity(lease), "a deadline beyond one lease")
	r, ok := behind.TryAcquire(1)
	refused(t, r, ok, "the instance behind took the permit of the instance ahead for expired")

	// The instance ahead is cut off from Redis: its permit must end within
	// a lease, for the instance behind as for itself.
	px.black.Store(true)
	r, err = behind.Acquire(testCtx(t, 10*lease), 1)
	require.NoError(t, err, "the permit of the instance ahead, cut off, did not end within ten leases")
	start := redistest.Now()
	testkit.Within(t, 10*lease, "the cut-off permit's context to end", q.Context().Done())
	assert.LessOrEqual(t, endOf(q.Deadline()), start, "the cut-off permit was still valid when the next was granted")
	r.Release()
	px.black.Store(false)
	q.Release()
	t.Logf("time-like arguments moved: %d (behind), %d (ahead)", hb.shifted.Load(), ha.shifted.Load())
}

// callLog is a go-redis hook that records when the latest script call that
// succeeded was sent. The lane takes its own send time just before the
// call, so it is never later.
type callLog struct {
	commandHook
	mu     sync.Mutex
	latest time.Time
}

func (l *callLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if n := cmd.Name(); err == nil && (n == "evalsha" || n == "eval") {
			l.mu.Lock()
			if start.After(l.latest) {
				l.latest = start
			}
			l.mu.Unlock()
		}
		return err
	}
}

// bound is the latest deadline a permit may have now: the send time of the
// latest successful call, plus the lease's validity. Read it after the
// deadline it bounds.
func (l *callLog) bound(lease time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.latest.Add(validity(lease))
}

// Scenario 7b: a refresh whose reply comes back late extends the deadline
// from the time the refresh was sent, never from the reply's arrival: the
// lease in Redis runs from the moment the script ran, which can be as
// early as the send time.
func TestRefreshDeadlineCountsFromTheSendTime(t *testing.T) {
	srv := startRedis(t)
	px := startProxy(t, srv.Addr)
	var log callLog
	rc := newClient(t, px.addr(), func(o *redis.Options) { o.MaxRetries = -1 })
	rc.AddHook(&log)
	// A refresh every two seconds: the delayed one is the only one for a
	// while (1.7 s after its reply), and the lease keeps 1.7 s beyond that
	// reply for a loaded machine (with 2.5 s, under a load of 12, no refresh
	// got through before the deadline, the permit ended, and no refresh came
	// to be delayed).
	const (
		lease   = 5 * time.Second // validity 4 s; refresh deadline 1.67 s
		refresh = 2 * time.Second
		delay   = 300 * time.Millisecond
	)
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease),
		redislane.WithRefreshEvery(refresh), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	defer p.Release()
	dl := p.Deadline()
	assert.False(t, dl.After(log.bound(lease)), "the grant's deadline is past its send time plus the lease's validity")

	done := px.arm(delay, false) // the next call is the refresh
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("no delayed refresh reply within 10s (permit ended: %v; stats %+v)", context.Cause(p.Context()), s.Stats())
	}
	deadline := time.Now().Add(5 * time.Second)
	for !p.Deadline().After(dl) {
		if time.Now().After(deadline) {
			t.Fatalf("the delayed refresh did not extend the deadline within 5s (permit ended: %v; stats %+v)",
				context.Cause(p.Context()), s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	dl = p.Deadline()
	bound := log.bound(lease)
	assert.False(t, dl.After(bound), "the refresh extended the deadline %v past the send time plus the lease's validity", dl.Sub(bound))
	assert.NoError(t, p.Context().Err())
}

// Scenario 7c: a hand-over whose pub/sub message comes late yields a permit
// whose deadline counts from the send time of the waiter's latest call that
// found it queued (the grant came after that call), never from the
// message's arrival. The message is delayed by less than the waiter's poll
// interval, so that it, not a poll, ends the wait; a round in which a poll
// won is run again.
func TestHandoverDeadlineCountsFromTheQueuedCall(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	const (
		lease = 2 * time.Second // polls every 250 ms (jittered: 187 ms or more)
		delay = 100 * time.Millisecond
	)
	holder := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease))
	px := startProxy(t, srv.Addr)
	var log callLog
	rc := newClient(t, px.addr(), func(o *redis.Options) { o.MaxRetries = -1 })
	rc.AddHook(&log)
	w, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(lease),
		redislane.WithRefreshEvery(lease*3/4), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(w.Close)
	warm(t, w) // subscribes
	px.slow.Store(int64(delay))
	direct := newClient(t, srv.Addr)
	ctx := testCtx(t)

	checked := 0
	for round := 0; round < 20 && checked < 3; round++ {
		p, err := holder.Acquire(ctx, 1)
		require.NoError(t, err)
		handovers := w.Stats().Handovers
		got := make(chan *redislane.Permit, 1)
		go func() {
			q, err := w.Acquire(ctx, 1)
			assert.NoError(t, err)
			got <- q
		}()
		waitFor(t, 5*time.Second, "the waiter to queue", func() bool {
			return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
		})
		p.Release()
		q := testkit.Within(t, 30*time.Second, "the hand-over", got)
		require.NotNil(t, q)
		dl := q.Deadline()
		bound := log.bound(lease)
		if w.Stats().Handovers > handovers {
			checked++
			assert.False(t, dl.After(bound), "round %d: the hand-over's deadline is %v past the send time of the waiter's latest call plus the lease's validity",
				round, dl.Sub(bound))
		}
		q.Release()
	}
	require.Positive(t, checked, "no round was ended by the delayed message: the test proved nothing")
	assert.Positive(t, px.slowed.Load())
}

// Scenario 4, made deterministic: a holder from before a restart of Redis
// is cut off from the new Redis, so it cannot learn that its lease is gone
// and keeps its permit until its local deadline. The lane's state is
// re-created with a quarantine of one lease, which outlasts that deadline:
// the next grant comes after the old permit ended. With no quarantine the
// two overlap. The state is re-created by whichever call comes first: here
// by the acquire of the next holder, or by a refresh of its instance (whose
// permit on another key is found lost).
func TestRestartQuarantineOutlastsCutOffHolder(t *testing.T) {
	for _, byRefresh := range []bool{false, true} {
		t.Run(map[bool]string{false: "recreated-by-acquire", true: "recreated-by-refresh"}[byRefresh], func(t *testing.T) {
			srv := startRedis(t)
			name := laneName(t)
			// Long enough that the restart (and, by refresh, the detection)
			// ends within the old holder's validity on a loaded machine.
			const lease = 2 * time.Second
			px, rc, _ := proxied(t, srv.Addr, 100*time.Millisecond)
			// The old holder's instance makes the lane's first state without
			// a quarantine, to save the test a lease; it never reaches the
			// new Redis.
			a, err := redislane.NewKeyed(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)
			t.Cleanup(a.Close)
			b, err := redislane.NewKeyed(newClient(t, srv.Addr), name, 1, redislane.WithLease(lease), redislane.WithQuarantine(lease))
			require.NoError(t, err)
			t.Cleanup(b.Close)
			ctx := testCtx(t)

			old, err := a.Acquire(ctx, "k")
			require.NoError(t, err)
			var other *redislane.Permit
			if byRefresh {
				other, err = b.Acquire(ctx, "other")
				require.NoError(t, err)
				defer other.Release()
			}
			px.black.Store(true)
			require.NoError(t, srv.Restart())
			if byRefresh {
				testkit.Within(t, 10*lease, "a refresh to find the other permit gone", other.Context().Done())
				require.ErrorIs(t, context.Cause(other.Context()), redislane.ErrLeaseLost)
			}
			require.NoError(t, old.Context().Err(), "the restart outlasted the old holder's lease: the test proves nothing")

			p, err := b.Acquire(ctx, "k")
			require.NoError(t, err)
			start := redistest.Now()
			testkit.Within(t, 10*lease, "the cut-off holder's lease to end", old.Context().Done())
			assert.ErrorIs(t, context.Cause(old.Context()), redislane.ErrLeaseExpired)
			assert.LessOrEqual(t, endOf(old.Deadline()), start,
				"a holder from before the restart still held its permit when a new one was granted")
			assert.Greater(t, p.Fence(), old.Fence(), "fencing tokens went backwards across the restart")
			p.Release()
			px.black.Store(false)
			old.Release()
		})
	}
}
