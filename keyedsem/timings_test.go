package keyedsem_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Off by default; on, every grant's wait and every hold is counted over
// all keys, exactly on the fake clock.
func TestTimings(t *testing.T) {
	off := keyedsem.New[string]()
	p, err := off.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if tm := off.Stats().Timings; tm != (semaphore.Timings{}) {
		t.Fatalf("timings without WithHistograms: %+v", tm)
	}

	clk := clock.NewFake(time.Unix(0, 0))
	s := keyedsem.New[string](keyedsem.WithHistograms(), keyedsem.WithClock(clk))
	ctx := context.Background()
	a, err := s.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	got := testkit.Go(func() error {
		p, err := s.Acquire(ctx, "a")
		if err == nil {
			clk.Advance(time.Second)
			p.Release() // held 1s
		}
		return err
	})
	testkit.Eventually(t, "a waiter", func() bool { return s.Stats().Waiters == 1 })
	clk.Advance(5 * time.Millisecond)
	a.Release() // held 5ms; the waiter waited 5ms
	if err := testkit.Recv(t, got, "the waiter"); err != nil {
		t.Fatal(err)
	}
	b.Release() // held 1.005s
	st := s.Stats()
	w, h := st.WaitTime, st.HoldTime
	if !st.Enabled || w.Count != 3 || w.Counts[0] != 2 || w.Sum != 5*time.Millisecond {
		t.Fatalf("waits: %+v; want two 0s and a 5ms", w)
	}
	if h.Count != 3 || h.Sum != 2010*time.Millisecond || h.Counts[11] != 1 || h.Counts[18] != 1 || h.Counts[19] != 1 {
		t.Fatalf("holds: %+v; want 5ms, 1s and 1.005s", h)
	}
}

// On the system clock a busy keyed lane times one wait in N after its
// first ones (hist.Sampler); the snapshot still counts every wait.
func TestWaitTimesSampledCountExact(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithHistograms())
	defer s.Close()
	ctx := context.Background()
	held, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	const waits = 5000
	for range waits {
		pl, err := s.Join("k")
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
	testkit.SampledWaits(t, waits, st.Waited, st.Acquired, st.WaitTime.Count, st.WaitTime.Counts[:], st.WaitTime.Sum, keyedsem.TimedWaits(s))
}

// tokenKinds are the two kinds of token a grant goes through: pooled
// (capacity 2) and an entry's own (idle timeout 0, capacity 1).
var tokenKinds = []struct {
	name string
	opts []keyedsem.Option
}{
	{"pooled", []keyedsem.Option{keyedsem.WithPerKeyCapacity(2)}},
	{"paired", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
}

// On the system clock a busy keyed semaphore times one hold in N after its
// first ones (by each token's generation): the snapshot still has one hold
// per release, its count exact; for pooled tokens (capacity 2) and for an
// entry's own token (idle timeout 0, capacity 1).
func TestHoldTimesSampledCountExact(t *testing.T) {
	for _, c := range tokenKinds {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](append(c.opts, keyedsem.WithHistograms())...)
			defer s.Close()
			ctx := context.Background()
			const releases = 5000
			for i := range releases {
				p, err := s.Acquire(ctx, "k"+strconv.Itoa(i%3))
				if err != nil {
					t.Fatal(err)
				}
				p.Release()
			}
			st := s.Stats()
			testkit.SampledHolds(t, releases, st.Released, st.HoldTime.Count, st.HoldTime.Counts[:], keyedsem.TimedHolds(s))
		})
	}
}

// A token made new, from the pool or an entry's own, starts its
// generation where the last one made left off: a run of new keys, each
// on a new token, times one hold in about SampleEvery after the first
// ones, not every one. Before, every new token started at generation 0,
// which the sampler always picks.
func TestHoldTimesSampledOnNewTokens(t *testing.T) {
	for _, c := range tokenKinds {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[int](append(c.opts, keyedsem.WithHistograms())...)
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline) // fails, not hangs, if a key's permit is lost
			defer cancel()
			for range 2000 { // past the first holds, which are all timed
				p, err := s.Acquire(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				p.Release()
			}
			before := keyedsem.TimedHolds(s)
			// Held at once on distinct keys: most tokens are new.
			const n = 1024
			held := make([]semaphore.Permit, n)
			for i := range held {
				p, err := s.Acquire(ctx, 1+i)
				if err != nil {
					t.Fatal(err)
				}
				held[i] = p
			}
			for _, p := range held {
				p.Release()
			}
			timed := keyedsem.TimedHolds(s) - before
			if timed > n/4 {
				t.Fatalf("%d of %d holds on new tokens timed; want about one in 16", timed, n)
			}
		})
	}
}
