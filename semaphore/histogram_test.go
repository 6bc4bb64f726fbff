package semaphore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// The bounds are the documented 1-2-5 steps from 1µs to 100s.
func TestHistogramBounds(t *testing.T) {
	b := semaphore.HistogramBounds()
	if len(b) != semaphore.HistogramBuckets-1 || b[0] != time.Microsecond || b[len(b)-1] != 100*time.Second {
		t.Fatalf("bounds %v: want 1µs .. 100s, %d of them", b, semaphore.HistogramBuckets-1)
	}
	steps := []time.Duration{1, 2, 5}
	for i, d := range b {
		want := steps[i%3] * time.Microsecond
		for range i / 3 {
			want *= 10
		}
		if d != want {
			t.Fatalf("bound %d is %v, want %v", i, d, want)
		}
	}
}

// Each duration lands in the first bucket whose bound is at least it:
// every bound, one nanosecond each side of it, and the extremes.
func TestHistogramBuckets(t *testing.T) {
	b := semaphore.HistogramBounds()
	want := func(d time.Duration) int {
		for i, x := range b {
			if d <= x {
				return i
			}
		}
		return len(b)
	}
	durations := []time.Duration{0, 1, time.Duration(math.MaxInt64)}
	for _, x := range b {
		durations = append(durations, x-1, x, x+1)
	}
	for _, d := range durations {
		clk := clock.NewFake(time.Unix(0, 0))
		s := semaphore.New(1, semaphore.WithHistograms(), semaphore.WithClock(clk))
		p, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(d)
		p.Release()
		h := s.Stats().HoldTime
		if h.Count != 1 || h.Counts[want(d)] != 1 || h.Sum != d {
			t.Fatalf("a hold of %v: count %d, sum %v, counts %v; want it in bucket %d", d, h.Count, h.Sum, h.Counts, want(d))
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h semaphore.Histogram
	if q := h.Quantile(0.5); q != 0 {
		t.Fatalf("empty: quantile %v, want 0", q)
	}
	// 100 observations in the bucket (1ms, 2ms]: the median is
	// interpolated half way, the extremes are the bucket's edges.
	h.Counts[10] = 100
	h.Count = 100
	h.Sum = 150 * time.Millisecond
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, time.Millisecond}, {0.5, 1500 * time.Microsecond}, {1, 2 * time.Millisecond}, {-1, time.Millisecond}, {2, 2 * time.Millisecond}, {math.NaN(), time.Millisecond}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	// Above the last bound the estimate is the last bound.
	var top semaphore.Histogram
	top.Counts[semaphore.HistogramBuckets-1], top.Count = 3, 3
	if got := top.Quantile(0.99); got != 100*time.Second {
		t.Errorf("Quantile in the overflow bucket = %v, want 100s", got)
	}
	// 90 fast ones and 10 slow ones: p50 is among the fast, p99 among the slow.
	var mix semaphore.Histogram
	mix.Counts[0], mix.Counts[18], mix.Count = 90, 10, 100
	if q := mix.Quantile(0.5); q > time.Microsecond {
		t.Errorf("p50 = %v, want at most 1µs", q)
	}
	if q := mix.Quantile(0.99); q <= 500*time.Millisecond || q > time.Second {
		t.Errorf("p99 = %v, want in (500ms, 1s]", q)
	}
}

// Off by default: Stats reports no timings.
func TestTimingsOffByDefault(t *testing.T) {
	s := semaphore.New(1)
	p, err := s.Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if tm := s.Stats().Timings; tm != (semaphore.Timings{}) {
		t.Fatalf("timings without WithHistograms: %+v", tm)
	}
}

// On the fake clock every wait and hold is exact: a grant that did not
// queue waited 0, a waiter the time it stood in line; each hold is the time
// to its release; a wait that ends without a grant is not counted.
func TestTimingsOnFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(1, semaphore.WithHistograms(), semaphore.WithClock(clk))
	ctx := context.Background()
	first, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, 1)
		if err == nil {
			clk.Advance(3 * time.Second) // held 3s
			p.Release()
		}
		return err
	})
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := testkit.Go(func() error { _, err := s.Acquire(cctx, 1); return err })
	testkit.Eventually(t, "two waiters", func() bool { return s.Stats().Waiters == 2 })
	clk.Advance(40 * time.Millisecond) // both wait 40ms
	cancel()
	if err := testkit.Recv(t, gaveUp, "the cancelled waiter"); err == nil {
		t.Fatal("the cancelled waiter got a permit")
	}
	first.Release() // held 40ms
	if err := testkit.Recv(t, got, "the waiter"); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if !st.Enabled {
		t.Fatal("Timings.Enabled is false")
	}
	w, h := st.WaitTime, st.HoldTime
	if w.Count != 2 || w.Counts[0] != 1 || w.Counts[14] != 1 || w.Sum != 40*time.Millisecond {
		t.Fatalf("waits: count %d, sum %v, counts %v; want a 0 and a 40ms", w.Count, w.Sum, w.Counts)
	}
	if h.Count != 2 || h.Counts[14] != 1 || h.Counts[20] != 1 || h.Sum != 3040*time.Millisecond {
		t.Fatalf("holds: count %d, sum %v, counts %v; want a 40ms and a 3s", h.Count, h.Sum, h.Counts)
	}
	if w.Count != st.Acquired || h.Count != st.Released {
		t.Fatalf("counts %d waits, %d holds; Acquired %d, Released %d", w.Count, h.Count, st.Acquired, st.Released)
	}
}

