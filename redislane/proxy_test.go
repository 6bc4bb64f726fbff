package redislane_test

import (
	"bytes"
	"context"
	"net"
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

// faultProxy is a TCP proxy on loopback between a client and Redis that can
// delay or drop the reply to the next script call, or drop all traffic.
type faultProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool

	armed  atomic.Pointer[fault]         // for the reply to the next EVALSHA/EVAL
	black  atomic.Bool                   // drop everything, both ways
	mute   atomic.Bool                   // drop pub/sub messages to the client
	muted  atomic.Int64                  // pub/sub messages dropped
	deaf   atomic.Bool                   // drop subscription confirmations to the client
	subs   atomic.Int64                  // SUBSCRIBE commands from the client
	slow   atomic.Int64                  // delay (ns) of each pub/sub message to the client
	slowed atomic.Int64                  // pub/sub messages delayed
	held   atomic.Pointer[chan struct{}] // if set: pub/sub messages wait until it is closed
}

type fault struct {
	delay time.Duration
	drop  bool
	done  chan struct{} // closed once the reply was delayed and sent, or dropped
}

func startProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{ln: ln, target: target, conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// arm makes the proxy delay (or drop) the reply to the next script call,
// and returns a channel closed when that is done.
func (p *faultProxy) arm(delay time.Duration, drop bool) <-chan struct{} {
	f := &fault{delay: delay, drop: drop, done: make(chan struct{})}
	p.armed.Store(f)
	return f.done
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		var pending atomic.Pointer[fault]
		p.wg.Add(2)
		go p.pipe(c, s, func(b []byte) bool { // client to server
			p.subs.Add(int64(bytes.Count(b, subscribeFrame) + bytes.Count(b, ssubscribeFrame)))
			if bytes.Contains(bytes.ToLower(b), []byte("eval")) {
				if f := p.armed.Swap(nil); f != nil {
					pending.Store(f)
				}
			}
			return true
		})
		go p.pipe(s, c, func(b []byte) bool { // server to client
			if p.deaf.Load() && isConfirmation(b) {
				return false
			}
			if p.mute.Load() && bytes.Contains(b, []byte("message")) {
				p.muted.Add(1)
				return false
			}
			if h := p.held.Load(); h != nil && bytes.Contains(b, []byte("message")) {
				<-*h
			}
			if d := p.slow.Load(); d > 0 && bytes.Contains(b, []byte("message")) {
				p.slowed.Add(1)
				time.Sleep(time.Duration(d)) // the network is slow on this connection
			}
			f := pending.Swap(nil)
			if f == nil {
				return true
			}
			if bytes.HasPrefix(b, []byte("-NOSCRIPT")) {
				// Not the script's reply: the client sends the script
				// itself next, and the fault waits for that reply.
				pending.Store(f)
				return true
			}
			defer close(f.done)
			if f.drop {
				return false
			}
			time.Sleep(f.delay) // the network is slow
			return true
		})
	}
}

// subscribeFrame and ssubscribeFrame are the command names of a SUBSCRIBE
// and an SSUBSCRIBE (sharded pub/sub), and of Redis's confirmation of
// them, as RESP bulk strings.
var (
	subscribeFrame  = []byte("$9\r\nsubscribe\r\n")
	ssubscribeFrame = []byte("$10\r\nssubscribe\r\n")
)

// isConfirmation reports whether chunk b is one confirmation of a
// SUBSCRIBE or SSUBSCRIBE and nothing else: an array (RESP2) or push
// (RESP3) of three that starts with the command name.
func isConfirmation(b []byte) bool {
	for _, f := range [][]byte{subscribeFrame, ssubscribeFrame} {
		if len(b) > 2 && (b[0] == '*' || b[0] == '>') && b[1] == '3' &&
			bytes.HasPrefix(b[2:], append([]byte("\r\n"), f...)) &&
			bytes.Count(b, f) == 1 && bytes.Count(b, []byte{b[0]}) == 1 {
			return true
		}
	}
	return false
}

// pipe copies from src to dst, passing each chunk through keep.
func (p *faultProxy) pipe(src, dst net.Conn, keep func([]byte) bool) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.black.Load() && keep(buf[:n]) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxied returns a client to Redis through a new proxy, with go-redis's
// own retries off, so that the retries under test are the lane's.
func proxied(t *testing.T, srv string, readTimeout time.Duration) (*faultProxy, *redis.Client, *redistest.Calls) {
	px := startProxy(t, srv)
	var cnt redistest.Calls
	rc := newClient(t, px.addr(), func(o *redis.Options) {
		o.MaxRetries = -1
		o.ReadTimeout = readTimeout
		o.WriteTimeout = readTimeout
	})
	rc.AddHook(&cnt)
	return px, rc, &cnt
}

