package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// plWait waits for pl within the testkit deadline and fails t if no permit
// comes.
func plWait(t *testing.T, pl semaphore.Place, what string) semaphore.Permit {
	t.Helper()
	return testkit.Await(t, what, pl.Wait)
}

// plJoin joins key's line and fails t on error.
func plJoin[K comparable](t *testing.T, s *keyedsem.Keyed[K], key K, n int64) semaphore.Place {
	t.Helper()
	pl, err := s.Join(key, semaphore.Weight(n))
	if err != nil {
		t.Fatalf("Join(%v, %d): %v", key, n, err)
	}
	return pl
}

// plCheck fails t unless s holds held permits and has waiters waiting.
func plCheck[K comparable](t *testing.T, s *keyedsem.Keyed[K], what string, held int64, waiters int) {
	t.Helper()
	st := s.Stats()
	if st.Held != held || st.Waiters != waiters {
		t.Fatalf("%s: held %d, waiters %d; want %d, %d", what, st.Held, st.Waiters, held, waiters)
	}
}

// TestPlaceGrantedAtJoin: on a free key Join takes the permits at once,
// and Wait hands them over without waiting.
func TestPlaceGrantedAtJoin(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(3))
	defer s.Close()
	pl := plJoin(t, s, "a", 2)
	plCheck(t, s, "after Join", 2, 0)
	if _, ok := s.TryAcquire("a", semaphore.Weight(2)); ok {
		t.Fatal("TryAcquire(2) succeeded beside a granted place of 2 (capacity 3)")
	}
	p := plWait(t, pl, "granted place")
	if p.Weight() != 2 {
		t.Fatalf("permit weight %d; want 2", p.Weight())
	}
	if !p.Release() {
		t.Fatal("Release of the place's permit returned false")
	}
	plCheck(t, s, "after Release", 0, 0)
	if st := s.Stats(); st.Acquired != 1 || st.Released != 1 || st.Waited != 0 {
		t.Fatalf("counters %+v; want 1 acquired, 1 released, 0 waited", st.Counters)
	}
}

// TestPlaceOwnership: a place is used once, through any copy: a second
// Wait, a Wait after Leave and the zero Place's Wait return ErrPlaceUsed
// and no permit; a Leave after Wait keeps the permit.
func TestPlaceOwnership(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			s := keyedsem.New[string]()
			defer s.Close()
			var holder semaphore.Permit
			if queued {
				holder, _ = s.Acquire(bg, "a")
			}
			pl := plJoin(t, s, "a", 1)
			holder.Release() // the zero Permit when not queued: a no-op
			cp := pl         // a copy is the same place

			p := plWait(t, pl, "first Wait")
			for i, again := range []semaphore.Place{pl, cp} {
				if p2, err := again.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) || p2.Weight() != 0 {
					t.Fatalf("Wait %d after Wait: %v, valid permit %v; want ErrPlaceUsed and none", i+2, err, p2.Weight() != 0)
				}
			}
			cp.Leave() // after Wait: nothing
			pl.Leave()
			if _, ok := s.TryAcquire("a"); ok {
				t.Fatal("Leave after Wait gave the permit back")
			}
			if !p.Release() {
				t.Fatal("the waited permit was not live after Leave")
			}

			pl = plJoin(t, s, "a", 1)
			pl.Leave()
			pl.Leave() // idempotent
			if p2, err := pl.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) || p2.Weight() != 0 {
				t.Fatalf("Wait after Leave: %v; want ErrPlaceUsed", err)
			}
			if !errors.Is(semaphore.ErrPlaceUsed, semaphore.ErrPlaceUsed) {
				t.Fatal("semaphore.ErrPlaceUsed is not semaphore.ErrPlaceUsed")
			}
			plCheck(t, s, "after Leave", 0, 0)
		})
	}
	var zero semaphore.Place
	if _, err := zero.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("zero Place Wait: %v; want ErrPlaceUsed", err)
	}
	zero.Leave()
}

// TestPlaceStaleCopyAfterReuse: the record behind a place is reused by a
// later Join; a copy of the used place must not reach the new one.
func TestPlaceStaleCopyAfterReuse(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	for i := range 100 {
		old := plJoin(t, s, "a", 1)
		old.Leave()
		cur := plJoin(t, s, fmt.Sprint("k", i), 1) // likely on old's record
		if _, err := old.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) {
			t.Fatalf("round %d: stale Wait: %v; want ErrPlaceUsed", i, err)
		}
		old.Leave() // must not give cur up
		p := plWait(t, cur, "current place")
		p.Release()
	}
	plCheck(t, s, "end", 0, 0)
}

