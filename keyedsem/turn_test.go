package keyedsem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// served is what one labelled waiter got.
type served struct {
	label string
	p     semaphore.Permit
	err   error
}

// line is a key of a semaphore that one test holds, and the waiters it
// queues behind the holder, each reporting on one channel, so that the
// order of service is the order of the reports: with a per-key capacity
// of 1, one waiter at a time holds the key.
type line struct {
	t    *testing.T
	s    *keyedsem.Keyed[string]
	key  string
	out  chan served
	n    int // waiters queued so far
	hold semaphore.Permit
}

func newLine(t *testing.T, s *keyedsem.Keyed[string], key string) *line {
	t.Helper()
	p, err := s.Acquire(bg, key)
	require.NoError(t, err)
	return &line{t: t, s: s, key: key, out: make(chan served, 64), hold: p}
}

// queue starts AcquireTurn(key, 1, tn) and waits until it is queued.
func (l *line) queue(label string, tn []semaphore.AcquireOption) {
	l.t.Helper()
	go func() {
		p, err := l.s.Acquire(bg, l.key, tn...)
		l.out <- served{label, p, err}
	}()
	l.n++
	testkit.Eventually(l.t, fmt.Sprintf("%s to queue", label), func() bool { return l.s.Stats().Waiters == l.n })
}

// order releases the holder and lets each waiter served release in turn,
// and returns the labels in the order they were served.
func (l *line) order() []string {
	l.t.Helper()
	l.hold.Release()
	var got []string
	for range l.n {
		r := testkit.Recv(l.t, l.out, "the next waiter's grant")
		require.NoError(l.t, r.err, r.label)
		got = append(got, r.label)
		r.p.Release()
	}
	l.n = 0
	return got
}

func newOrdered(t *testing.T, opts ...keyedsem.Option) (*keyedsem.Keyed[string], *clock.Fake) {
	fake := newFake()
	s := keyedsem.New[string](append([]keyedsem.Option{keyedsem.WithClock(fake)}, opts...)...)
	t.Cleanup(s.Close)
	return s, fake
}

// TestPrioritiesServeHigherFirst: waiters that arrive together are served
// by priority, equal priorities in arrival order; a plain Acquire waits at
// priority 0.
func TestPrioritiesServeHigherFirst(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithPriorities(time.Second))
	l := newLine(t, s, "thread")
	l.queue("low-a", []semaphore.AcquireOption{})
	l.queue("mid", []semaphore.AcquireOption{semaphore.Priority(1)})
	l.queue("high", []semaphore.AcquireOption{semaphore.Priority(2)})
	l.queue("low-b", []semaphore.AcquireOption{})
	l.queue("below", []semaphore.AcquireOption{semaphore.Priority(-1)})
	l.queue("mid-b", []semaphore.AcquireOption{semaphore.Priority(1)})
	assert.Equal(t, []string{"high", "mid", "mid-b", "low-a", "low-b", "below"}, l.order())
}

// TestAgingBound: on the fake clock, with a step of one second, a waiter
// of priority p is overtaken by a priority q waiter only if that one
// arrives less than (q-p) seconds after it; arriving exactly then, it
// ties and goes behind; later, it goes behind whatever its priority.
func TestAgingBound(t *testing.T) {
	s, fake := newOrdered(t, keyedsem.WithPriorities(time.Second))
	l := newLine(t, s, "thread")
	l.queue("A p0 t0", []semaphore.AcquireOption{})
	fake.Advance(2*time.Second - time.Nanosecond)
	l.queue("B p2 t2-", []semaphore.AcquireOption{semaphore.Priority(2)}) // within 2s of A: ahead of it
	fake.Advance(time.Nanosecond)
	l.queue("C p2 t2", []semaphore.AcquireOption{semaphore.Priority(2)}) // exactly 2s after A: behind it
	fake.Advance(3 * time.Second)
	l.queue("D p4 t5", []semaphore.AcquireOption{semaphore.Priority(4)}) // 5s > 4s after A: behind A and C
	l.queue("E p5 t5", []semaphore.AcquireOption{semaphore.Priority(5)}) // 5s after A: ties with A and C, behind them
	l.queue("F p6 t5", []semaphore.AcquireOption{semaphore.Priority(6)}) // ahead of A (6s > 5s) and of B (4s > 3s)
	assert.Equal(t, []string{"F p6 t5", "B p2 t2-", "A p0 t0", "C p2 t2", "E p5 t5", "D p4 t5"}, l.order())
}