// holderState returns the lane's holders and the fencing counter, read
// directly from Redis.
func holderState(t *testing.T, rc *redis.Client, name string) (ids []string, fences []int64, counter int64) {
	t.Helper()
	ctx := context.Background()
	prefix := "{lanes:" + name + "}"
	ids, err := rc.ZRange(ctx, prefix+":g:h", 0, -1).Result()
	require.NoError(t, err)
	for _, id := range ids {
		f, err := rc.HGet(ctx, prefix+":g:d", "f:"+id).Int64()
		require.NoError(t, err)
		fences = append(fences, f)
	}
	counter, err = rc.HGet(ctx, prefix+":meta", "fence").Int64()
	require.NoError(t, err)
	return ids, fences, counter
}

func warm(t *testing.T, s *redislane.Weighted) {
	t.Helper()
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	p.Release()
}

// Scenario 5a: a grant whose reply comes back later than the lease's
// margin is not used; the lane asks again with the same id, and Redis
// returns the same grant with a fresh lease. Redis holds one entry.
func TestLateReplyNeverYieldsPermit(t *testing.T) {
	for _, delay := range []time.Duration{400 * time.Millisecond, 1300 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			srv := startRedis(t)
			direct := newClient(t, srv.Addr)
			px, rc, cnt := proxied(t, srv.Addr, 5*time.Second)
			const lease = time.Second // margin 200 ms
			name := laneName(t)
			s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(lease), redislane.WithQuarantine(0))
			require.NoError(t, err)
			defer s.Close()
			warm(t, s)

			done := px.arm(delay, false)
			evals := cnt.Evals()
			p, err := s.Acquire(testCtx(t), 2)
			require.NoError(t, err)
			calls := cnt.Evals() - evals
			st := s.Stats() // before the permit's first refresh, a third of a lease on
			testkit.Within(t, 30*time.Second, "the delayed reply", done)
			defer p.Release()

			// The call gives up at the margin (its deadline), or its reply
			// comes back too late to be used: either way it is asked again.
			// On a loaded machine a retry can be late too (margin 200 ms),
			// so count: every call but the last was given up.
			assert.Positive(t, st.LateReplies+st.RedisErrors, "the late reply was used")
			assert.EqualValues(t, 1+st.LateReplies+st.RedisErrors, calls, "calls that were given up, and the timely one")
			ids, fences, counter := holderState(t, direct, name)
			require.Len(t, ids, 1, "Redis holds more than one grant")
			assert.Equal(t, p.Fence(), fences[0])
			assert.Equal(t, p.Fence(), counter, "a second grant was made")
			assert.NoError(t, p.Context().Err())
		})
	}
}

// Scenario 5b: the reply to a granting call is lost. The lane retries with
// the same permit id, and Redis answers with the grant it already made:
// one holder, one fencing token, and the retry was not queued behind the
// lost grant (which holds the whole limit).
func TestLostReplyNeverGrantsTwice(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	px, rc, _ := proxied(t, srv.Addr, 300*time.Millisecond)
	const lease = 5 * time.Second
	name := laneName(t)
	s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	done := px.arm(0, true)
	ctx, cancel := context.WithTimeout(context.Background(), lease/2) // shorter than the lost grant's lease
	defer cancel()
	p, err := s.Acquire(ctx, 2)
	require.NoError(t, err, "the retry waited behind the lost grant")
	testkit.Within(t, 30*time.Second, "the reply to be dropped", done)
	defer p.Release()

	assert.Positive(t, s.Stats().RedisErrors, "the reply was not lost")
	ids, fences, counter := holderState(t, direct, name)
	require.Len(t, ids, 1, "Redis holds more than one grant")
	assert.Equal(t, p.Fence(), fences[0])
	assert.Equal(t, p.Fence(), counter, "a second grant was made")
	held, err := direct.HGet(context.Background(), "{lanes:"+name+"}:g:d", "held").Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 2, held)
}