// Spare tokens (beyond the fourteen inline ones), TryAcquire and places are
// timed too.
func TestTimingsEveryPath(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(20, semaphore.WithHistograms(), semaphore.WithClock(clk))
	var out []semaphore.Permit
	for range 19 {
		p, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	p, ok := s.TryAcquire(1)
	if !ok {
		t.Fatal("TryAcquire failed")
	}
	out = append(out, p)
	pl, err := s.Join(1)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	out[0].Release()
	p = testkit.Await(t, "the place", pl.Wait)
	out[0] = p
	clk.Advance(time.Second)
	for _, p := range out {
		p.Release()
	}
	st := s.Stats()
	if st.HoldTime.Count != 21 || st.HoldTime.Sum != 40*time.Second {
		// out[0] 1s, its place 1s, the 19 others 2s each
		t.Fatalf("holds: count %d, sum %v; want 21, 40s", st.HoldTime.Count, st.HoldTime.Sum)
	}
	if st.WaitTime.Count != 21 || st.WaitTime.Sum != time.Second {
		t.Fatalf("waits: count %d, sum %v; want 21, 1s (the place)", st.WaitTime.Count, st.WaitTime.Sum)
	}
}

// A grant that barges past a waiter into an inline token is stamped like
// every other, or its hold would be counted from the token's previous
// grant: TryAcquire's and Acquire's barging claims, and a woken waiter's
// claim in its competition for the permits.
func TestTimingsBargingGrantsAreStamped(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(2, semaphore.WithHistograms(), semaphore.WithClock(clk), semaphore.WithBarging(time.Hour))
	p1, err := s.Acquire(context.Background(), 1) // held from 0s to the end
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := testkit.Go(func() error { _, err := s.Acquire(ctx, 2); return err }) // waits for both permits throughout
	testkit.Eventually(t, "the waiter queued", func() bool { return s.Stats().Waiters == 1 })

	clk.Advance(10 * time.Second)
	b, ok := s.TryAcquire(1) // barges past the waiter (TryAcquire)
	if !ok {
		t.Fatal("TryAcquire did not barge past a fresh waiter")
	}
	clk.Advance(3 * time.Second)
	b.Release()
	bctx, bcancel := context.WithTimeout(context.Background(), testkit.Deadline) // fails, not hangs, if it queues
	defer bcancel()
	b, err = s.Acquire(bctx, 1) // barges again (Acquire)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	b.Release()

	cancel()
	if err := testkit.Recv(t, w, "the waiter's return"); err == nil {
		t.Fatal("the waiter for both permits was granted while one was held")
	}
	p1.Release()
	if h := s.Stats().HoldTime; h.Count != 3 || h.Sum != (3+5+18)*time.Second {
		t.Fatalf("holds: count %d, sum %v; want 3 holds of 3s, 5s and 18s", h.Count, h.Sum)
	}
}

// A woken waiter of a barging semaphore that wins the free permit in its
// competition for it is timed from its own grant too.
func TestTimingsWokenBargerIsStamped(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(1, semaphore.WithHistograms(), semaphore.WithClock(clk), semaphore.WithBarging(time.Hour))
	p1, err := s.Acquire(context.Background(), 1) // held 0s..10s
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		p   semaphore.Permit
		err error
	}
	wctx, wcancel := context.WithTimeout(context.Background(), testkit.Deadline) // the waiter ends if never served
	defer wcancel()
	got := testkit.Go(func() grant { p, err := s.Acquire(wctx, 1); return grant{p, err} })
	testkit.Eventually(t, "the waiter queued", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(10 * time.Second)
	p1.Release() // wakes the waiter, which competes for the permit and takes it
	g := testkit.Recv(t, got, "the waiter's grant")
	if g.err != nil {
		t.Fatal(g.err)
	}
	clk.Advance(5 * time.Second)
	g.p.Release()
	if h := s.Stats().HoldTime; h.Count != 2 || h.Sum != 15*time.Second {
		t.Fatalf("holds: count %d, sum %v; want holds of 10s and 5s", h.Count, h.Sum)
	}
}

// On the system clock a busy lane times one wait in N after its first
// ones (hist.Sampler): the snapshot still has one wait per grant, its
// count exact, the sample scaled to it.
func TestWaitTimesSampledCountExact(t *testing.T) {
	s := semaphore.New(1, semaphore.WithHistograms())
	ctx := context.Background()
	held, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	const waits = 5000
	for range waits {
		pl, err := s.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		held.Release()
		if held, err = pl.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held.Release()
	st := s.Stats()
	testkit.SampledWaits(t, waits, st.Waited, st.Acquired, st.WaitTime.Count, st.WaitTime.Counts[:], st.WaitTime.Sum, semaphore.TimedWaits(s))
}

// On the system clock a busy lane times one hold in N after its first ones
// (hist.Sampler, by each token's generation): the snapshot still has one
// hold per release, its count exact, the sample scaled to it; through the
// fast path and the queue's grants alike.
func TestHoldTimesSampledCountExact(t *testing.T) {
	s := semaphore.New(2, semaphore.WithHistograms())
	ctx := context.Background()
	const rounds = 3000
	for range rounds {
		p, err := s.Acquire(ctx, 1) // the timed fast path
		if err != nil {
			t.Fatal(err)
		}
		held, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := s.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		held.Release() // a grant through the queue
		q, err := pl.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q.Release()
		p.Release()
	}
	st := s.Stats()
	testkit.SampledHolds(t, 3*rounds, st.Released, st.HoldTime.Count, st.HoldTime.Counts[:], semaphore.TimedHolds(s))
}

// A capacity-1 semaphore hands a released permit to the head under the
// lock: those grants are sampled too, not all timed.
func TestHoldTimesSampledThroughHandOff(t *testing.T) {
	s := semaphore.New(1, semaphore.WithHistograms())
	ctx := context.Background()
	held, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	const handOffs = 5000
	for range handOffs {
		pl, err := s.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		held.Release() // into a queue of one: handed to pl
		if held, err = pl.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	held.Release()
	st := s.Stats()
	testkit.SampledHolds(t, handOffs+1, st.Released, st.HoldTime.Count, st.HoldTime.Counts[:], semaphore.TimedHolds(s))
}

// Under WithPriorities waits are timed as every other's are: sampled, the
// lane's first ones timed, each from its own precise reading (an arrival
// may be read from the CPU's counter, hist.Clock.Arrival, and is not a
// wait's start; on the fake clock here the two readings agree).
func TestTimingsUnderPriorities(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	s := semaphore.New(1, semaphore.WithHistograms(), semaphore.WithClock(clk), semaphore.WithPriorities(time.Millisecond))
	ctx := context.Background()
	first, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, 1, semaphore.Priority(1))
		if err == nil {
			p.Release()
		}
		return err
	})
	testkit.Eventually(t, "a waiter", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(40 * time.Millisecond)
	first.Release()
	if err := testkit.Recv(t, got, "the waiter"); err != nil {
		t.Fatal(err)
	}
	w := s.Stats().WaitTime
	if w.Count != 2 || w.Sum != 40*time.Millisecond {
		t.Fatalf("waits: count %d, sum %v; want 2, 40ms (a 0 and the waiter's)", w.Count, w.Sum)
	}
}
