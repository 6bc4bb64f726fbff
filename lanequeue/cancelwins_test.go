package lanequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// raceRounds is how many times each scenario of the cancellation races
// runs inside one test run.
const raceRounds = 1000

// blindLane is a lane from another package that grants at once without
// looking at the caller's context. If cancel is set, it ends the caller's
// context while it grants, and grants anyway: a grant that lands while the
// cancellation is in flight, which the Lane contract lets a lane return
// with a nil error.
type blindLane struct {
	kind   lanequeue.Kind
	cancel func() // set before each call
}

func (l *blindLane) Kind() lanequeue.Kind { return l.kind }
func (l *blindLane) MaxWeight() int64     { return 1 }
func (l *blindLane) Acquire(_ context.Context, _ string, _ int64) (semaphore.Permit, error) {
	if l.cancel != nil {
		l.cancel()
	}
	return semaphore.Permit{}, nil
}
func (l *blindLane) TryAcquire(string, int64) (semaphore.Permit, bool) {
	return semaphore.Permit{}, true
}
func (l *blindLane) Stats() lanequeue.LaneStats { return lanequeue.LaneStats{} }
func (l *blindLane) Close()                     {}

// testClock is a clock for a rate lane that a test steers: now moves only
// when the test or a timer moves it; onNow, if set, runs once at the next
// Now; a timer advances the clock to its deadline and fires at once,
// running onTimer first, if set.
type testClock struct {
	mu      sync.Mutex
	now     time.Time
	onNow   func()
	onTimer func()
	timers  int
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	f := c.onNow
	c.onNow = nil
	now := c.now
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *testClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.timers++
	f := c.onTimer
	c.mu.Unlock()
	if f != nil {
		f()
	}
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return firedTimer(ch)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

// TestCancelBeforeGrantRace: a context that ends before AcquireAll holds
// every permit must win (issue 11, defect 1; the class of
// go.dev/issue/63615). When a grant and the end of the context are both
// ready, a select picks either at random, and a lane that grants at once
// does not look at the context: AcquireAll returned a ticket although the
// context had ended strictly before its last permit was granted. Now it
// looks at the context once every permit is held, gives everything back if
// it ended, and returns ctx.Err(). Each scenario runs raceRounds times.
func TestCancelBeforeGrantRace(t *testing.T) {
	t.Run("a lane grants across the cancellation, the next blindly", func(t *testing.T) {
		q := lanequeue.New[string]()
		t.Cleanup(q.Close)
		l := &blindLane{kind: lanequeue.Keyed}
		must(t, q.Add("across", l))
		must(t, q.Add("blind", &blindLane{kind: lanequeue.Global}))
		must(t, addKeyed(q, "a-session"))
		// The lanes of this package look at ctx before they grant, so
		// only the blind lane follows the one that cancels (canonical
		// order: a-session, across, blind).
		lanes := []string{"across", "blind", "a-session"}
		won := 0
		for range raceRounds {
			ctx, cancel := context.WithCancel(context.Background())
			l.cancel = cancel
			tk, err := acquireAll(q, ctx, "k", lanes)
			if err == nil {
				won++
				tk.Release()
			} else if !errors.Is(err, context.Canceled) {
				t.Fatalf("AcquireAll = %v; want context.Canceled", err)
			}
			cancel()
			assertNothingHeld(t, q)
		}
		if won > 0 {
			t.Fatalf("AcquireAll granted %d of %d times although ctx ended before its last permit", won, raceRounds)
		}
	})

	// rateQueue is a queue with a session lane and a rate lane of burst 1,
	// 1 token a second, on c.
	rateQueue := func(t *testing.T, c *testClock) *lanequeue.Queue[string] {
		q := lanequeue.New[string]()
		t.Cleanup(q.Close)
		must(t, addKeyed(q, "session"))
		must(t, addRate(q, "rate", 1, 1))
		lanequeue.SetRateClock(q, "rate", c)
		return q
	}
	t.Run("rate wait: timer and cancellation both ready", func(t *testing.T) {
		c := &testClock{now: time.Unix(1e9, 0)}
		q := rateQueue(t, c)
		won := 0
		for i := range raceRounds {
			c.advance(time.Hour) // a full bucket
			spent, ok := tryAcquireAll(q, "other", []string{"rate"})
			if !ok {
				t.Fatalf("round %d: a full bucket refused a token", i)
			}
			spent.Release()
			ctx, cancel := context.WithCancel(context.Background())
			c.onTimer = cancel // the ctx ends just before the timer fires
			tk, err := acquireAll(q, ctx, "k", []string{"session", "rate"})
			c.onTimer = nil
			cancel()
			if err == nil {
				won++
				tk.Release()
				continue
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("AcquireAll = %v; want context.Canceled", err)
			}
			assertNothingHeld(t, q)
			// Cancelled as the tokens came due, the wait gives them back.
			back, ok := tryAcquireAll(q, "other", []string{"rate"})
			if !ok {
				t.Fatalf("round %d: the cancelled wait kept its token", i)
			}
			back.Release()
		}
		if c.timers != raceRounds {
			t.Fatalf("%d rate waits of %d armed a timer", c.timers, raceRounds)
		}
		if won > 0 {
			t.Fatalf("AcquireAll granted %d of %d times although ctx ended before the tokens came", won, raceRounds)
		}
	})
	t.Run("rate lane: ctx ends just before the tokens are taken", func(t *testing.T) {
		c := &testClock{now: time.Unix(1e9, 0)}
		q := rateQueue(t, c)
		lane, _ := lanequeue.LaneOf(q, "rate")
		won := 0
		for i := range raceRounds {
			c.advance(time.Hour)
			ctx, cancel := context.WithCancel(context.Background())
			c.onNow = cancel // after AcquireAll's look at ctx, before the reservation
			var err error
			if i%2 == 0 {
				var tk *lanequeue.Ticket[string]
				if tk, err = acquireAll(q, ctx, "k", []string{"session", "rate"}); err == nil {
					tk.Release()
				}
			} else {
				_, err = lane.Acquire(ctx, "k", 1)
			}
			c.onNow = nil
			cancel()
			if err == nil {
				won++
				continue
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: %v; want context.Canceled", i, err)
			}
			back, ok := tryAcquireAll(q, "other", []string{"rate"})
			if !ok {
				t.Fatalf("round %d: the cancelled call kept its token", i)
			}
			back.Release()
		}
		if won > 0 {
			t.Fatalf("granted %d of %d times although ctx ended before the reservation", won, raceRounds)
		}
	})
	t.Run("waiter on a key: cancel, then release", func(t *testing.T) {
		q := lanequeue.New[string]()
		t.Cleanup(q.Close)
		must(t, addKeyed(q, "session"))
		must(t, addGlobal(q, "global", 4))
		lanes := []string{"session", "global"}
		won := 0
		for range raceRounds {
			holder, err := acquireAll(q, context.Background(), "k", lanes)
			must(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			ch := acquireAsync(ctx, q, "k", lanes)
			waitFor(t, "the caller to wait for its key", func() bool { return laneStats(t, q, "session").Waiters == 1 })
			cancel()
			holder.Release()
			r := receive(t, ch)
			if r.err == nil {
				won++
				r.t.Release()
			} else if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
			}
			assertNothingHeld(t, q)
		}
		if won > 0 {
			t.Fatalf("AcquireAll granted %d of %d times although ctx ended before the release", won, raceRounds)
		}
	})
}

// TestRateLaneRefillsAfterRound is a sanity check of testClock: a bucket of
// 1 token a second refills in a second.
func TestRateLaneRefillsAfterRound(t *testing.T) {
	c := &testClock{now: time.Unix(1e9, 0)}
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addRate(q, "rate", rate.Limit(1), 1))
	lanequeue.SetRateClock(q, "rate", c)
	for i := range 3 {
		tk, ok := tryAcquireAll(q, "k", []string{"rate"})
		if !ok {
			t.Fatalf("round %d: no token after a second", i)
		}
		tk.Release()
		if _, ok := tryAcquireAll(q, "k", []string{"rate"}); ok {
			t.Fatalf("round %d: a second token at once with burst 1", i)
		}
		c.advance(time.Second)
	}
}