// TestAgingServesTheLowEventually: a stream of higher-priority newcomers,
// one a second, passes a low waiter only for (q-p) steps; from then on
// every newcomer goes behind it, so it is not starved.
func TestAgingServesTheLowEventually(t *testing.T) {
	s, fake := newOrdered(t, keyedsem.WithPriorities(time.Second))
	l := newLine(t, s, "thread")
	l.queue("low", []semaphore.AcquireOption{})
	for i := 1; i <= 5; i++ {
		fake.Advance(time.Second)
		l.queue(fmt.Sprintf("high%d", i), []semaphore.AcquireOption{semaphore.Priority(3)})
	}
	assert.Equal(t, []string{"high1", "high2", "low", "high3", "high4", "high5"}, l.order())
}

// TestSequenceOrderServesLowerFirst: on a busy key, message 3 queued
// before message 2 still runs after it; equal sequences keep arrival
// order, and a plain Acquire waits at sequence 0.
func TestSequenceOrderServesLowerFirst(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithSequenceOrder())
	l := newLine(t, s, "thread")
	l.queue("3", []semaphore.AcquireOption{semaphore.Sequence(3)})
	l.queue("2", []semaphore.AcquireOption{semaphore.Sequence(2)})
	assert.Equal(t, []string{"2", "3"}, l.order())

	l = newLine(t, s, "thread")
	for _, seq := range []int64{5, 3, 4, 1} {
		l.queue(fmt.Sprint(seq), []semaphore.AcquireOption{semaphore.Sequence(seq)})
	}
	l.queue("4 again", []semaphore.AcquireOption{semaphore.Sequence(4)})
	l.queue("plain", []semaphore.AcquireOption{})
	assert.Equal(t, []string{"plain", "1", "3", "4", "4 again", "5"}, l.order())
}

// TestSequenceOrderCannotFixALateMessage: what the docs say it cannot do.
// Message 3 finds the key free and runs; message 2, arriving after it
// started, waits for it: sequence order reorders only callers waiting at
// the same time, and nothing holds the key for a missing number.
func TestSequenceOrderCannotFixALateMessage(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithSequenceOrder())
	p3, err := s.Acquire(bg, "thread", semaphore.Sequence(3))
	require.NoError(t, err, "message 3 takes a free key at once")
	c := goAcquireTurn(s, "thread", 1, []semaphore.AcquireOption{semaphore.Sequence(2)})
	waitForWaiters(s, 1)
	p3.Release()
	r := testkit.Recv(t, c, "message 2")
	require.NoError(t, r.err)
	r.p.Release()
}

func goAcquireTurn(s *keyedsem.Keyed[string], key string, n int64, tn []semaphore.AcquireOption) <-chan result {
	c := make(chan result, 1)
	go func() {
		p, err := s.Acquire(bg, key, append(tn, semaphore.Weight(n))...)
		c <- result{p, err}
	}()
	return c
}

// TestOrderedHeavyHeadKeepsItsProtection: with priorities (and with
// sequence order), a heavy head is not overtaken by lighter waiters of
// its own order, nor by TryAcquire; a newcomer that goes ahead of it by
// the order and fits is served at once.
func TestOrderedHeavyHeadKeepsItsProtection(t *testing.T) {
	for _, c := range []struct {
		name      string
		opt       keyedsem.Option
		same, aho []semaphore.AcquireOption // same place as the head's, ahead of it
	}{
		{"priorities", keyedsem.WithPriorities(time.Second), []semaphore.AcquireOption{}, []semaphore.AcquireOption{semaphore.Priority(1)}},
		{"sequence", keyedsem.WithSequenceOrder(), []semaphore.AcquireOption{semaphore.Sequence(5)}, []semaphore.AcquireOption{semaphore.Sequence(4)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newOrdered(t, c.opt, keyedsem.WithPerKeyCapacity(3))
			p, err := s.Acquire(bg, "k", semaphore.Weight(2))
			require.NoError(t, err)
			heavy := goAcquireTurn(s, "k", 3, c.same)
			waitForWaiters(s, 1)
			light := goAcquireTurn(s, "k", 1, c.same)
			waitForWaiters(s, 2)
			_, ok := s.TryAcquire("k")
			assert.False(t, ok, "TryAcquire overtook a waiter")

			ra := testkit.Recv(t, goAcquireTurn(s, "k", 1, c.aho), "a newcomer ahead of the heavy head that fits, granted at once")
			require.NoError(t, ra.err)
			ahead := ra.p
			assert.Equal(t, 2, s.Stats().Waiters)

			p.Release() // 2 free: the heavy head still does not fit, and the light one stays behind it
			assert.Equal(t, 2, s.Stats().Waiters)
			ahead.Release()
			rh := testkit.Recv(t, heavy, "the heavy head")
			require.NoError(t, rh.err)
			waitForWaiters(s, 1)
			rh.p.Release()
			rl := testkit.Recv(t, light, "the light waiter")
			require.NoError(t, rl.err)
			rl.p.Release()
		})
	}
}