// TestPlaceLeaveMovesLineOn: giving up a place in line lets the ones
// behind it up; giving up a place granted meanwhile (never waited for)
// hands its permits to the next in line.
func TestPlaceLeaveMovesLineOn(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	holder := plHold(t, s, "a")
	first := plJoin(t, s, "a", 1)
	second := plJoin(t, s, "a", 1)
	third := plJoin(t, s, "a", 1)
	plCheck(t, s, "three places behind a holder", 1, 3)

	first.Leave() // in line, at the head
	plCheck(t, s, "the head left", 1, 2)
	holder.Release() // grants second, which nobody waits for yet
	plCheck(t, s, "second granted", 1, 1)
	second.Leave() // granted meanwhile: its permit goes to third
	plCheck(t, s, "second left its grant", 1, 0)
	p := plWait(t, third, "third, after second left its grant")
	p.Release()
	plCheck(t, s, "end", 0, 0)
	if st := s.Stats(); st.Cancelled != 2 || st.Acquired != 2 || st.Released != 2 {
		t.Fatalf("counters %+v; want 2 cancelled (the two left), 2 acquired and released", st.Counters)
	}
}

// TestPlaceLeaveGrantedAtJoin: a place granted at Join and given up frees
// the key for the next caller.
func TestPlaceLeaveGrantedAtJoin(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	pl := plJoin(t, s, "a", 1)
	next := plJoin(t, s, "a", 1)
	plCheck(t, s, "granted place and one behind", 1, 1)
	pl.Leave()
	plCheck(t, s, "the granted place left", 1, 0)
	plWait(t, next, "the next place").Release()
	plCheck(t, s, "end", 0, 0)
}

// TestPlaceCancelWhileWaiting: a Wait whose context ends returns ctx.Err(),
// the place leaves the line and the one behind it is served by the next
// release.
func TestPlaceCancelWhileWaiting(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	holder := plHold(t, s, "a")
	first := plJoin(t, s, "a", 1)
	second := plJoin(t, s, "a", 1)
	ctx, cancel := context.WithCancel(bg)
	done := testkit.Go(func() error { _, err := first.Wait(ctx); return err })
	cancel()
	if err := testkit.Recv(t, done, "the cancelled Wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait: %v; want context.Canceled", err)
	}
	plCheck(t, s, "first left", 1, 1)
	holder.Release()
	plCheck(t, s, "second granted", 1, 0)
	plWait(t, second, "second").Release()
	plCheck(t, s, "end", 0, 0)
	if st := s.Stats(); st.Cancelled != 1 {
		t.Fatalf("Cancelled %d; want 1", st.Cancelled)
	}
}

// TestPlaceEndedBeforeGrantWins: a context that ended before the release
// that granted the place wins, though the grant came before Wait was even
// called: Wait returns ctx.Err() and the permit goes on to the next place.
// The engine's select picks at random between a grant and an end both
// ready, so the rounds would catch a Wait that took the grant.
func TestPlaceEndedBeforeGrantWins(t *testing.T) {
	s := keyedsem.New[string]()
	defer s.Close()
	for round := range 1000 {
		holder := plHold(t, s, "a")
		first := plJoin(t, s, "a", 1)
		second := plJoin(t, s, "a", 1)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		holder.Release() // grants first, after its context ended
		if p, err := first.Wait(ctx); err != context.Canceled || p.Weight() != 0 {
			t.Fatalf("round %d: Wait with a context ended before the grant: %v, permit %v; want context.Canceled and none", round, err, p.Weight() != 0)
		}
		plWait(t, second, "second, after first handed back").Release()
	}
	plCheck(t, s, "end", 0, 0)

	// Granted at Join, then waited for with an ended context: the same.
	pl := plJoin(t, s, "a", 1)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := pl.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait of a place granted at Join with an ended context: %v; want context.Canceled", err)
	}
	p, ok := s.TryAcquire("a")
	if !ok {
		t.Fatal("the place's permits were not given back")
	}
	p.Release()
}

