package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// labelled is a place and the label it is served under.
type labelled struct {
	label string
	pl    semaphore.Place
}

// joinTurn is JoinTurn that fails the test on an error.
func joinTurn(t *testing.T, s *semaphore.Weighted, label string, n int64, turn []semaphore.AcquireOption) labelled {
	t.Helper()
	pl, err := s.Join(n, turn...)
	if err != nil {
		t.Fatalf("%s: JoinTurn(%d, %+v): %v", label, n, turn, err)
	}
	return labelled{label, pl}
}

// serviceOrder waits for every place from a goroutine of its own, releases
// holder, and returns the labels in the order the places were granted:
// each waiter sends its label before it releases, so on a semaphore of
// capacity 1 the sends are in grant order. The books are checked once
// every waiter has released (the last label is sent before its release).
func serviceOrder(t *testing.T, s *semaphore.Weighted, holder semaphore.Permit, places ...labelled) string {
	t.Helper()
	out := make(chan string, len(places))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range places {
		wg.Add(1)
		go func() {
			defer wg.Done()
			perm, err := p.pl.Wait(ctx)
			if err != nil {
				out <- p.label + ": " + err.Error()
				return
			}
			out <- p.label
			perm.Release()
		}()
	}
	holder.Release()
	got := make([]string, len(places))
	for i := range got {
		got[i] = testkit.Recv(t, out, fmt.Sprintf("grant %d of %d (so far %v)", i+1, len(places), got[:i]))
	}
	testkit.WaitAll(t, &wg, "the waiters to release")
	requireBalanced(t, s)
	return fmt.Sprint(got)
}

// TestJoinTurnPriorities: places taken with JoinTurn on a semaphore made
// WithPriorities are served by priority, arrival order within one, also
// when their Waits come in another order; Join is a place at priority 0;
// and a place ages from its JoinTurn: joined three steps before a
// priority-2 place, a priority-0 place goes first.
func TestJoinTurnPriorities(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(1, semaphore.WithPriorities(time.Minute), semaphore.WithClock(clk))
	clk.Advance(10 * time.Minute) // arrivals well after the epoch
	holder := take(t, s, 1)
	cron := joinTurn(t, s, "cron", 1, []semaphore.AcquireOption{semaphore.Priority(-1)})
	plain, err := s.Join(1)
	if err != nil {
		t.Fatal(err)
	}
	user1 := joinTurn(t, s, "user1", 1, []semaphore.AcquireOption{semaphore.Priority(2)})
	user2 := joinTurn(t, s, "user2", 1, []semaphore.AcquireOption{semaphore.Priority(2)})
	if got, want := serviceOrder(t, s, holder, cron, user2, labelled{"plain", plain}, user1), "[user1 user2 plain cron]"; got != want {
		t.Fatalf("places served %s; want %s", got, want)
	}

	holder = take(t, s, 1)
	early := joinTurn(t, s, "early", 1, []semaphore.AcquireOption{})
	clk.Advance(3 * time.Minute)
	late := joinTurn(t, s, "late", 1, []semaphore.AcquireOption{semaphore.Priority(2)})
	if got, want := serviceOrder(t, s, holder, late, early), "[early late]"; got != want {
		t.Fatalf("an aged place and a newer higher one served %s; want %s", got, want)
	}
}

// TestJoinOrderedBesideAcquireTurn: a place taken by Join on a semaphore
// made WithPriorities stands at priority 0 at the time of its Join, among
// the waiters of AcquireTurn: a priority-1 AcquireTurn that comes later
// goes ahead of it, a priority -1 one behind it.
func TestJoinOrderedBesideAcquireTurn(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(1, semaphore.WithPriorities(time.Minute), semaphore.WithClock(clk))
	clk.Advance(10 * time.Minute)
	holder := take(t, s, 1)
	pl, err := s.Join(1)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 3)
	var wg sync.WaitGroup // the books are checked once every waiter has released
	acquire := func(label string, p int) {
		want := s.Stats().Waiters + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			perm, err := s.Acquire(context.Background(), 1, semaphore.Priority(p))
			if err != nil {
				out <- label + ": " + err.Error()
				return
			}
			out <- label
			perm.Release()
		}()
		testkit.Eventually(t, label+" to wait", func() bool { return s.Stats().Waiters == want })
	}
	acquire("low", -1)
	acquire("high", 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		perm, err := pl.Wait(context.Background())
		if err != nil {
			out <- "join: " + err.Error()
			return
		}
		out <- "join"
		perm.Release()
	}()
	holder.Release()
	var got []string
	for range 3 {
		got = append(got, testkit.Recv(t, out, "a grant"))
	}
	if g, want := fmt.Sprint(got), "[high join low]"; g != want {
		t.Fatalf("served %s; want %s", g, want)
	}
	testkit.WaitAll(t, &wg, "the waiters to release")
	requireBalanced(t, s)
}

