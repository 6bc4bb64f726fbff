package lanequeue_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestSetRate (issue 15: every lane a queue makes can be reached): a rate
// lane of AddRateLane changes its rate and burst through the queue, and
// the queue honours both at once.
func TestSetRate(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addRate(q, "rps", 1, 1))
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	lanequeue.SetRateClock(q, "rps", fake)
	set, err := q.Lanes("rps")
	must(t, err)
	try := func(n int64) bool {
		tk, ok := q.TryAcquireAll("k", set, semaphore.Weight(n))
		tk.Release()
		return ok
	}
	if !try(1) || try(1) {
		t.Fatal("a lane of 1 token a second, burst 1: want one grant, then none")
	}
	fake.Advance(500 * time.Millisecond) // half a token
	must(t, q.SetRate("rps", 10, 3))
	fake.Advance(40 * time.Millisecond) // 0.9 of a token at 10 a second
	if try(1) {
		t.Fatal("a token granted before it was due at the new rate")
	}
	fake.Advance(10 * time.Millisecond)
	if !try(1) {
		t.Fatal("the token due at the new rate was not granted")
	}
	fake.Advance(time.Second) // the bucket fills to the new burst
	if err := q.Check(set, semaphore.Weight(4)); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Check of 4 tokens on a burst of 3 = %v; want ErrTooHeavy", err)
	}
	if !try(3) {
		t.Fatal("3 tokens on a full bucket of the new burst were not granted")
	}
	must(t, q.SetRate("rps", 10, 1))
	if err := q.Check(set, semaphore.Weight(2)); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Check of 2 tokens after the burst shrank to 1 = %v; want ErrTooHeavy", err)
	}
	if st := laneStats(t, q, "rps"); st.Capacity != 1 {
		t.Fatalf("Stats capacity %d; want the new burst, 1", st.Capacity)
	}
}

// TestSetRateRefuses: bad settings and lanes that are not rate lanes of
// this package.
func TestSetRateRefuses(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 1)
	for _, c := range []struct {
		lane  string
		limit rate.Limit
		burst int
		want  error
	}{
		{"nope", 1, 1, semaphore.ErrInvalidConfig},
		{"global", 1, 1, semaphore.ErrInvalidConfig},
		{"session", 1, 1, semaphore.ErrInvalidConfig},
		{"rate", 0, 1, semaphore.ErrInvalidConfig},
		{"rate", -1, 1, semaphore.ErrInvalidConfig},
		{"rate", 1, 0, semaphore.ErrInvalidConfig},
	} {
		if err := q.SetRate(c.lane, c.limit, c.burst); !errors.Is(err, c.want) {
			t.Errorf("SetRate(%q, %v, %d) = %v; want %v", c.lane, c.limit, c.burst, err, c.want)
		}
	}
}
