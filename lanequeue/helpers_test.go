package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// testQueue builds a queue with a session lane, a global lane of the given
// capacity, and a rate lane "rate" of burst 1 that does not refill during a
// test.
func testQueue(t *testing.T, global int64) *lanequeue.Queue[string] {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "global", global))
	must(t, addRate(q, "rate", rate.Limit(1e-9), 1))
	t.Cleanup(q.Close)
	return q
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func laneStats(t *testing.T, q *lanequeue.Queue[string], name string) lanequeue.LaneStats {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no lane %q", name)
	return lanequeue.LaneStats{}
}

// assertNothingHeld checks that no lane of q holds anything and Holders
// lists nothing.
func assertNothingHeld(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Held != 0 || st.Waiters != 0 {
			t.Errorf("lane %q: held %d, waiters %d; want nothing", st.Name, st.Held, st.Waiters)
		}
	}
	if hs := q.Holders(); len(hs) != 0 {
		t.Errorf("Holders() = %v; want none", hs)
	}
}

// acquireAsync runs AcquireAll in a goroutine; the result arrives on the
// channel.
func acquireAsync(ctx context.Context, q *lanequeue.Queue[string], key string, lanes []string, opts ...semaphore.AcquireOption) <-chan acquireResult {
	ch := make(chan acquireResult, 1)
	go func() {
		tk, err := acquireAll(q, ctx, key, lanes, opts...)
		ch <- acquireResult{tk, err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan acquireResult) acquireResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(failsafe):
		t.Fatalf("AcquireAll did not return (failsafe %v)", failsafe)
		return acquireResult{}
	}
}

// lineLen counts the callers q lists as waiting for lane: of key, on a
// keyed lane; all, on another.
func lineLen(q *lanequeue.Queue[string], lane, key string) int {
	n := 0
	for _, w := range q.Waiters() {
		if w.Lane == lane && (w.Kind != lanequeue.Keyed || w.Key == key) {
			n++
		}
	}
	return n
}

// The lanes of this package's tests, each made by its constructor and
// registered by Queue.Add. Like the settings' own Validate, they return a
// bad setting as an error, so that a test can check it.

// addKeyed registers a keyed lane made with opts.
func addKeyed[K comparable](q *lanequeue.Queue[K], name string, opts ...keyedsem.Option) error {
	if err := keyedsem.Validate(opts...); err != nil {
		return err
	}
	return q.Add(name, lanequeue.NewKeyedLane(keyedsem.New[K](opts...)))
}

// addGlobal registers a global lane of capacity made with opts.
func addGlobal[K comparable](q *lanequeue.Queue[K], name string, capacity int64, opts ...semaphore.Option) error {
	if err := semaphore.Validate(capacity, opts...); err != nil {
		return err
	}
	return q.Add(name, lanequeue.NewGlobalLane[K](semaphore.New(capacity, opts...)))
}

// addFair registers a global lane of capacity made fair with opts.
func addFair[K comparable](q *lanequeue.Queue[K], name string, capacity int64, tenant func(K) string, opts ...semaphore.Option) error {
	opts = append([]semaphore.Option{semaphore.WithFairShare(nil)}, opts...)
	if err := semaphore.Validate(capacity, opts...); err != nil {
		return err
	}
	return q.Add(name, lanequeue.NewFairLane(semaphore.New(capacity, opts...), tenant))
}

// addRate registers a rate lane over a limiter of limit and burst.
func addRate[K comparable](q *lanequeue.Queue[K], name string, limit rate.Limit, burst int) error {
	return q.Add(name, lanequeue.NewRateLane[K](rate.NewLimiter(limit, burst)))
}

// addToken registers a token lane of perMinute.
func addToken[K comparable](q *lanequeue.Queue[K], name string, perMinute int64) error {
	return q.Add(name, lanequeue.NewTokenLane[K](perMinute))
}
