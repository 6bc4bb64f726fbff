package redislane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/semaphore"
)

// newSeqKeyed returns an instance of the sequenced keyed lane name, with
// a per-key capacity of 1, on a client of its own (an instance of the
// fleet), and the options given after the test's lease.
func newSeqKeyed(t *testing.T, addr, name string, opts ...redislane.Option) *redislane.Keyed {
	t.Helper()
	opts = append([]redislane.Option{redislane.WithLease(testLease), redislane.WithQuarantine(0), redislane.WithSequenceOrder()}, opts...)
	k, err := redislane.NewKeyed(newClient(t, addr), name, 1, opts...)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

// orderLease is the lease of the tests of order: a waiter whose poll comes
// later than its lease (testLease, 500 ms, is short enough for that on a
// loaded machine) loses its place in Redis, as it should, and the order
// the test expects with it (TestKeyedSequenceOrdersWaiters ran 0, 5, 4, 3
// once at load 11).
var orderLease = redislane.WithLease(10 * time.Second)

// waitersOf returns the callers waiting on the instances now.
func waitersOf(ks ...*redislane.Keyed) int {
	n := 0
	for _, k := range ks {
		n += k.Stats().Waiters
	}
	return n
}

// Round-robin routing over 3 instances: the numbered messages of a thread
// reach the instances out of order (each thread's are sent last first,
// each to the next instance in turn), and every thread's messages run in
// number order, one at a time. The hold (longer than the test) never runs
// out: the order comes from the scripts, not from a timer.
func TestKeyedSequenceRoundRobin(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	var fleet []*redislane.Keyed
	for range 3 {
		fleet = append(fleet, newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(time.Minute), orderLease))
	}
	ctx := testCtx(t)
	const threads, msgs = 8, 10

	var (
		mu       sync.Mutex
		ran      = make(map[string][]int64) // by thread, in the order they ran
		overlaps atomic.Int64
		inUse    [threads]atomic.Int64
		next     atomic.Int64 // the round-robin counter
	)
	handle := func(k *redislane.Keyed, i int, n int64) error {
		thread := fmt.Sprintf("thread-%d", i)
		p, err := k.Acquire(ctx, thread, semaphore.Sequence(n))
		if err != nil {
			return fmt.Errorf("%s message %d: %w", thread, n, err)
		}
		if inUse[i].Add(1) > 1 {
			overlaps.Add(1)
		}
		mu.Lock()
		ran[thread] = append(ran[thread], n)
		mu.Unlock()
		inUse[i].Add(-1)
		p.Release()
		return nil
	}
	route := func() *redislane.Keyed { return fleet[next.Add(1)%3] }

	// Each thread's first message opens it: a key that has granted no
	// number lets its first caller go, whatever its number.
	for i := range threads {
		require.NoError(t, handle(route(), i, 1))
	}
	errs := make(chan error, threads*msgs)
	var wg sync.WaitGroup
	for i := range threads {
		order := make([]int64, 0, msgs-1)
		for n := int64(msgs); n >= 2; n-- {
			order = append(order, n)
		}
		// Last first, with a few neighbours swapped.
		for range 3 {
			j := rand.IntN(len(order) - 1)
			order[j], order[j+1] = order[j+1], order[j]
		}
		for _, n := range order {
			k := route()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := handle(k, i, n); err != nil {
					errs <- err
				}
			}()
		}
	}
	testkit.Within(t, 40*time.Second, "every message to run", testkit.Go(func() bool { wg.Wait(); return true }))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := make([]int64, 0, msgs)
	for n := int64(1); n <= msgs; n++ {
		want = append(want, n)
	}
	for i := range threads {
		thread := fmt.Sprintf("thread-%d", i)
		assert.Equal(t, want, ran[thread], "%s ran out of order", thread)
	}
	assert.Zero(t, overlaps.Load(), "two messages of a thread ran at once")
	var out uint64
	for _, k := range fleet {
		out += k.Stats().HoldsRunOut
	}
	assert.Zero(t, out, "a hold ran out: the order came from the timer")
}

