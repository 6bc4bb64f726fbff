package semaphore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// A context (or a WithMaxWait deadline) that ends strictly before the
// release that would grant a waiter must win: the waiter gets the ending's
// error, its permits go on to the waiters behind it, and Stats count it as
// cancelled (or timed out), never as acquired. The class of
// go.dev/issue/63615 (issue 11, defect 1).
//
// A waiter that is already parked when its context ends is woken by the
// Done channel, so the race is only open between the moment it has queued
// and the moment it starts to wait: if both the grant and the ending are
// ready by then, a select picks one at random. The tests hold the waiter
// in that window with a gate in its context's Done (called once the waiter
// has queued, before it waits) or in its clock's NewTimer (likewise), end
// its wait and grant it while it is held there, and then let it go on.

// gate holds the first caller of pass until open is called.
type gate struct {
	armed   atomic.Bool
	reached chan struct{}
	opened  chan struct{}
}

func newGate() *gate {
	g := &gate{reached: make(chan struct{}), opened: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *gate) pass() {
	if g.armed.CompareAndSwap(true, false) {
		close(g.reached)
		<-g.opened
	}
}

// await waits until a caller is held in pass.
func (g *gate) await(t *testing.T) {
	t.Helper()
	waitFor(t, "the waiter to reach the gate", func() bool {
		select {
		case <-g.reached:
			return true
		default:
			return false
		}
	})
}

func (g *gate) open() { close(g.opened) }

// gatedCtx is a context whose first Done call waits at a gate.
type gatedCtx struct {
	context.Context
	g *gate
}

func (c gatedCtx) Done() <-chan struct{} {
	c.g.pass()
	return c.Context.Done()
}

// gatedClock is a fake clock whose first NewTimer waits at a gate, after
// the timer is armed.
type gatedClock struct {
	*clock.Fake
	g *gate
}

func (c gatedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.g.pass()
	return t
}

const (
	endRounds   = 1000
	endCapacity = 3
	endMaxWait  = time.Second
)

// endRound is one round: the permits are all held; waiter A (weight 2,
// held at its gate) waits; B, which needs A's permits, waits behind it.
// A's wait ends, then permits come free for A (a release, or a grow by
// SetCapacity), then A goes on. A must fail with the ending's error, B
// must be served, and every permit must come back.
type endRound struct {
	t       *testing.T
	s       *semaphore.Weighted
	clk     *clock.Fake
	g       *gate
	ctx     context.Context
	end     func()
	wantErr error
}

func newEndRound(t *testing.T, maxWait bool, capacity int64, opts ...semaphore.Option) *endRound {
	r := &endRound{t: t, g: newGate()}
	if maxWait {
		r.clk = clock.NewFake(time.Unix(1_700_000_000, 0))
		r.s = semaphore.New(capacity, append([]semaphore.Option{semaphore.WithMaxWait(endMaxWait),
			semaphore.WithClock(gatedClock{r.clk, r.g})}, opts...)...)
		r.ctx = context.Background()
		r.end = func() { r.clk.Advance(endMaxWait / 2) }
		r.wantErr = semaphore.ErrWaitTooLong
		return r
	}
	r.s = semaphore.New(capacity, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.ctx = gatedCtx{ctx, r.g}
	r.end = cancel
	r.wantErr = context.Canceled
	return r
}

// queueA starts A's call and returns once A has queued and is held at the
// gate. B is queued behind A, weight b.
func (r *endRound) queueA(call func() <-chan result, b int64) (a, bch <-chan result) {
	t := r.t
	t.Helper()
	a = call()
	r.g.await(t)
	waitFor(t, "A to queue", func() bool { return r.s.Stats().Waiters == 1 })
	if r.clk != nil {
		// A's timer is armed: B's must run out later than A's.
		r.clk.Advance(endMaxWait / 2)
	}
	bch = enqueue(t, context.Background(), r.s, b)
	if r.clk != nil {
		r.clk.BlockUntilPending(2)
	}
	return a, bch
}

func (r *endRound) check(round int, ra result, b <-chan result, extraHeld []semaphore.Permit, wantAcquired uint64) {
	t := r.t
	t.Helper()
	if ra.err == nil {
		ra.p.Release() // let B through, so that the round ends cleanly
		_ = recv(t, b).p.Release()
	}
	require.Equal(t, r.wantErr, ra.err, "round %d: A's wait ended before the permits came free: it must fail with that error", round)
	require.False(t, ra.p.Weight() != 0, "round %d", round)
	rb := recv(t, b)
	require.NoError(t, rb.err, "round %d: A's permits must go on to B", round)
	st := r.s.Stats()
	require.Equal(t, st.Capacity, st.Available+st.Held, "round %d: %+v", round, st)
	want := rb.p.Weight()
	for _, p := range extraHeld {
		want += p.Weight()
	}
	require.Equal(t, want, st.Held, "round %d: only B (and what the test holds) hold permits: %+v", round, st)
	require.True(t, rb.p.Release())
	for _, p := range extraHeld {
		require.True(t, p.Release())
	}
	q := take(t, r.s, st.Capacity)
	require.True(t, q.Release())
	st = requireBalanced(t, r.s)
	require.Equal(t, wantAcquired, st.Acquired, "round %d: A's grant handed back is not an acquire: %+v", round, st)
	require.Equal(t, uint64(1), st.Waited, "round %d: only B was granted after waiting: %+v", round, st)
	if r.clk != nil {
		require.Equal(t, uint64(1), st.TimedOut, "round %d: %+v", round, st)
		require.Zero(t, st.Cancelled, "round %d: %+v", round, st)
		require.Zero(t, r.clk.Pending(), "round %d: every timer is stopped", round)
	} else {
		require.Equal(t, uint64(1), st.Cancelled, "round %d: %+v", round, st)
		require.Zero(t, st.TimedOut, "round %d: %+v", round, st)
	}
}

// The ways permits come free for A after its wait ended, taken in turn.
const (
	byRelease = iota // the holder releases every permit
	byGrow           // SetCapacity adds the two permits A and B need
	bySpare          // a release, with every inline token out: A's grant takes a spare token
	grantKinds
)

// endThenGrant runs round i: call starts A's call (waiting for 2 permits),
// whose wait ends (a cancel, or with maxWait its max wait running out)
// before permits come free for it as kind says. opts are given to New too
// (a barging semaphore runs these rounds as well).
func endThenGrant(t *testing.T, i int, maxWait bool, kind int, call func(*endRound) <-chan result, opts ...semaphore.Option) {
	t.Helper()
	const inline = semaphore.InlineTokens
	capacity := int64(endCapacity)
	if kind == bySpare {
		capacity = inline + 2
	}
	r := newEndRound(t, maxWait, capacity, opts...)
	var others []semaphore.Permit // held by the test to the end of the round
	if kind == bySpare {
		for range inline {
			others = append(others, take(t, r.s, 1))
		}
	}
	h := take(t, r.s, capacity-int64(len(others)))
	// B can be served only with A's permits.
	bWeight := h.Weight()
	if kind == byGrow {
		bWeight = 2
	}
	a, b := r.queueA(func() <-chan result { return call(r) }, bWeight)
	r.end()
	if kind == byGrow {
		r.s.SetCapacity(capacity + 2)
		others = append(others, h)
	} else {
		require.True(t, h.Release())
	}
	r.g.open()
	wantAcquired := uint64(3) // h, B, and the test's check that all permits are back
	if kind == bySpare {
		wantAcquired += inline
	}
	r.check(i, recv(t, a), b, others, wantAcquired)
}

// TestEndBeforeReleaseWinsRace: A's context is cancelled (or its WithMaxWait
// deadline passes, every other round), then permits come free for it (a
// release, a grow, or a release whose grant takes a spare token, in turn);
// A is held between queueing and waiting meanwhile, so that the grant and
// the ending are both ready when it waits. On the code before the fix about
// half the rounds returned a permit to A.
func TestEndBeforeReleaseWinsRace(t *testing.T) {
	for i := range endRounds {
		endThenGrant(t, i, i%2 == 1, i/2%grantKinds, func(r *endRound) <-chan result {
			return acquireAsync(r.ctx, r.s, 2)
		})
	}
}

// TestDoEndBeforeReleaseWinsRace is TestEndBeforeReleaseWinsRace through Do:
// fn must not run.
func TestDoEndBeforeReleaseWinsRace(t *testing.T) {
	for i := range endRounds {
		var ran atomic.Bool
		endThenGrant(t, i, i%2 == 1, i/2%grantKinds, func(r *endRound) <-chan result {
			ch := make(chan result, 1)
			go func() {
				err := r.s.Do(r.ctx, 2, func(context.Context) error { ran.Store(true); return nil })
				ch <- result{err: err}
			}()
			return ch
		})
		require.False(t, ran.Load(), "round %d: Do ran fn although its wait had ended first", i)
	}
}
