package redislane_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// gate is a go-redis hook that, once armed, lets the next call of the
// acquire script run in Redis and then holds its reply back until opened,
// when the reply is lost: the caller sees an error. It also counts the
// acquire calls that came back with a reply.
type gate struct {
	commandHook
	mu       sync.Mutex
	executed chan struct{} // armed: closed once the held call ran in Redis
	open     chan struct{} // armed: closed to let the held call fail

	replies atomic.Int64 // acquire calls answered
}

var errReplyLost = errors.New("test: reply lost")

// isAcquireCall tells a call of the acquire script.
func isAcquireCall(cmd redis.Cmder) bool { return redislane.ScriptOf(cmd) == "acquire" }

func (g *gate) arm() (executed <-chan struct{}, open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.executed, g.open = make(chan struct{}), make(chan struct{})
	o := g.open
	return g.executed, func() { close(o) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isAcquireCall(cmd) {
			return next(ctx, cmd)
		}
		g.mu.Lock()
		executed, open := g.executed, g.open
		g.executed, g.open = nil, nil
		g.mu.Unlock()
		err := next(ctx, cmd)
		if executed == nil {
			if err == nil {
				g.replies.Add(1)
			}
			return err
		}
		close(executed)
		<-open
		cmd.SetErr(errReplyLost)
		return errReplyLost
	}
}

// A hand-over message that reaches a waiter while it is inside a call stays
// buffered. Here the waiter then cannot reach Redis until the grant made for
// it has expired and another instance has taken the only unit; its next
// call answers "queued". The buffered message was made for the queue entry
// that expired, not for the new one, and must not become a permit: before,
// the waiter returned a permit that Redis did not hold, next to the real
// holder's, with a limit of 1.
func TestStaleHandoverNeverYieldsPermit(t *testing.T) {
	srv := startRedis(t)
	direct := newClient(t, srv.Addr)
	name := laneName(t)
	const lease = 500 * time.Millisecond
	a := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease))
	px, rc, _ := proxied(t, srv.Addr, 100*time.Millisecond)
	var g gate
	rc.AddHook(&g)
	b, err := redislane.NewWeighted(rc, name, 1, redislane.WithLease(lease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	defer b.Close()
	warm(t, b) // subscribes

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p1, err := a.Acquire(ctx, 1)
	require.NoError(t, err)

	type result struct {
		p   *redislane.Permit
		err error
	}
	got := make(chan result, 1)
	go func() {
		p, err := b.Acquire(ctx, 1)
		got <- result{p, err}
	}()
	waitFor(t, 5*time.Second, "b to queue", func() bool {
		return direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val() == 1
	})

	// b's next call runs in Redis (b stays queued) and its reply is held.
	// The hook ignores the call's deadline, so the gate is opened whatever
	// happens: a test that fails before would otherwise hang in b.Close,
	// which waits for the call.
	executed, openGate := g.arm()
	var opened sync.Once
	open := func() { opened.Do(openGate) }
	defer open()
	select {
	case <-executed:
	case <-time.After(10 * time.Second):
		t.Fatal("b made no call")
	}
	delivered := redislane.Delivered(b)
	p1.Release() // hands the unit to b's entry; b is inside its call
	waitFor(t, 5*time.Second, "the hand-over message to reach b", func() bool {
		return redislane.Delivered(b) > delivered
	})
	px.black.Store(true) // b cannot reach Redis: its grant is not refreshed
	open()               // the held reply is lost

	// Once b's grant expired, a takes the unit.
	p2, err := a.Acquire(ctx, 1)
	require.NoError(t, err, "a never got the unit b could not keep")
	defer p2.Release()

	replies := g.replies.Load()
	px.black.Store(false)
	// b's next call finds its entry gone and queues it again. With the
	// fault, b took the buffered message as the grant of the new entry.
	waitFor(t, 10*time.Second, "b to ask Redis three times", func() bool {
		select {
		case r := <-got:
			if r.err == nil {
				r.p.Release()
			}
			t.Fatalf("b's Acquire returned (%v) while a holds the only unit", r.err)
		default:
		}
		return g.replies.Load() >= replies+3
	})
	assert.EqualValues(t, 1, direct.ZCard(ctx, "{lanes:"+name+"}:g:q").Val(), "b is not queued")
	assert.Positive(t, b.Stats().StaleHandovers, "the stale message was not seen")

	p2.Release() // now b's entry is handed the unit
	select {
	case r := <-got:
		require.NoError(t, r.err)
		assert.Greater(t, r.p.Fence(), p2.Fence())
		r.p.Release()
	case <-time.After(10 * time.Second):
		t.Fatal("b never got the unit")
	}
}

// A permit that is never released does not outlive its lane: Close ends it
// (cause ErrClosed) and stops refreshing its lease, so its units come back
// to the other instances within one lease. Before, it was refreshed for as
// long as the process lived.
func TestCloseEndsPermitNeverReleased(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	s, err := redislane.NewWeighted(newClient(t, srv.Addr), name, 1, redislane.WithLease(testLease), redislane.WithQuarantine(0))
	require.NoError(t, err)
	other := newSem(t, srv.Addr, name, 1)
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)

	s.Close()
	select {
	case <-p.Context().Done():
	default:
		t.Fatal("Close left the permit's context alive")
	}
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrClosed)
	assert.False(t, p.Deadline().After(time.Now()), "the deadline is after the end")

	ctx, cancel := context.WithTimeout(context.Background(), 10*testLease)
	defer cancel()
	q, err := other.Acquire(ctx, 1)
	require.NoError(t, err, "the closed instance still holds the unit")
	assert.Greater(t, q.Fence(), p.Fence())
	q.Release()
	assert.True(t, p.Release(), "the first Release of an ended permit")
	assert.False(t, p.Release())
}

// WithMaxHold ends a permit that is held too long, with its own cause, and
// stops refreshing its lease: its units come back within one lease while
// the holder still has it. The lease is long enough for a loaded machine
// (a refresh may come 700 ms late): with 500 ms, the permit's lease
// expired before its longest hold under load.
func TestMaxHoldEndsPermit(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	const lease = 1500 * time.Millisecond
	const hold = 3 * lease / 2 // longer than a lease: refreshed at least once
	s := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease), redislane.WithMaxHold(hold))
	other := newSem(t, srv.Addr, name, 1, redislane.WithLease(lease))
	start := time.Now()
	p, err := s.Acquire(testCtx(t), 1)
	require.NoError(t, err)
	assert.False(t, p.Deadline().After(start.Add(hold).Add(time.Second)), "deadline past the longest hold")

	select {
	case <-p.Context().Done():
	case <-time.After(20 * lease):
		t.Fatal("the permit outlived its longest hold")
	}
	end := time.Now()
	assert.ErrorIs(t, context.Cause(p.Context()), redislane.ErrMaxHold)
	assert.EqualValues(t, 1, s.Stats().MaxHolds)
	assert.Zero(t, s.Stats().LeasesExpired)
	assert.False(t, end.Before(start.Add(hold)), "ended before its longest hold")
	t.Logf("held %v with WithMaxHold(%v)", end.Sub(start), hold)

	ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
	defer cancel()
	q, err := other.Acquire(ctx, 1)
	require.NoError(t, err, "the lease was still refreshed")
	q.Release()
	assert.True(t, p.Release())

	_, err = redislane.NewWeighted(newClient(t, srv.Addr), name, 1, redislane.WithMaxHold(-time.Second))
	assert.ErrorIs(t, err, redislane.ErrInvalidConfig)
}
