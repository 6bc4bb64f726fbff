package redislane_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// slack is what the bound tests allow on top of a documented bound, for a
// loaded machine under -race. The faults they pin cost seconds.
const slack = time.Second

// laneGoroutines returns the stacks of the goroutines running code of the
// package (not of its tests).
func laneGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sessionlane/lanes/redislane.") {
			out = append(out, g)
		}
	}
	return out
}

// laneGoroutines after Close: a goroutine whose exit Close has set off
// (the pub/sub hub's receive loop ends once its last watcher is gone) may
// still be on its way out when Close returns, so the look is repeated for a
// while before what is left counts as left behind (as goleak does).
func laneGoroutinesAfterClose() []string {
	left := laneGoroutines()
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = laneGoroutines() {
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling, not synchronising: the loop has no event to wait on
	}
	return left
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// A client without ContextTimeoutEnabled would ignore the deadlines of the
// lane's calls; it is refused with a clear error. With the option, the same
// lane is made.
func TestClientWithoutContextTimeoutsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(cte bool) redis.UniversalClient
	}{
		{"client", func(cte bool) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: cte})
		}},
		{"cluster", func(cte bool) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: cte})
		}},
		{"ring", func(cte bool) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: cte})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cte := range []bool{false, true} {
				rc := tc.client(cte)
				s, err := redislane.NewWeighted(rc, "refused", 1)
				k, kerr := redislane.NewKeyed(rc, "refused", 1)
				if cte {
					require.NoError(t, err)
					require.NoError(t, kerr)
					s.Close()
					k.Close()
				} else {
					require.ErrorIs(t, err, redislane.ErrInvalidConfig)
					require.ErrorIs(t, kerr, redislane.ErrInvalidConfig)
					assert.Contains(t, err.Error(), "ContextTimeoutEnabled")
				}
				_ = rc.Close()
			}
		})
	}
}

// Release returns within its bound (a fifth of the lease, at most 250 ms)
// when Redis does not answer; the release goes on in the background and
// the lease runs out anyway. Before, Release blocked for a whole lease.
func TestReleaseReturnsPromptlyRedisBlackHoled(t *testing.T) {
	srv := startRedis(t)
	px, rc, _ := proxied(t, srv.Addr, 5*time.Second)
	const lease = 5 * time.Second
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)

	px.black.Store(true)
	bound := min(lease/5, 250*time.Millisecond)
	el := timed(func() { assert.True(t, p.Release()) })
	t.Logf("Release with Redis black-holed: %v (bound %v, lease %v)", el, bound, lease)
	assert.Less(t, el, bound+slack, "Release blocked")

	el = timed(s.Close)
	t.Logf("Close after it, with the release in flight: %v (bound %v)", el, lease/3+250*time.Millisecond)
	assert.Less(t, el, lease/3+250*time.Millisecond+slack)
	assert.Empty(t, laneGoroutinesAfterClose(), "goroutines left behind by Close")
}

// TryAcquire makes one call with a deadline of a fifth of the lease, and
// returns by it when Redis does not answer. The fault it pins costs the
// client's ReadTimeout (10 s here), so it allows twice the slack: under a
// load of 15, 400 ms took 1.45 s.
func TestTryAcquireReturnsWithinMarginRedisBlackHoled(t *testing.T) {
	srv := startRedis(t)
	px, rc, _ := proxied(t, srv.Addr, 10*time.Second)
	const lease = 2 * time.Second
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	px.black.Store(true)
	var ok bool
	el := timed(func() { _, ok = s.TryAcquire(1) })
	t.Logf("TryAcquire with Redis black-holed: %v (bound %v)", el, lease/5)
	assert.False(t, ok)
	assert.Less(t, el, lease/5+2*slack, "TryAcquire blocked")
}