// A message whose predecessor never comes waits for the hold, then goes,
// and the grant is counted; a late predecessor then goes without a hold,
// after it.
func TestKeyedReorderHoldRunsOut(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(150*time.Millisecond))
	b := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(150*time.Millisecond))
	ctx := testCtx(t, 10*time.Second)

	p, err := a.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	p.Release()

	p3, err := b.Acquire(ctx, "t", semaphore.Sequence(3)) // 2 never came
	require.NoError(t, err, "message 3 never went: its hold did not run out")
	assert.EqualValues(t, 1, b.Stats().HoldsRunOut, "the hold that ran out is counted")

	// 2 comes late: at or below the highest number granted, it is not
	// held, and waits for 3's release only.
	got := testkit.Go(func() error {
		p2, err := a.Acquire(ctx, "t", semaphore.Sequence(2))
		if err == nil {
			p2.Release()
		}
		return err
	})
	waitFor(t, 5*time.Second, "message 2 to wait", func() bool { return a.Stats().Waiters == 1 })
	p3.Release()
	require.NoError(t, testkit.Within(t, 10*time.Second, "message 2", got))

	p4, err := a.Acquire(ctx, "t", semaphore.Sequence(4)) // 3 granted: no gap
	require.NoError(t, err)
	p4.Release()
	assert.EqualValues(t, 0, a.Stats().HoldsRunOut, "no hold of a ran out")
	assert.EqualValues(t, 1, b.Stats().HoldsRunOut)
}

// A held message (its predecessor missing) is not taken by TryAcquire,
// even on a free key; the predecessor is.
func TestKeyedSequenceTryAcquireHeld(t *testing.T) {
	srv := startRedis(t)
	k := newSeqKeyed(t, srv.Addr, laneName(t), redislane.WithReorderHold(time.Minute))
	p, ok := k.TryAcquire("t", semaphore.Sequence(5)) // a new key: its first goes
	require.True(t, ok)
	p.Release()
	x, ok := k.TryAcquire("t", semaphore.Sequence(7))
	refused(t, x, ok, "TryAcquire took a number the hold holds back")
	p, ok = k.TryAcquire("t", semaphore.Sequence(6))
	require.True(t, ok, "the next number was held")
	p.Release()
	p, ok = k.TryAcquire("t") // no number: never held
	require.True(t, ok)
	p.Release()
}

// Cancelling a held waiter loses nothing: its queue entry leaves Redis,
// the waiters behind it keep their places, the message sent again takes
// its turn, and every message runs in order.
func TestKeyedSequenceCancelHeldWaiter(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	// A lease longer than the test's waits: an entry left behind would
	// not leave the queue by expiring.
	long := []redislane.Option{redislane.WithLease(time.Minute), redislane.WithReorderHold(time.Minute)}
	a := newSeqKeyed(t, srv.Addr, name, long...)
	b := newSeqKeyed(t, srv.Addr, name, long...)
	c := newSeqKeyed(t, srv.Addr, name, long...)
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t)
	queue := "{lanes:" + name + "}:k:t:q"

	var log runLog
	run := func(k *redislane.Keyed, ctx context.Context, n int64) <-chan error {
		return log.run(ctx, n, func(ctx context.Context) (func(), error) { return keyedTurn(ctx, k, n) })
	}

	p1, err := a.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	ctx3, cancel3 := context.WithCancel(ctx)
	got3 := run(b, ctx3, 3) // held: 2 is missing
	got4 := run(c, ctx, 4)
	waitFor(t, 5*time.Second, "3 and 4 to queue", func() bool { return rc.ZCard(ctx, queue).Val() == 2 })
	cancel3()
	require.ErrorIs(t, testkit.Within(t, 5*time.Second, "the cancelled waiter", got3), context.Canceled)
	waitFor(t, 5*time.Second, "the cancelled entry to leave the queue", func() bool { return rc.ZCard(ctx, queue).Val() == 1 })

	got2 := run(a, ctx, 2)
	waitFor(t, 5*time.Second, "2 to queue", func() bool { return rc.ZCard(ctx, queue).Val() == 2 })
	log.ran(1)
	p1.Release()
	require.NoError(t, testkit.Within(t, 10*time.Second, "message 2", got2))
	// 3 is sent again, to another instance; 4 still waits for it.
	got3 = run(a, ctx, 3)
	require.NoError(t, testkit.Within(t, 10*time.Second, "message 3, sent again", got3))
	require.NoError(t, testkit.Within(t, 10*time.Second, "message 4", got4))
	assert.Equal(t, []int64{1, 2, 3, 4}, log.order())
	assert.Zero(t, rc.ZCard(ctx, queue).Val(), "an entry was left in the queue")
	for _, k := range []*redislane.Keyed{a, b, c} {
		assert.Zero(t, k.Stats().Held)
		assert.Zero(t, k.Stats().HoldsRunOut)
	}
}