// TestJoinTurnFairShare: places of two groups on a semaphore made
// WithFairShare take turns, whatever order they are waited in.
func TestJoinTurnFairShare(t *testing.T) {
	s := semaphore.New(1, semaphore.WithFairShare(nil))
	holder := take(t, s, 1)
	var places []labelled
	for i := range 3 {
		places = append(places, joinTurn(t, s, fmt.Sprint("a", i), 1, []semaphore.AcquireOption{semaphore.Group("a")}))
	}
	places = append(places, joinTurn(t, s, "b0", 1, []semaphore.AcquireOption{semaphore.Group("b")}))
	places = append(places, joinTurn(t, s, "b1", 1, []semaphore.AcquireOption{semaphore.Group("b")}))
	if got, want := serviceOrder(t, s, holder, places...), "[a0 b0 a1 b1 a2]"; got != want {
		t.Fatalf("fair places served %s; want %s", got, want)
	}
}

// TestJoinTurnAheadOfHeavyHead: a place whose priority puts it ahead of a
// heavy head that does not fit takes its permits at once; a place behind
// the head waits, as does any place on a FIFO semaphore.
func TestJoinTurnAheadOfHeavyHead(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(2, semaphore.WithPriorities(time.Minute), semaphore.WithClock(clk))
	holder := take(t, s, 1)
	heavy := joinTurn(t, s, "heavy", 2, []semaphore.AcquireOption{})
	behind := joinTurn(t, s, "behind", 1, []semaphore.AcquireOption{semaphore.Priority(-1)})
	placeCheck(t, s, "a heavy head and a light place behind it", 1, 2)
	ahead := joinTurn(t, s, "ahead", 1, []semaphore.AcquireOption{semaphore.Priority(1)})
	placeCheck(t, s, "a place ahead of the heavy head", 2, 2)
	placeWait(t, ahead.pl, "the place ahead").Release()
	placeCheck(t, s, "the place ahead released (the heavy head still waits for the holder)", 1, 2)
	if got, want := serviceOrder(t, s, holder, behind, heavy), "[heavy behind]"; got != want {
		t.Fatalf("served %s; want %s", got, want)
	}
}