// TestPlaceClose: Close fails the places in line (Wait returns ErrClosed),
// a place granted before Close keeps its permits, and Join after Close
// fails.
func TestPlaceClose(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
	holder := plHold(t, s, "a")
	inLine := plJoin(t, s, "a", 1)
	left := plJoin(t, s, "a", 1)
	granted := plJoin(t, s, "b", 1)
	s.Close()
	if _, err := inLine.Wait(bg); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Wait of a place in line at Close: %v; want ErrClosed", err)
	}
	left.Leave() // failed by Close; Leave only lets its reference go
	p := plWait(t, granted, "a place granted before Close")
	p.Release()
	holder.Release()
	if _, err := s.Join("a"); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Join after Close: %v; want ErrClosed", err)
	}
	if st := s.Stats(); st.Failed != 2 || st.Held != 0 || st.Waiters != 0 || st.Keys != 0 {
		t.Fatalf("after Close: %+v; want 2 failed, nothing held or waiting, no keys", st)
	}
}

// TestPlaceRefusals: Join refuses at once what Acquire refuses at once,
// taking nothing.
func TestPlaceRefusals(t *testing.T) {
	s := keyedsem.New[float64](keyedsem.WithMaxWaitersPerKey(1))
	defer s.Close()
	for _, c := range []struct {
		key  float64
		n    int64
		want error
	}{
		{1, 0, semaphore.ErrInvalidWeight},
		{1, 2, semaphore.ErrTooHeavy},
		{math.NaN(), 1, keyedsem.ErrNaNKey},
	} {
		if _, err := s.Join(c.key, semaphore.Weight(c.n)); !errors.Is(err, c.want) {
			t.Errorf("Join(%v, %d): %v; want %v", c.key, c.n, err, c.want)
		}
	}
	holder := plJoin(t, s, 1, 1)
	inLine := plJoin(t, s, 1, 1)
	if _, err := s.Join(1); !errors.Is(err, semaphore.ErrQueueFull) {
		t.Fatalf("Join past WithMaxWaitersPerKey: %v; want ErrQueueFull", err)
	}
	inLine.Leave()
	holder.Leave()
	plCheck(t, s, "end", 0, 0)
	if st := s.Stats(); st.Rejected != 4 || st.Keys > 1 {
		t.Fatalf("after refusals: %+v; want 4 rejected and at most the one key", st)
	}
}

// TestPlaceKeepsItsEntry: the entry of a key with a place, in line or
// granted and never waited for, is never evicted: not by Sweep, nor by
// the cap, nor at idle timeout 0; the place's permit is still the key's.
// The entry goes when the place ends.
func TestPlaceKeepsItsEntry(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithIdleTimeout(0), keyedsem.WithMaxKeys(2))
	defer s.Close()
	granted := plJoin(t, s, "granted", 1)
	holder, err := s.Acquire(bg, "queued")
	plMust(t, err)
	inLine := plJoin(t, s, "queued", 1)
	holder.Release() // inLine is granted now, its reference kept
	for i := range 200 {
		p, err := s.Acquire(bg, fmt.Sprint("churn", i))
		plMust(t, err)
		p.Release()
		s.Sweep()
	}
	for _, key := range []string{"granted", "queued"} {
		if !keyedsem.Has(s, key) {
			t.Fatalf("the entry of %q, which has a place, was evicted", key)
		}
		if p, ok := s.TryAcquire(key); ok {
			p.Release()
			t.Fatalf("TryAcquire(%q) succeeded beside a granted place: the key has two entries", key)
		}
	}
	plWait(t, granted, "granted").Release()
	inLine.Leave()
	if s.Len() != 0 {
		t.Fatalf("Len %d after the places ended; want 0 (idle timeout 0)", s.Len())
	}
}

// TestPlaceOrder: places joined 1..N are served 1..N, though their Waits
// are called N..1, each queued before the next is called. (Waiting at
// Wait instead of at Join would serve them N..2 after 1.)
func TestPlaceOrder(t *testing.T) {
	const n = 8
	s := keyedsem.New[string]()
	defer s.Close()
	places := make([]semaphore.Place, n+1)
	for i := 1; i <= n; i++ {
		places[i] = plJoin(t, s, "thread", 1)
	}
	testkit.ServedInJoinOrder(t, n, func() int { return s.Stats().Waiters },
		func(ctx context.Context, i int) (semaphore.Permit, error) { return places[i].Wait(ctx) })
}