// A holder whose lease lapses (its instance closed: the lease is left to
// run out) hands the key on in number order, whichever waiter polls
// first.
func TestKeyedSequenceLeaseLapse(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newSeqKeyed(t, srv.Addr, name)
	b := newSeqKeyed(t, srv.Addr, name)
	c := newSeqKeyed(t, srv.Addr, name)
	ctx := testCtx(t)

	p1, err := a.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	var log runLog
	run := func(k *redislane.Keyed, n int64) <-chan error {
		return log.run(ctx, n, func(ctx context.Context) (func(), error) { return keyedTurn(ctx, k, n) })
	}
	got4 := run(c, 4)
	waitFor(t, 5*time.Second, "4 to wait", func() bool { return waitersOf(c) == 1 })
	got3 := run(b, 3)
	got2 := run(c, 2)
	waitFor(t, 5*time.Second, "3 and 2 to wait", func() bool { return waitersOf(b, c) == 3 })
	a.Close()
	assert.ErrorIs(t, context.Cause(p1.Context()), redislane.ErrClosed)
	for i, ch := range []<-chan error{got2, got3, got4} {
		require.NoError(t, testkit.Within(t, 10*time.Second, fmt.Sprintf("waiter %d", i), ch))
	}
	assert.Equal(t, []int64{2, 3, 4}, log.order(), "the key went on out of number order after the lapse")
}

// Close sends a held waiter away with ErrClosed, at once, and its entry
// leaves the queue.
func TestKeyedSequenceCloseHeldWaiter(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	long := []redislane.Option{redislane.WithLease(time.Minute), redislane.WithReorderHold(time.Minute)}
	a := newSeqKeyed(t, srv.Addr, name, long...)
	b := newSeqKeyed(t, srv.Addr, name, long...)
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t)
	queue := "{lanes:" + name + "}:k:t:q"

	p, err := a.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	p.Release()
	got := testkit.Go(func() error {
		p, err := b.Acquire(ctx, "t", semaphore.Sequence(3)) // held on a free key
		if err == nil {
			p.Release()
		}
		return err
	})
	waitFor(t, 5*time.Second, "3 to be held", func() bool { return rc.ZCard(ctx, queue).Val() == 1 })
	testkit.Within(t, 5*time.Second, "Close", testkit.Go(func() bool { b.Close(); return true }))
	require.ErrorIs(t, testkit.Within(t, 5*time.Second, "the held waiter", got), redislane.ErrClosed)
	waitFor(t, 5*time.Second, "the entry to leave the queue", func() bool { return rc.ZCard(ctx, queue).Val() == 0 })
}

// Without a hold, sequence order orders those waiting only: a key's
// waiters go by number, whatever the order they came in.
func TestKeyedSequenceOrdersWaiters(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	a := newSeqKeyed(t, srv.Addr, name, orderLease)
	b := newSeqKeyed(t, srv.Addr, name, orderLease)
	ctx := testCtx(t)
	p, err := a.Acquire(ctx, "t", semaphore.Sequence(9)) // a free key: any number goes
	require.NoError(t, err)
	var log runLog
	var chans []<-chan error
	for i, n := range []int64{5, 3, 0, 4} { // 0: no number, waits at 0
		k := []*redislane.Keyed{a, b}[i%2]
		chans = append(chans, log.run(ctx, n, func(ctx context.Context) (func(), error) { return keyedTurn(ctx, k, n) }))
		waitFor(t, 5*time.Second, "the waiter to queue", func() bool { return waitersOf(a, b) == i+1 })
	}
	p.Release()
	for _, ch := range chans {
		require.NoError(t, testkit.Within(t, 10*time.Second, "a waiter", ch))
	}
	assert.Equal(t, []int64{0, 3, 4, 5}, log.order())
}