// TestTurnRefusedWithoutItsOption: a Turn field the semaphore has no
// order for is refused, naming the option, and nothing is taken.
func TestTurnRefusedWithoutItsOption(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
		turn []semaphore.AcquireOption
		want string
	}{
		{"priority on FIFO", nil, []semaphore.AcquireOption{semaphore.Priority(1)}, "WithPriorities"},
		{"sequence on FIFO", nil, []semaphore.AcquireOption{semaphore.Sequence(1)}, "WithSequenceOrder"},
		{"group on FIFO", nil, []semaphore.AcquireOption{semaphore.Group("tenant")}, "fair share"},
		{"priority on sequence", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.AcquireOption{semaphore.Priority(-1)}, "WithPriorities"},
		{"sequence on priorities", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, []semaphore.AcquireOption{semaphore.Sequence(7)}, "WithSequenceOrder"},
		{"group on priorities", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, []semaphore.AcquireOption{semaphore.Group("g")}, "fair share"},
		{"priority above the bound", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority + 1)}, "1000000"},
		{"priority below the bound", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority - 1)}, "1000000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](c.opts...)
			defer s.Close()
			p, err := s.Acquire(bg, "k", c.turn...)
			require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.want)
			assert.False(t, p.Weight() != 0)
			st := s.Stats()
			assert.Equal(t, 0, st.Keys, "an entry was made")
			assert.Equal(t, int64(0), st.Held)
			assert.Equal(t, uint64(1), st.Rejected)

			ctx, cancel := context.WithCancel(bg)
			cancel()
			_, err = s.Acquire(ctx, "k", c.turn...)
			assert.ErrorIs(t, err, context.Canceled, "an ended context comes before the refusal")
		})
	}
	s := keyedsem.New[string](keyedsem.WithPriorities(time.Second))
	defer s.Close()
	for _, p := range []int{call.MaxPriority, -call.MaxPriority} {
		pm, err := s.Acquire(bg, "k", semaphore.Priority(p))
		require.NoError(t, err, "priority %d is within the bound", p)
		pm.Release()
	}
}

// TestOrderOptionsRefused: the reorder hold needs sequence order without
// priorities, and the aging step must be positive.
func TestOrderOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
		want string
	}{
		{"hold with priorities", []keyedsem.Option{keyedsem.WithPriorities(time.Second), keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Second)}, "WithReorderHold with WithPriorities"},
		{"zero step", []keyedsem.Option{keyedsem.WithPriorities(0)}, "WithPriorities(0s)"},
		{"negative step", []keyedsem.Option{keyedsem.WithPriorities(-time.Second)}, "WithPriorities(-1s)"},
	} {
		err := keyedsem.Validate(c.opts...)
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
		assert.Panics(t, func() { keyedsem.New[string](c.opts...) }, c.name)
	}
}

// TestLargestStepStillOrders: with the largest step and the priority
// bounds, places still order by priority (nothing overflows).
func TestLargestStepStillOrders(t *testing.T) {
	s, _ := newOrdered(t, keyedsem.WithPriorities(time.Duration(math.MaxInt64)))
	l := newLine(t, s, "k")
	l.queue("lowest", []semaphore.AcquireOption{semaphore.Priority(-call.MaxPriority)})
	l.queue("zero", []semaphore.AcquireOption{})
	l.queue("highest", []semaphore.AcquireOption{semaphore.Priority(call.MaxPriority)})
	assert.Equal(t, []string{"highest", "zero", "lowest"}, l.order())
}