// TestPlaceRace races Join, Wait (with contexts that end), Leave and
// Release on a few keys of capacity 2, 1000 rounds, and checks after each
// round that nothing is held or waiting, that no more than the capacity
// was ever held at once, and that every Join was either waited for with a
// permit, failed, or left.
func TestPlaceRace(t *testing.T) {
	for _, mode := range idleModes {
		t.Run(mode.name, func(t *testing.T) {
			opts := append([]keyedsem.Option{keyedsem.WithPerKeyCapacity(2)}, mode.opts...)
			s := keyedsem.New[int](opts...)
			defer s.Close()
			var inside [2]atomic.Int64
			var over atomic.Bool
			for round := range testkit.Rounds() {
				const callers = 6
				fns := make([]func(), callers)
				for c := range callers {
					rng := rand.New(rand.NewPCG(uint64(round), uint64(c)))
					key := c % 2
					fns[c] = func() {
						pl, err := s.Join(key, semaphore.Weight(1+int64(rng.IntN(2))))
						if err != nil {
							t.Errorf("Join: %v", err)
							return
						}
						p, ok, err := testkit.RacePlace(rng.IntN(4), pl.Wait, pl.Leave, semaphore.ErrPlaceUsed)
						if err != nil {
							t.Error(err)
						}
						if ok {
							hold(&inside[key], p, &over)
						}
					}
				}
				testkit.Storm(t, "the callers", fns...)
				// The racing Leaves run on goroutines of their own.
				testkit.Eventually(t, "the line to empty", func() bool {
					st := s.Stats()
					return st.Held == 0 && st.Waiters == 0
				})
				if over.Load() {
					t.Fatalf("round %d: more than the capacity held at once", round)
				}
			}
			st := s.Stats()
			if st.Acquired != st.Released || st.DoubleReleases != 0 {
				t.Fatalf("end: %+v; want every acquired permit released once", st)
			}
		})
	}
}

// hold runs a holder's turn: it counts p's weight in while it holds it,
// notes if that ever exceeds the capacity (2), and releases p.
func hold(in *atomic.Int64, p semaphore.Permit, over *atomic.Bool) {
	if in.Add(p.Weight()) > 2 {
		over.Store(true)
	}
	in.Add(-p.Weight())
	if !p.Release() {
		over.Store(true)
	}
}

// TestPlaceAllocatesNothing: Join, Wait and Release of a free key, and
// Join and Leave of a place in line, allocate nothing: the place's record
// is pooled.
func TestPlaceAllocatesNothing(t *testing.T) {
	testkit.SkipUnlessAllocsCount(t)
	s := keyedsem.New[string]()
	defer s.Close()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	testkit.NoAllocs(t, "Join+Wait+Release", func() {
		pl, err := s.Join("a")
		if err != nil {
			t.Fatal(err)
		}
		p, err := pl.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	holder := plHold(t, s, "a")
	defer holder.Release()
	testkit.NoAllocs(t, "Join+Leave in line", func() {
		pl, err := s.Join("a")
		if err != nil {
			t.Fatal(err)
		}
		pl.Leave()
	})
}

// plHold takes a permit of key, so that places joined after it wait (at
// the default per-key capacity of 1), and fails t on error.
func plHold[K comparable](t *testing.T, s *keyedsem.Keyed[K], key K) semaphore.Permit {
	t.Helper()
	p, err := s.Acquire(bg, key)
	plMust(t, err)
	return p
}

func plMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPlaceStaleCopyAcrossSemaphores: the records behind places are
// pooled for every semaphore that keeps them (waitq.Spot), so a record
// used by a keyed place may serve a semaphore.Weighted's Join next, and
// the other way round; a copy of the used place must reach neither the
// new place nor the other semaphore.
func TestPlaceStaleCopyAcrossSemaphores(t *testing.T) {
	k := keyedsem.New[string]()
	defer k.Close()
	w := semaphore.New(1)
	defer w.Close()
	for i := range 100 {
		old := plJoin(t, k, "a", 1)
		old.Leave()
		cur, err := w.Join(1) // likely on old's record
		if err != nil {
			t.Fatalf("round %d: Weighted.Join: %v", i, err)
		}
		if _, err := old.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) {
			t.Fatalf("round %d: stale keyed Wait: %v; want ErrPlaceUsed", i, err)
		}
		old.Leave() // must not give cur up
		plWait(t, cur, "the Weighted place").Release()

		wold, err := w.Join(1)
		if err != nil {
			t.Fatalf("round %d: Weighted.Join: %v", i, err)
		}
		wold.Leave()
		kcur := plJoin(t, k, "b", 1) // likely on wold's record
		if _, err := wold.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) {
			t.Fatalf("round %d: stale Weighted Wait: %v; want ErrPlaceUsed", i, err)
		}
		wold.Leave() // must not give kcur up
		plWait(t, kcur, "the keyed place").Release()
	}
	plCheck(t, k, "end", 0, 0)
	if st := w.Stats(); st.Acquired != st.Released || st.Waiters != 0 || st.DoubleReleases != 0 {
		t.Fatalf("Weighted at the end: %+v; want every permit back once, nobody waiting", st)
	}
}