// Bad settings and calls are refused with ErrInvalidConfig; instances of
// one name with other orders (or holds) are refused with
// ErrCapacityMismatch, never mixed.
func TestKeyedSequenceRefusals(t *testing.T) {
	srv := startRedis(t)
	rc := newClient(t, srv.Addr)
	for _, tc := range []struct {
		what string
		make func() error
	}{
		{"a hold without sequence order", func() error {
			_, err := redislane.NewKeyed(rc, "x", 1, redislane.WithReorderHold(time.Second))
			return err
		}},
		{"a hold of 0", func() error {
			_, err := redislane.NewKeyed(rc, "x", 1, redislane.WithSequenceOrder(), redislane.WithReorderHold(0))
			return err
		}},
		{"a hold below 1ms", func() error {
			_, err := redislane.NewKeyed(rc, "x", 1, redislane.WithSequenceOrder(), redislane.WithReorderHold(time.Microsecond))
			return err
		}},
		{"sequence order on a Weighted", func() error {
			_, err := redislane.NewWeighted(rc, "x", 1, redislane.WithSequenceOrder())
			return err
		}},
		{"sequence order on a Fleet", func() error {
			_, err := redislane.NewFleet(rc, "x", 1, redislane.WithSequenceOrder())
			return err
		}},
		{"sequence order on a Tokens", func() error {
			_, err := redislane.NewTokens(rc, "x", 1, redislane.WithSequenceOrder())
			return err
		}},
	} {
		assert.ErrorIs(t, tc.make(), redislane.ErrInvalidConfig, tc.what)
	}

	ctx := testCtx(t)
	name := laneName(t)
	k := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(time.Second))
	for _, opts := range [][]semaphore.AcquireOption{
		{semaphore.Priority(1)},
		{semaphore.Group("g")},
		{semaphore.Sequence(1<<53 + 1)},
		{semaphore.Sequence(-1<<53 - 1)},
	} {
		p, err := k.Acquire(ctx, "t", opts...)
		failed(t, p, err, redislane.ErrInvalidConfig)
		x, ok := k.TryAcquire("t", opts...)
		refused(t, x, ok)
	}
	p, err := k.Acquire(ctx, "t", semaphore.Sequence(1<<53), semaphore.Weight(1))
	require.NoError(t, err, "the largest exact number is taken")
	p.Release()

	fifo := newKeyed(t, srv.Addr, name, 1)
	p, err = fifo.Acquire(ctx, "t")
	failed(t, p, err, redislane.ErrCapacityMismatch, "a FIFO instance joined a sequenced lane")
	other := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(2*time.Second))
	p, err = other.Acquire(ctx, "t")
	failed(t, p, err, redislane.ErrCapacityMismatch, "an instance with another hold joined the lane")
	noHold := newSeqKeyed(t, srv.Addr, name)
	p, err = noHold.Acquire(ctx, "t")
	failed(t, p, err, redislane.ErrCapacityMismatch, "an instance without the hold joined the lane")
}

// A hold that runs out while the key is held: the release hands the key
// to the held waiter of another instance by a message, which carries the
// news, and that instance counts it.
func TestKeyedReorderHoldRunsOutOnHandover(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	const hold = 100 * time.Millisecond
	a := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(hold))
	b := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(hold))
	rc := newClient(t, srv.Addr)
	ctx := testCtx(t, 10*time.Second)
	queue := "{lanes:" + name + "}:k:t:q"

	p1, err := a.Acquire(ctx, "t", semaphore.Sequence(1))
	require.NoError(t, err)
	got := testkit.Go(func() error {
		p, err := b.Acquire(ctx, "t", semaphore.Sequence(3)) // 2 never comes
		if err == nil {
			p.Release()
		}
		return err
	})
	// The queue's score is the entry's arrival on the server's clock (µs):
	// wait, on that clock, until its hold has run out.
	var arrival float64
	waitFor(t, 5*time.Second, "3 to queue", func() bool {
		z := rc.ZRangeWithScores(ctx, queue, 0, 0).Val()
		if len(z) == 0 {
			return false
		}
		arrival = z[0].Score
		return true
	})
	waitFor(t, 5*time.Second, "the hold to run out on the server's clock", func() bool {
		now := rc.Time(ctx).Val()
		return float64(now.UnixMicro()) >= arrival+float64(hold/time.Microsecond)
	})
	p1.Release()
	require.NoError(t, testkit.Within(t, 5*time.Second, "the held waiter", got))
	assert.EqualValues(t, 1, b.Stats().HoldsRunOut, "the grant on a hold that ran out is counted by the waiter's instance")
	assert.EqualValues(t, 0, a.Stats().HoldsRunOut)
}