// Close returns within its bound (a third of the lease, plus 250 ms) when
// Redis does not answer, whatever is going on: a permit out, a waiter
// queued in Redis and one in the local line, both with contexts that never
// end, and (in "first use") a subscription that Redis never confirms. It
// sends the waiters away with ErrClosed, ends the permit, and leaves no
// goroutine of the package behind. Before, Close blocked for seconds and
// could not end an Acquire whose context never ends.
func TestCloseReturnsWithinBoundRedisBlackHoled(t *testing.T) {
	const lease = 2 * time.Second
	bound := lease/3 + 250*time.Millisecond
	for _, firstUse := range []bool{false, true} {
		name := "in use"
		if firstUse {
			name = "first use"
		}
		t.Run(name, func(t *testing.T) {
			srv := startRedis(t)
			direct := newClient(t, srv.Addr)
			px, rc, _ := proxied(t, srv.Addr, 5*time.Second)
			lane := laneName(t)
			s, err := redislane.NewWeighted(rc, lane, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)

			var p *redislane.Permit
			nwait := 2
			if firstUse {
				px.black.Store(true) // the first waiter subscribes into the void
				nwait = 1
			} else {
				p, err = s.Acquire(testCtx(t), 1)
				require.NoError(t, err)
			}
			errs := make(chan error, nwait)
			var wg sync.WaitGroup
			for i := range nwait {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q, err := s.Acquire(context.Background(), 1)
					if err == nil {
						q.Release()
					}
					errs <- err
				}()
				if i == 0 && !firstUse {
					waitFor(t, 5*time.Second, "the first waiter to queue in Redis", func() bool {
						return direct.ZCard(context.Background(), "{lanes:"+lane+"}:g:q").Val() == 1
					})
				}
			}
			waitFor(t, 5*time.Second, "the waiters", func() bool { return s.Stats().Waiters == nwait })
			px.black.Store(true)

			closed := make(chan time.Duration, 1)
			go func() { closed <- timed(s.Close) }()
			var el time.Duration
			select {
			case el = <-closed:
			case <-time.After(30 * time.Second):
				t.Fatal("Close did not return")
			}
			t.Logf("Close with Redis black-holed (%s): %v (bound %v)", name, el, bound)
			assert.Less(t, el, bound+slack, "Close blocked")
			for range nwait {
				select {
				case err := <-errs:
					assert.ErrorIs(t, err, redislane.ErrClosed)
				case <-time.After(10 * time.Second):
					t.Fatal("a waiter did not return after Close")
				}
			}
			wg.Wait()
			if p != nil {
				assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrClosed)
				el := timed(func() { assert.True(t, p.Release()) })
				assert.Less(t, el, slack, "Release after Close blocked")
			}
			assert.Empty(t, laneGoroutinesAfterClose(), "goroutines left behind by Close")
		})
	}
}

// slowReplies is a go-redis hook that, while on, holds every reply to the
// acquire script for a while after Redis sent it (a slow network), and
// records when each acquire call starts and when its reply is returned.
type slowReplies struct {
	commandHook
	delay time.Duration

	mu     sync.Mutex
	on     bool
	starts []time.Time
	ends   []time.Time
}

func (h *slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isAcquireCall(cmd) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		on := h.on
		if on {
			h.starts = append(h.starts, time.Now())
		}
		h.mu.Unlock()
		err := next(ctx, cmd)
		if on {
			time.Sleep(h.delay) // the reply is on its way
			h.mu.Lock()
			h.ends = append(h.ends, time.Now())
			h.mu.Unlock()
		}
		return err
	}
}

// A reply that comes back later than the margin is not used, and the call
// is made again after a backoff, as after any failed call: never at once,
// in a loop. Before, the lane asked again at once.
func TestLateReplyBacksOff(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	const lease = 500 * time.Millisecond // margin 100 ms
	h := &slowReplies{delay: lease/5 + 20*time.Millisecond}
	rc.AddHook(h)
	s, err := redislane.NewWeighted(rc, laneName(t), 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	h.mu.Lock()
	h.on = true
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := acquireAsync(ctx, s)
	const late = 4
	waitFor(t, 10*time.Second, "late replies", func() bool { return s.Stats().LateReplies >= late })
	cancel()
	select {
	case <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 1; i < len(h.starts) && i < len(h.ends); i++ {
		gap := h.starts[i].Sub(h.ends[i-1])
		// The shortest backoff is 5 ms, jittered down to 3.75 ms.
		assert.GreaterOrEqual(t, gap, 3*time.Millisecond, "call %d was sent %v after the late reply to call %d", i, gap, i-1)
	}
}