// TestJoinTurnRefusals: JoinTurn refuses a Turn field the semaphore has no
// option for, and a priority out of range, as AcquireTurn does: at once,
// wrapping ErrInvalidConfig, taking nothing and counting one Rejected
// each; and a fair-share group whose weight is out of range.
func TestJoinTurnRefusals(t *testing.T) {
	fifo := semaphore.New(1)
	prio := semaphore.New(1, semaphore.WithPriorities(time.Second))
	fair := semaphore.New(1, semaphore.WithFairShare(func(g string) int {
		if g == "heavy" {
			return 1001 // above the largest weight, 1000
		}
		return 1
	}))
	for _, c := range []struct {
		s    *semaphore.Weighted
		turn []semaphore.AcquireOption
	}{
		{fifo, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{fifo, []semaphore.AcquireOption{semaphore.Sequence(1)}},
		{fifo, []semaphore.AcquireOption{semaphore.Group("g")}},
		{prio, []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority + 1)}},
		{prio, []semaphore.AcquireOption{semaphore.Sequence(3)}},
		{prio, []semaphore.AcquireOption{semaphore.Group("g")}},
		{fair, []semaphore.AcquireOption{semaphore.Priority(1)}},
	} {
		for _, held := range []bool{false, true} { // the fast path and the line
			var holder semaphore.Permit
			if held {
				holder = take(t, c.s, 1)
			}
			before := c.s.Stats()
			if _, err := c.s.Join(1, c.turn...); !errors.Is(err, semaphore.ErrInvalidConfig) {
				t.Errorf("JoinTurn(1, %+v), held %v: %v; want ErrInvalidConfig", c.turn, held, err)
			}
			if st := c.s.Stats(); st.Rejected != before.Rejected+1 || st.Held != before.Held || st.Waiters != 0 {
				t.Errorf("JoinTurn(1, %+v) refused: %+v; want one more Rejected and nothing taken", c.turn, st)
			}
			holder.Release()
		}
	}
	holder := take(t, fair, 1)
	if _, err := fair.Join(1, semaphore.Group("heavy")); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Errorf("JoinTurn of a group weighted out of range: %v; want ErrInvalidConfig", err)
	}
	holder.Release()
	for _, s := range []*semaphore.Weighted{fifo, prio, fair} {
		if _, err := s.Join(0); !errors.Is(err, semaphore.ErrInvalidWeight) {
			t.Errorf("JoinTurn(0): %v; want ErrInvalidWeight", err)
		}
		requireBalanced(t, s)
	}
}

// TestPlaceTurnRaceWeighted races JoinTurn at random priorities, Wait
// (with contexts that end), Leave and Release on a semaphore made
// WithPriorities, 1000 rounds, and checks that no more than the capacity
// is ever held and that nothing is held or waiting after each round.
func TestPlaceTurnRaceWeighted(t *testing.T) {
	const capacity = 3
	for _, order := range []struct {
		name string
		opt  semaphore.Option
		turn func(*rand.Rand) []semaphore.AcquireOption
	}{
		{"priorities", semaphore.WithPriorities(time.Nanosecond), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Priority(r.IntN(5) - 2)}
		}},
		{"fair", semaphore.WithFairShare(nil), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Group(fmt.Sprint(r.IntN(3)))}
		}},
	} {
		t.Run(order.name, func(t *testing.T) {
			racePlaces(t, semaphore.New(capacity, order.opt), capacity, func(s *semaphore.Weighted, rng *rand.Rand) (semaphore.Place, error) {
				return s.Join(1+int64(rng.IntN(capacity)), order.turn(rng)...)
			})
		})
	}
}

// TestPlaceTurnAllocatesNothingWeighted: JoinTurn of a place in line of an
// ordered semaphore, its Wait and Release, and JoinTurn and Leave,
// allocate nothing; nor does Honoured.
func TestPlaceTurnAllocatesNothingWeighted(t *testing.T) {
	testkit.SkipUnlessAllocsCount(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		s    *semaphore.Weighted
		turn []semaphore.AcquireOption
	}{
		{"priorities", semaphore.New(1, semaphore.WithPriorities(time.Second)), []semaphore.AcquireOption{semaphore.Priority(2)}},
		{"fair", semaphore.New(1, semaphore.WithFairShare(nil)), []semaphore.AcquireOption{semaphore.Group("tenant")}},
	} {
		s := c.s
		holder := take(t, s, 1) // s is held from here: every place waits
		if pl, err := s.Join(1, c.turn...); err == nil {
			pl.Leave() // the first wait of the group made its record (fair share)
		}
		if a := testing.AllocsPerRun(1000, func() {
			pl, err := s.Join(1, c.turn...)
			if err != nil {
				t.Fatal(err)
			}
			pl.Leave()
		}); a != 0 {
			t.Errorf("%s: JoinTurn+Leave in line: %.1f allocs; want 0", c.name, a)
		}
		if a := testing.AllocsPerRun(1000, func() {
			pl, err := s.Join(1, c.turn...)
			if err != nil {
				t.Fatal(err)
			}
			holder.Release()
			p, err := pl.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holder = p
		}); a != 0 {
			t.Errorf("%s: JoinTurn in line, Release, Wait: %.1f allocs; want 0", c.name, a)
		}
		holder.Release()
	}
}