// TestKeyedSequenceThroughAQueue: a lanequeue.Queue passes a call's
// semaphore.Sequence to a sequenced fleet key (AsKeyedLane), in AcquireAll
// and TryAcquireAll: waiters on two replicas' queues are served by number,
// and a number the hold keeps back is not taken by a try. Before, a
// queue's foreign lanes got plain Acquire, so the calls waited unnumbered
// (at 0) and ran in arrival order.
func TestKeyedSequenceThroughAQueue(t *testing.T) {
	srv := startRedis(t)
	name := laneName(t)
	var qs []*lanequeue.Queue[string]
	var sets []lanequeue.LaneSet[string]
	var ks []*redislane.Keyed
	for range 2 {
		k := newSeqKeyed(t, srv.Addr, name, redislane.WithReorderHold(time.Hour), orderLease)
		q := lanequeue.New[string]()
		t.Cleanup(q.Close)
		require.NoError(t, q.Add("thread", redislane.AsKeyedLane(k, func(s string) string { return s })))
		set, err := q.Lanes("thread")
		require.NoError(t, err)
		qs, sets, ks = append(qs, q), append(sets, set), append(ks, k)
	}
	ctx := testCtx(t)
	first, err := qs[0].AcquireAll(ctx, "t", sets[0], semaphore.Sequence(1))
	require.NoError(t, err)
	if tk, ok := qs[1].TryAcquireAll("t", sets[1], semaphore.Sequence(3)); ok {
		tk.Release()
		t.Fatal("a try took number 3 while 2 had not come")
	}
	var log runLog
	var chans []<-chan error
	for i, n := range []int64{4, 3, 2} {
		q, set := qs[i%2], sets[i%2]
		chans = append(chans, log.run(ctx, n, func(ctx context.Context) (func(), error) {
			tk, err := q.AcquireAll(ctx, "t", set, semaphore.Sequence(n))
			if err != nil {
				return nil, err
			}
			return func() { tk.Release() }, nil
		}))
		waitFor(t, 5*time.Second, "the waiter to queue", func() bool { return waitersOf(ks...) == i+1 })
	}
	first.Release()
	for _, ch := range chans {
		require.NoError(t, testkit.Within(t, 10*time.Second, "a waiter", ch))
	}
	assert.Equal(t, []int64{2, 3, 4}, log.order())
}

// runLog records the numbers of the messages that ran, in the order they
// ran: the waiter shape of the sequence tests.
type runLog struct {
	mu   sync.Mutex
	nums []int64
}

// run takes a turn with take in a goroutine, records n as run once it has
// it, and gives the turn back; the channel gets take's error.
func (l *runLog) run(ctx context.Context, n int64, take func(context.Context) (release func(), err error)) <-chan error {
	return testkit.Go(func() error {
		release, err := take(ctx)
		if err != nil {
			return err
		}
		l.ran(n)
		release()
		return nil
	})
}

// ran records n as run.
func (l *runLog) ran(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nums = append(l.nums, n)
}

// order returns the numbers in the order they ran.
func (l *runLog) order() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.nums)
}

// keyedTurn takes key "t" of k for message n.
func keyedTurn(ctx context.Context, k *redislane.Keyed, n int64) (func(), error) {
	p, err := k.Acquire(ctx, "t", semaphore.Sequence(n))
	if err != nil {
		return nil, err
	}
	return func() { p.Release() }, nil
}
