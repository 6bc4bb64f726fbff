package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

func placeJoin(t *testing.T, s *semaphore.Weighted, n int64) semaphore.Place {
	t.Helper()
	pl, err := s.Join(n)
	if err != nil {
		t.Fatalf("Join(%d): %v", n, err)
	}
	return pl
}

func placeWait(t *testing.T, pl semaphore.Place, what string) semaphore.Permit {
	t.Helper()
	return testkit.Await(t, what, pl.Wait)
}

func placeCheck(t *testing.T, s *semaphore.Weighted, what string, held int64, waiters int) {
	t.Helper()
	if st := s.Stats(); st.Held != held || st.Waiters != waiters {
		t.Fatalf("%s: held %d, waiters %d; want %d, %d", what, st.Held, st.Waiters, held, waiters)
	}
}

// TestPlaceOwnershipWeighted: a place is used once, through any copy; a
// Leave after Wait keeps the permit; Leave of a place granted meanwhile
// hands its permits to the next in line; a heavy place at the head is not
// overtaken by a lighter one behind it.
func TestPlaceOwnershipWeighted(t *testing.T) {
	s := semaphore.New(2)
	pl := placeJoin(t, s, 2)
	cp := pl
	p := placeWait(t, pl, "granted at Join")
	if _, err := cp.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("Wait of a copy after Wait: %v; want ErrPlaceUsed", err)
	}
	cp.Leave()
	placeCheck(t, s, "Leave after Wait", 2, 0)

	heavy := placeJoin(t, s, 2)
	light := placeJoin(t, s, 1)
	placeCheck(t, s, "two places behind the holder", 2, 2)
	p.Release() // grants heavy, which nobody waits for yet
	placeCheck(t, s, "heavy granted", 2, 1)
	heavy.Leave() // its permits go to light
	heavy.Leave()
	if _, err := heavy.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("Wait after Leave: %v; want ErrPlaceUsed", err)
	}
	placeWait(t, light, "light, after heavy left").Release()
	var zero semaphore.Place
	if _, err := zero.Wait(context.Background()); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("zero Place: %v; want ErrPlaceUsed", err)
	}
	zero.Leave()
	requireBalanced(t, s)
}

// TestPlaceOrderWeighted: places joined 1..N are served 1..N though their
// Waits are called N..1, each after the one before it has queued.
func TestPlaceOrderWeighted(t *testing.T) {
	const n = 8
	s := semaphore.New(1)
	places := make([]semaphore.Place, n+1)
	for i := 1; i <= n; i++ {
		places[i] = placeJoin(t, s, 1)
	}
	testkit.ServedInJoinOrder(t, n, func() int { return s.Stats().Waiters },
		func(ctx context.Context, i int) (semaphore.Permit, error) { return places[i].Wait(ctx) })
	requireBalanced(t, s)
}

// TestPlaceEndsWeighted: a context ended before the grant wins (the grant
// came before Wait); Close and a shrink fail the places in line; Join
// refuses what Acquire refuses at once.
func TestPlaceEndsWeighted(t *testing.T) {
	s := semaphore.New(1, semaphore.WithMaxWaiters(2))
	for round := range 1000 {
		holder := take(t, s, 1)
		first := placeJoin(t, s, 1)
		second := placeJoin(t, s, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		holder.Release() // grants first, after its context ended
		if p, err := first.Wait(ctx); err != context.Canceled || p.Weight() != 0 {
			t.Fatalf("round %d: Wait with a context ended before the grant: %v; want context.Canceled", round, err)
		}
		placeWait(t, second, "second").Release()
	}
	requireBalanced(t, s)

	holder := take(t, s, 1)
	a := placeJoin(t, s, 1)
	placeJoin(t, s, 1).Leave()
	b := placeJoin(t, s, 1)
	if _, err := s.Join(1); !errors.Is(err, semaphore.ErrQueueFull) {
		t.Fatalf("Join past WithMaxWaiters: %v; want ErrQueueFull", err)
	}
	for _, c := range []struct {
		n    int64
		want error
	}{{0, semaphore.ErrInvalidWeight}, {2, semaphore.ErrTooHeavy}} {
		if _, err := s.Join(c.n); !errors.Is(err, c.want) {
			t.Fatalf("Join(%d): %v; want %v", c.n, err, c.want)
		}
	}
	s.SetCapacity(0)
	s.Close()
	if _, err := a.Wait(context.Background()); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Wait of a place failed by a shrink: %v; want ErrTooHeavy", err)
	}
	b.Leave()
	holder.Release()
	if _, err := s.Join(1); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Join after Close: %v; want ErrClosed", err)
	}
}

// TestPlaceRaceWeighted races Join, Wait (with contexts that end), Leave
// and Release on a semaphore of capacity 3, 1000 rounds, and checks that
// no more than the capacity is ever held and that nothing is held or
// waiting after each round.
func TestPlaceRaceWeighted(t *testing.T) {
	const capacity = 3
	racePlaces(t, semaphore.New(capacity), capacity, func(s *semaphore.Weighted, rng *rand.Rand) (semaphore.Place, error) {
		return s.Join(1 + int64(rng.IntN(capacity)))
	})
}

// racePlaces runs the rounds of a place race on s: six callers a round
// join (join, drawing from rng), end their places as testkit.RacePlace
// does, and hold what they got; after each round nothing is held or
// waiting, and no more than capacity was ever held at once.
func racePlaces(t *testing.T, s *semaphore.Weighted, capacity int64, join func(*semaphore.Weighted, *rand.Rand) (semaphore.Place, error)) {
	t.Helper()
	var inside atomic.Int64
	var bad atomic.Value // string
	for round := range testkit.Rounds() {
		fns := make([]func(), 6)
		for c := range fns {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(c)))
			fns[c] = func() {
				pl, err := join(s, rng)
				if err != nil {
					bad.Store("Join: " + err.Error())
					return
				}
				p, ok, err := testkit.RacePlace(rng.IntN(4), pl.Wait, pl.Leave, semaphore.ErrPlaceUsed)
				if err != nil {
					bad.Store(err.Error())
				}
				if !ok {
					return
				}
				if inside.Add(p.Weight()) > capacity {
					bad.Store("over capacity")
				}
				inside.Add(-p.Weight())
				if !p.Release() {
					bad.Store("a permit released twice")
				}
			}
		}
		testkit.Storm(t, "the callers", fns...)
		if v := bad.Load(); v != nil {
			t.Fatalf("round %d: %s", round, v)
		}
		testkit.Eventually(t, "the line to empty", func() bool {
			st := s.Stats()
			return st.Held == 0 && st.Waiters == 0
		})
	}
	requireBalanced(t, s)
}

// TestPlaceAllocatesNothingWeighted: Join, Wait and Release, and Join and
// Leave of a place in line, allocate nothing.
func TestPlaceAllocatesNothingWeighted(t *testing.T) {
	testkit.SkipUnlessAllocsCount(t)
	s := semaphore.New(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testkit.NoAllocs(t, "Join+Wait+Release", func() {
		pl, err := s.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pl.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	holder := take(t, s, 1)
	defer holder.Release()
	testkit.NoAllocs(t, "Join+Leave in line", func() {
		pl, err := s.Join(1)
		if err != nil {
			t.Fatal(err)
		}
		pl.Leave()
	})
}
