package semaphore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/semaphore"
)

// spinBound bounds the yields of waitFor. What the tests wait for happens
// within a few yields; the bound only turns a bug that would hang the test
// into a failure. It is a count of yields, not a time.
const spinBound = 5_000_000

// waitFor yields until cond holds, and fails the test if it never does.
func waitFor(t rapid.TB, what string, cond func() bool) {
	t.Helper()
	for range spinBound {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("gave up waiting for %s", what)
}

type result struct {
	p   semaphore.Permit
	err error
}

// acquireAsync runs Acquire(ctx, n) in a goroutine; its result arrives on
// the returned channel.
func acquireAsync(ctx context.Context, s *semaphore.Weighted, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := s.Acquire(ctx, n)
		ch <- result{p, err}
	}()
	return ch
}

// enqueue runs Acquire(ctx, n) in a goroutine and returns once the call
// waits in the queue (Stats().Waiters has grown by one). It fails the test
// if the call returns instead.
func enqueue(t rapid.TB, ctx context.Context, s *semaphore.Weighted, n int64) <-chan result {
	t.Helper()
	want := s.Stats().Waiters + 1
	ch := acquireAsync(ctx, s, n)
	waitFor(t, fmt.Sprintf("Acquire(%d) to queue as waiter %d", n, want), func() bool {
		if len(ch) > 0 {
			r := <-ch
			t.Fatalf("Acquire(%d) returned (%v, %v) instead of waiting", n, r.p.Weight(), r.err)
		}
		return s.Stats().Waiters == want
	})
	return ch
}

// recv waits for the result of an Acquire started with acquireAsync or
// enqueue.
func recv(t rapid.TB, ch <-chan result) result {
	t.Helper()
	var r result
	waitFor(t, "Acquire to return", func() bool {
		select {
		case r = <-ch:
			return true
		default:
			return false
		}
	})
	return r
}

// stillWaiting fails the test if the Acquire behind ch has returned.
func stillWaiting(t rapid.TB, ch <-chan result) {
	t.Helper()
	if len(ch) > 0 {
		r := <-ch
		t.Fatalf("Acquire returned (weight %d, %v) while it should wait", r.p.Weight(), r.err)
	}
}

func take(t *testing.T, s *semaphore.Weighted, n int64) semaphore.Permit {
	t.Helper()
	p, ok := s.TryAcquire(n)
	require.True(t, ok, "TryAcquire(%d) with %+v", n, s.Stats())
	return p
}

// requireBalanced checks the invariant and that nothing is out or waiting.
func requireBalanced(t *testing.T, s *semaphore.Weighted) semaphore.Stats {
	t.Helper()
	st := s.Stats()
	require.Equal(t, st.Capacity, st.Available+st.Held, "Available+Held != Capacity: %+v", st)
	require.Zero(t, st.Held, "%+v", st)
	require.Zero(t, st.Waiters, "%+v", st)
	require.Zero(t, st.WaitingWeight, "%+v", st)
	require.Equal(t, st.Acquired, st.Released, "%+v", st)
	return st
}

// deadlineCtx is a context whose deadline the test makes pass, so that no
// test waits on the wall clock.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) expire()                     { close(c.done) }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
