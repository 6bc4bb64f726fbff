package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// join takes a place in the line's key with Join and the options tn
// and hands it to a goroutine that waits for it and reports on the line's
// channel, as queue's waiters do. The place is in line when join returns.
func (l *line) join(label string, tn []semaphore.AcquireOption) {
	l.t.Helper()
	var pl semaphore.Place
	var err error
	pl, err = l.s.Join(l.key, tn...)
	require.NoError(l.t, err, label)
	go func() {
		ctx, cancel := context.WithTimeout(bg, testkit.Deadline)
		defer cancel()
		p, err := pl.Wait(ctx)
		l.out <- served{label, p, err}
	}()
	l.n++
	require.Equal(l.t, l.n, l.s.Stats().Waiters, "%s: the place stands in line", label)
}

// TestJoinTurnSequenceOrder: a thread's messages whose places are taken
// out of order (4, 2, 5, 3) are served in ascending sequence, a Join at
// sequence 0 first, and AcquireTurn's waiters take their turn among them.
func TestJoinTurnSequenceOrder(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithSequenceOrder())
	l := newLine(t, s, "thread")
	l.join("4", []semaphore.AcquireOption{semaphore.Sequence(4)})
	l.join("2", []semaphore.AcquireOption{semaphore.Sequence(2)})
	l.queue("6 (AcquireTurn)", []semaphore.AcquireOption{semaphore.Sequence(6)})
	l.join("5", []semaphore.AcquireOption{semaphore.Sequence(5)})
	l.queue("1 (AcquireTurn)", []semaphore.AcquireOption{semaphore.Sequence(1)})
	l.join("3", []semaphore.AcquireOption{semaphore.Sequence(3)})
	l.join("0 (Join)", []semaphore.AcquireOption{})
	assert.Equal(t, []string{"0 (Join)", "1 (AcquireTurn)", "2", "3", "4", "5", "6 (AcquireTurn)"}, l.order())
}

// TestJoinTurnPriorityAging: places are served by priority, and a place
// ages from its JoinTurn: a priority-2 place taken three steps after a
// priority -1 one ties with it and goes behind it.
func TestJoinTurnPriorityAging(t *testing.T) {
	s, fake := newOrdered(t, keyedsem.WithPriorities(time.Minute))
	l := newLine(t, s, "thread")
	l.join("cron p-1", []semaphore.AcquireOption{semaphore.Priority(-1)})
	l.join("plain", []semaphore.AcquireOption{})
	l.queue("heartbeat p0 (AcquireTurn)", []semaphore.AcquireOption{})
	l.join("user p2", []semaphore.AcquireOption{semaphore.Priority(2)})
	fake.Advance(3 * time.Minute)
	l.join("late user p2", []semaphore.AcquireOption{semaphore.Priority(2)})
	l.join("late user p3", []semaphore.AcquireOption{semaphore.Priority(3)})
	assert.Equal(t, []string{"user p2", "plain", "heartbeat p0 (AcquireTurn)", "late user p3", "cron p-1", "late user p2"}, l.order())
}

// TestJoinTurnOwnership: a place with a turn keeps the rules of every
// place: it goes ahead of a heavy head that does not fit and takes its
// permits at once if they are free, it is used once, Leave of a place in
// line or granted moves the line on, and a Wait with an ended context
// gives up the turn.
func TestJoinTurnOwnership(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithSequenceOrder(), keyedsem.WithPerKeyCapacity(2))
	holder, err := s.Acquire(bg, "k")
	require.NoError(t, err)
	heavy, err := s.Join("k", semaphore.Weight(2), semaphore.Sequence(5))
	require.NoError(t, err)
	behind, err := s.Join("k", semaphore.Sequence(9))
	require.NoError(t, err)
	plCheck(t, s, "a heavy head and a light place behind it", 1, 2)
	ahead, err := s.Join("k", semaphore.Sequence(1))
	require.NoError(t, err)
	plCheck(t, s, "a place ahead of the heavy head", 2, 2)
	cp := ahead
	plWait(t, ahead, "the place ahead").Release()
	if _, err := cp.Wait(bg); !errors.Is(err, semaphore.ErrPlaceUsed) {
		t.Fatalf("Wait of a copy: %v; want ErrPlaceUsed", err)
	}
	cp.Leave()
	plCheck(t, s, "the place ahead released", 1, 2)

	middle, err := s.Join("k", semaphore.Sequence(7))
	require.NoError(t, err)
	middle.Leave() // in line: the line closes up
	plCheck(t, s, "a place left in line", 1, 2)
	holder.Release() // grants heavy, which nobody waits for yet
	plCheck(t, s, "heavy granted", 2, 1)
	ended, cancel := context.WithCancel(bg)
	cancel()
	if _, err := heavy.Wait(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended context: %v; want context.Canceled", err)
	}
	plWait(t, behind, "behind, after heavy gave up its turn").Release()
	plCheck(t, s, "all done", 0, 0)
	if st := s.Stats(); st.Cancelled != 2 || st.Rejected != 0 {
		t.Fatalf("counters %+v; want 2 cancelled (a Leave, an ended Wait), none rejected", st.Counters)
	}
}