// A caller whose context ends while its call is delayed returns at once;
// the grant that arrives later is released in the background, never
// returned.
func TestCancelledCallInFlightReleasesLateGrant(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	px, rc, _ := proxied(t, srv.Addr, 5*time.Second)
	name := laneName(t)
	// A margin (2 s) longer than the delay, so that the late grant is
	// released by a call that gets through, on a loaded machine too: a
	// grant left to expire stays in the sorted set until a call removes it.
	s, err := redislane.NewWeighted(rc, name, 2, redislane.WithLease(10*time.Second), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	warm(t, s)

	done := px.arm(time.Second, false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = s.Acquire(ctx, 2)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case <-done:
		t.Fatal("Acquire waited for the delayed reply")
	default:
	}
	testkit.Within(t, 30*time.Second, "the delayed reply", done)
	waitFor(t, 5*time.Second, "the late grant to be released", func() bool {
		return direct.ZCard(context.Background(), "{lanes:"+name+"}:g:h").Val() == 0
	})
	p, ok := s.TryAcquire(2)
	require.True(t, ok)
	p.Release()
}

// When Redis cannot be reached, no refresh succeeds, and the permit's
// context is cancelled with ErrLeaseExpired once its local deadline passes.
func TestUnreachableRedisExpiresLease(t *testing.T) {
	srv := startRedis(t)
	px, rc, _ := proxied(t, srv.Addr, 100*time.Millisecond)
	const lease = 500 * time.Millisecond
	s, err := redislane.NewWeighted(rc, laneName(t), 2, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer s.Close()
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	deadline := p.Deadline()

	px.black.Store(true)
	select {
	case <-p.Context().Done():
	case <-time.After(10 * lease):
		t.Fatal("the lease never ended")
	}
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrLeaseExpired)
	assert.False(t, p.Deadline().After(deadline), "the deadline moved without a successful refresh")
	assert.EqualValues(t, 1, s.Stats().LeasesExpired)
	px.black.Store(false)
	assert.True(t, p.Release())
}

// Pub/sub drops messages (here: all of them, to one process). A waiter
// whose hand-over message is lost still gets its units: it asks again after
// the hint, and Redis answers with the grant it made.
func TestLostWakeUpIsCoveredByPolling(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	holder := newSem(t, srv.Addr, name, 1)
	px, rc, _ := proxied(t, srv.Addr, 5*time.Second)
	waiter, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer waiter.Close()
	warm(t, waiter) // subscribes
	px.mute.Store(true)

	ctx := testCtx(t)
	p, err := holder.Acquire(ctx, 1)
	require.NoError(t, err)
	got := make(chan *redislane.Permit)
	go func() {
		q, err := waiter.Acquire(ctx, 1)
		assert.NoError(t, err)
		got <- q
	}()
	direct := newClient(t, srv.Addr)
	waitFor(t, 5*time.Second, "the waiter to queue", func() bool {
		return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})
	p.Release() // hands the unit over; the message is dropped
	q := testkit.Within(t, 30*time.Second, "the grant", got)
	if q != nil {
		q.Release()
	}
	assert.Positive(t, px.muted.Load(), "no message was dropped")
	st := waiter.Stats()
	assert.Zero(t, st.Handovers)
	assert.Positive(t, st.Polls)
}

// The first waiter of a lane subscribes to the lane's channel and waits a
// while for Redis to confirm. A waiter whose context ends, or whose lane is
// closed, meanwhile stops waiting at once. Before, it waited out the whole
// confirmation wait (250 ms, here lengthened to an hour, so that the old
// code fails by timing out).
func TestWaiterStopsWaitingForTheSubscription(t *testing.T) {
	defer redislane.SetConfirmWait(time.Hour)()
	srv := startRedis(t)
	name := laneName(t)
	px, rc, _ := proxied(t, srv.Addr, 5*time.Second)
	px.deaf.Store(true) // Redis never confirms the subscription

	s, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var res <-chan error
	// result fails the test, rather than hang it, if the waiter does not
	// return (the old code would wait out the hour).
	result := func() error {
		select {
		case err := <-res:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter did not return")
			return nil
		}
	}
	res = acquireAsync(ctx, s)
	waitFor(t, 5*time.Second, "the waiter to subscribe", func() bool { return px.subs.Load() > 0 })
	cancel()
	require.ErrorIs(t, result(), context.Canceled)

	// The subscription is still unconfirmed; the next waiter waits for it
	// too, until the lane is closed.
	res = acquireAsync(context.Background(), s)
	waitFor(t, 5*time.Second, "the second waiter to queue", func() bool { return s.Stats().Waiters > 0 })
	s.Close()
	require.ErrorIs(t, result(), redislane.ErrClosed)
}