// TestOrderedCancelRace: waiters of random places on one key, some
// cancelled at random while others are served: every waiter ends once,
// with a permit if and only if its error is nil, and the key's permits
// and counters add up after each round.
func TestOrderedCancelRace(t *testing.T) {
	rounds := 1000
	if raceEnabled {
		rounds = 300
	}
	for _, c := range []struct {
		name string
		opt  keyedsem.Option
		turn func(*rand.Rand) []semaphore.AcquireOption
	}{
		{"priorities", keyedsem.WithPriorities(time.Microsecond), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Priority(r.IntN(5) - 2)}
		}},
		{"sequence", keyedsem.WithSequenceOrder(), func(r *rand.Rand) []semaphore.AcquireOption {
			return []semaphore.AcquireOption{semaphore.Sequence(r.Int64N(6))}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := keyedsem.New[string](c.opt, keyedsem.WithPerKeyCapacity(2))
			defer s.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			for round := range rounds {
				const n = 8
				hold, err := s.Acquire(bg, "k", semaphore.Weight(2))
				require.NoError(t, err)
				var wg sync.WaitGroup
				cancels := make([]context.CancelFunc, n)
				for i := range n {
					ctx, cancel := context.WithCancel(bg)
					cancels[i] = cancel
					tn, w := c.turn(rng), int64(1+rng.IntN(2))
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, err := s.Acquire(ctx, "k", append(tn, semaphore.Weight(w))...)
						if (err == nil) != (p.Weight() != 0) || (err != nil && !errors.Is(err, context.Canceled)) {
							t.Errorf("round %d: AcquireTurn = %v (valid %v)", round, err, p.Weight() != 0)
						}
						if err == nil {
							p.Release()
						}
					}()
				}
				waitForWaiters(s, n)
				released := testkit.Go(hold.Release) // racing the cancellations
				testkit.CancelEvery(cancels, 1+rng.IntN(3))
				testkit.Recv(t, released, "the holder's release")
				testkit.WaitAll(t, &wg, "the waiters of a round")
				for _, cancel := range cancels {
					cancel()
				}
				st := s.Stats()
				if st.Waiters != 0 || st.Held != 0 || st.Acquired != st.Released {
					t.Fatalf("round %d: %+v", round, st)
				}
			}
			st := s.Stats()
			assert.Equal(t, uint64(rounds)*9, st.Acquired+st.Cancelled, "every call ended once: %+v", st)
		})
	}
}

// TestOptionsRefusalsAndCounts: a lane's weight (lanequeue's) is refused,
// not taken as 1; a TryAcquire refused for its options counts nowhere, as
// every TryAcquire's false; an ended context comes before a refusal.
func TestOptionsRefusalsAndCounts(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(4))
	defer s.Close()
	before := s.Stats()
	p, err := s.Acquire(bg, "k", lanequeue.LaneWeight("session", 3))
	require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
	require.False(t, p.Weight() != 0)
	if _, ok := s.TryAcquire("k", lanequeue.LaneWeight("session", 3)); ok {
		t.Fatal("TryAcquire took a lane's weight")
	}
	if _, ok := s.TryAcquire("k", semaphore.Priority(1)); ok {
		t.Fatal("TryAcquire took a priority on a FIFO keyed semaphore")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = s.Acquire(ctx, "k", semaphore.Priority(1))
	require.ErrorIs(t, err, context.Canceled)
	st := s.Stats()
	require.Equal(t, before.Rejected+1, st.Rejected, "only the Acquire's refusal counts as rejected")
	require.Equal(t, before.Cancelled+1, st.Cancelled)
	require.Zero(t, st.Held)
}

// Priorities and sequence order together, where they meet: message 5 has
// waited two steps when a message of priority 1 comes, which does not pass
// it (5 has aged past it); message 3, of 5's priority, comes last, and
// does not pass the priority-1 message (a lower priority never passes a
// higher one that has not aged), so it goes after 5. The bound is kept at
// the cost of number order, as the package doc says; without the message
// between them, 3 passes 5.
func TestPrioritiesAndSequenceKeepTheBoundOverNumberOrder(t *testing.T) {
	s, fake := newOrdered(t, keyedsem.WithPriorities(time.Second), keyedsem.WithSequenceOrder())
	l := newLine(t, s, "thread")
	l.queue("5", []semaphore.AcquireOption{semaphore.Sequence(5)})
	fake.Advance(2 * time.Second)
	l.queue("urgent", []semaphore.AcquireOption{semaphore.Priority(1), semaphore.Sequence(6)})
	l.queue("3", []semaphore.AcquireOption{semaphore.Sequence(3)})
	assert.Equal(t, []string{"5", "urgent", "3"}, l.order())

	s, fake = newOrdered(t, keyedsem.WithPriorities(time.Second), keyedsem.WithSequenceOrder())
	l = newLine(t, s, "thread")
	l.queue("5", []semaphore.AcquireOption{semaphore.Sequence(5)})
	fake.Advance(2 * time.Second)
	l.queue("3", []semaphore.AcquireOption{semaphore.Sequence(3)})
	l.queue("urgent", []semaphore.AcquireOption{semaphore.Priority(1), semaphore.Sequence(6)})
	assert.Equal(t, []string{"3", "5", "urgent"}, l.order())
}