// TestJoinTurnRefusals: JoinTurn refuses a field the semaphore does not
// order by, and a priority out of range, as AcquireTurn does: at once,
// wrapping ErrInvalidConfig, taking nothing (no key made, no waiter) and
// counting one Rejected each, on a free key and on a busy one.
func TestJoinTurnRefusals(t *testing.T) {
	fifo := keyedsem.New[string]()
	prio := keyedsem.New[string](keyedsem.WithPriorities(time.Second))
	seq := keyedsem.New[string](keyedsem.WithSequenceOrder())
	defer func() { fifo.Close(); prio.Close(); seq.Close() }()
	for _, c := range []struct {
		name string
		s    *keyedsem.Keyed[string]
		turn []semaphore.AcquireOption
	}{
		{"FIFO", fifo, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{"FIFO", fifo, []semaphore.AcquireOption{semaphore.Sequence(1)}},
		{"FIFO", fifo, []semaphore.AcquireOption{semaphore.Group("g")}},
		{"priorities", prio, []semaphore.AcquireOption{semaphore.Sequence(1)}},
		{"priorities", prio, []semaphore.AcquireOption{semaphore.Group("g")}},
		{"priorities", prio, []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority + 1)}},
		{"priorities", prio, []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority - 1)}},
		{"sequence", seq, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{"sequence", seq, []semaphore.AcquireOption{semaphore.Group("g")}},
	} {
		for _, key := range []string{"free", "busy"} {
			var holder semaphore.Permit
			if key == "busy" {
				holder = plAcquire(t, c.s, key)
			}
			before := c.s.Stats()
			if pl, err := c.s.Join(key, c.turn...); !errors.Is(err, semaphore.ErrInvalidConfig) {
				pl.Leave()
				t.Fatalf("%s: JoinTurn(%s, 1, %+v): %v; want ErrInvalidConfig", c.name, key, c.turn, err)
			}
			st := c.s.Stats()
			if st.Rejected != before.Rejected+1 || st.Held != before.Held || st.Waiters != 0 || st.Keys != before.Keys {
				t.Errorf("%s: JoinTurn(%s, 1, %+v) refused: %+v; want one more Rejected and nothing taken", c.name, key, c.turn, st)
			}
			holder.Release()
		}
	}
}

// plAcquire acquires key within the testkit deadline and fails t if no
// permit comes.
func plAcquire(t *testing.T, s *keyedsem.Keyed[string], key string) semaphore.Permit {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, testkit.Deadline)
	defer cancel()
	p, err := s.Acquire(ctx, key)
	require.NoError(t, err)
	return p
}

// TestPlaceTurnRace races JoinTurn at random sequences or priorities,
// Wait (with contexts that end), Leave and Release on two keys of
// capacity 2, 1000 rounds, and checks that no key is ever over its
// capacity and that nothing is held or waiting after each round.
func TestPlaceTurnRace(t *testing.T) {
	for _, order := range []struct {
		name string
		opt  keyedsem.Option
		turn func(*rand.Rand) []semaphore.AcquireOption
	}{
		{"sequence", keyedsem.WithSequenceOrder(), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Sequence(r.Int64N(8))}
		}},
		{"priorities", keyedsem.WithPriorities(time.Nanosecond), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Priority(r.IntN(5) - 2)}
		}},
	} {
		t.Run(order.name, func(t *testing.T) {
			s := keyedsem.New[int](order.opt, keyedsem.WithPerKeyCapacity(2))
			defer s.Close()
			var inside [2]atomic.Int64
			var bad atomic.Value // string
			for round := range testkit.Rounds() {
				fns := make([]func(), 6)
				for c := range fns {
					rng := rand.New(rand.NewPCG(uint64(round), uint64(c)))
					fns[c] = func() {
						key := rng.IntN(2)
						pl, err := s.Join(key, append(order.turn(rng), semaphore.Weight(1+rng.Int64N(2)))...)
						if err != nil {
							bad.Store("JoinTurn: " + err.Error())
							return
						}
						p, ok, err := testkit.RacePlace(rng.IntN(4), pl.Wait, pl.Leave, semaphore.ErrPlaceUsed)
						if err != nil {
							bad.Store(err.Error())
						}
						if !ok {
							return
						}
						if inside[key].Add(p.Weight()) > 2 {
							bad.Store(fmt.Sprintf("key %d over its capacity", key))
						}
						inside[key].Add(-p.Weight())
						if !p.Release() {
							bad.Store("a permit released twice")
						}
					}
				}
				testkit.Storm(t, "the callers", fns...)
				if v := bad.Load(); v != nil {
					t.Fatalf("round %d: %s", round, v)
				}
				testkit.Eventually(t, "the lines to empty", func() bool {
					st := s.Stats()
					return st.Held == 0 && st.Waiters == 0
				})
			}
		})
	}
}

// TestPlaceTurnAllocatesNothing: JoinTurn of a place in line, its Wait
// and Release, and JoinTurn and Leave, allocate nothing; nor does
// Honoured.
func TestPlaceTurnAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts differ under -race and -cover")
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	for _, c := range []struct {
		name string
		opt  keyedsem.Option
		turn []semaphore.AcquireOption
	}{
		{"priorities", keyedsem.WithPriorities(time.Second), []semaphore.AcquireOption{semaphore.Priority(2)}},
		{"sequence", keyedsem.WithSequenceOrder(), []semaphore.AcquireOption{semaphore.Sequence(9)}},
	} {
		s := keyedsem.New[string](c.opt)
		holder := plAcquire(t, s, "a") // the key is held from here: every place waits
		if a := testing.AllocsPerRun(1000, func() {
			pl, err := s.Join("a", c.turn...)
			if err != nil {
				t.Fatal(err)
			}
			pl.Leave()
		}); a != 0 {
			t.Errorf("%s: JoinTurn+Leave in line: %.1f allocs; want 0", c.name, a)
		}
		if a := testing.AllocsPerRun(1000, func() {
			pl, err := s.Join("a", c.turn...)
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
		s.Close()
	}
}
