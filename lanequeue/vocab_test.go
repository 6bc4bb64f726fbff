package lanequeue_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// The tests of this file pin the vocabulary shared by the packages (see
// docs/glossary.md): one sentinel per concept, one counters type with one
// meaning per field, one way to refuse a bad setting.

// TestOneClosedSentinelAcrossLayers: whichever layer fails a call on a
// closed lane, errors.Is(err, semaphore.ErrClosed) holds. It failed while
// each package had its own ErrClosed.
func TestOneClosedSentinelAcrossLayers(t *testing.T) {
	ctx := context.Background()

	s := semaphore.New(1)
	s.Close()
	if _, err := s.Acquire(ctx, 1); !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("semaphore: %v; want semaphore.ErrClosed", err)
	}
	ks := keyedsem.New[string]()
	ks.Close()
	if _, err := ks.Acquire(ctx, "k"); !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("keyedsem: %v; want semaphore.ErrClosed", err)
	}

	// A lane closed on its own while the queue is open: the error names
	// the lane and matches the one sentinel.
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addGlobal(q, "g", 1))
	must(t, addKeyed(q, "k"))
	gs, err := lanequeue.GlobalSemaphore(q, "g")
	must(t, err)
	gs.Close()
	kss, err := lanequeue.KeyedSemaphore(q, "k")
	must(t, err)
	kss.Close()
	for _, name := range []string{"g", "k"} {
		_, err := acquireAll(q, ctx, "key", []string{name})
		if !errors.Is(err, semaphore.ErrClosed) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("lane %q closed on its own: %v; want semaphore.ErrClosed, naming the lane", name, err)
		}
	}
	if st := laneStats(t, q, "g"); !st.Closed {
		t.Errorf("lane g: Closed false after its semaphore was closed")
	}

	// The queue closed.
	q2 := lanequeue.New[string]()
	must(t, addKeyed(q2, "k"))
	ls, err := q2.Lanes("k")
	must(t, err)
	q2.Close()
	if _, err := q2.AcquireAll(ctx, "key", ls); !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("closed queue: %v; want semaphore.ErrClosed", err)
	}
}

// TestOneQueueFullSentinelAcrossLayers: a wait queue at its bound fails
// with semaphore.ErrQueueFull in every layer, also through a keyed lane of
// a queue. It failed while keyedsem had its own ErrQueueFull.
func TestOneQueueFullSentinelAcrossLayers(t *testing.T) {
	ctx := context.Background()
	// fill holds the one permit, puts one waiter in the queue, and then
	// checks that the next caller is refused with semaphore.ErrQueueFull.
	fill := func(t *testing.T, what string, acquire func(ctx context.Context) (func(), error), waiters func() int) {
		t.Helper()
		release, err := acquire(ctx)
		must(t, err)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			rel, err := acquire(wctx)
			if err == nil {
				rel()
			}
			done <- err
		}()
		waitFor(t, what+": the second caller to wait", func() bool { return waiters() == 1 })
		if _, err := acquire(ctx); !errors.Is(err, semaphore.ErrQueueFull) {
			t.Errorf("%s: third caller got %v; want semaphore.ErrQueueFull", what, err)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(failsafe):
			t.Fatalf("%s: the waiter did not return (failsafe %v)", what, failsafe)
		}
		release()
	}

	s := semaphore.New(1, semaphore.WithMaxWaiters(1))
	fill(t, "semaphore", func(ctx context.Context) (func(), error) {
		p, err := s.Acquire(ctx, 1)
		return func() { p.Release() }, err
	}, func() int { return s.Stats().Waiters })

	ks := keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1))
	defer ks.Close()
	fill(t, "keyedsem", func(ctx context.Context) (func(), error) {
		p, err := ks.Acquire(ctx, "k")
		return func() { p.Release() }, err
	}, func() int { return ks.Stats().Waiters })

	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addGlobal(q, "g", 1, semaphore.WithMaxWaiters(1)))
	must(t, addKeyed(q, "k", keyedsem.WithMaxWaitersPerKey(1)))
	for _, name := range []string{"g", "k"} {
		fill(t, "lanequeue lane "+name, func(ctx context.Context) (func(), error) {
			tk, err := acquireAll(q, ctx, "key", []string{name})
			return func() { tk.Release() }, err
		}, func() int { return laneStats(t, q, name).Waiters })
	}
}

// TestLaneStatsKeepTheSemaphoresCounters: a lane's LaneStats carry the
// counters of its semaphore with their meanings: a wait that WithMaxWait
// ended is TimedOut, not Cancelled, and a grant that waited counts in
// Waited. It failed while LaneStats folded TimedOut into Cancelled and had
// no Waited.
func TestLaneStatsKeepTheSemaphoresCounters(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(0, 0))
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addGlobal(q, "g", 1, semaphore.WithMaxWait(time.Second), semaphore.WithClock(clk)))
	must(t, addKeyed(q, "k"))
	ls := []string{"k", "g"}

	held, err := acquireAll(q, ctx, "a", ls)
	must(t, err)
	// A waiter whose maximum wait runs out.
	late := acquireAsync(ctx, q, "b", []string{"g"})
	waitFor(t, "a waiter on g", func() bool { return laneStats(t, q, "g").Waiters == 1 })
	clk.BlockUntilPending(1)
	clk.Advance(time.Second)
	if r := receive(t, late); !errors.Is(r.err, semaphore.ErrWaitTooLong) {
		t.Fatalf("waiter past WithMaxWait: %v; want ErrWaitTooLong", r.err)
	}
	// A waiter of another key on both lanes, which waits for g and is
	// served once the holder releases.
	served := acquireAsync(ctx, q, "b", ls)
	waitFor(t, "a waiter on g", func() bool { return laneStats(t, q, "g").Waiters == 1 })
	held.Release()
	r := receive(t, served)
	must(t, r.err)
	r.t.Release()

	g := laneStats(t, q, "g")
	if g.TimedOut != 1 || g.Cancelled != 0 || g.Waited != 1 || g.Acquired != 2 || g.Released != 2 {
		t.Errorf("lane g: TimedOut %d, Cancelled %d, Waited %d, Acquired %d, Released %d; want 1, 0, 1, 2, 2",
			g.TimedOut, g.Cancelled, g.Waited, g.Acquired, g.Released)
	}
	k := laneStats(t, q, "k")
	if k.Acquired != 2 || k.Released != 2 {
		t.Errorf("lane k: Acquired %d, Released %d; want 2, 2", k.Acquired, k.Released)
	}
	gs, err := lanequeue.GlobalSemaphore(q, "g")
	must(t, err)
	if got, want := g.Counters, gs.Stats().Counters; got != want {
		t.Errorf("lane g's counters %+v; want its semaphore's %+v", got, want)
	}
	kss, err := lanequeue.KeyedSemaphore(q, "k")
	must(t, err)
	if got, want := k.Counters, kss.Stats().Counters; got != want {
		t.Errorf("lane k's counters %+v; want its keyed semaphore's %+v", got, want)
	}
}

// TestRateLaneCounters: a rate lane counts a grant that waited for its
// tokens in Waited and a waiter that Close sent away in Failed (not in
// Rejected, which is for calls refused without waiting), and a
// TryAcquireAll that finds no tokens in no counter.
func TestRateLaneCounters(t *testing.T) {
	ctx := context.Background()
	q := lanequeue.New[string]()
	must(t, addRate(q, "fast", rate.Limit(1), 1))
	must(t, addRate(q, "slow", rate.Limit(1e-9), 1))
	clk := clock.NewFake(time.Now())
	lanequeue.SetRateClock(q, "fast", clk)

	fast, err := q.Lanes("fast")
	must(t, err)
	tk, ok := q.TryAcquireAll("a", fast)
	if !ok {
		t.Fatal("TryAcquireAll on a full bucket failed")
	}
	tk.Release()
	next := acquireAsync(ctx, q, "a", []string{"fast"}) // waits a second for its token
	waitFor(t, "a waiter on fast", func() bool { return laneStats(t, q, "fast").Waiters == 1 })
	clk.BlockUntilPending(1)
	clk.Advance(time.Second)
	r := receive(t, next)
	must(t, r.err)
	r.t.Release()
	if st := laneStats(t, q, "fast"); st.Acquired != 2 || st.Waited != 1 {
		t.Errorf("lane fast: Acquired %d, Waited %d; want 2 and 1", st.Acquired, st.Waited)
	}

	slow, err := q.Lanes("slow")
	must(t, err)
	tk, ok = q.TryAcquireAll("a", slow)
	if !ok {
		t.Fatal("TryAcquireAll on a full bucket failed")
	}
	tk.Release()
	if _, ok := q.TryAcquireAll("a", slow); ok {
		t.Fatal("TryAcquireAll on an empty bucket that never refills succeeded")
	}
	waiting := acquireAsync(ctx, q, "a", []string{"slow"})
	waitFor(t, "a waiter on slow", func() bool { return laneStats(t, q, "slow").Waiters == 1 })
	q.Close()
	if r := receive(t, waiting); !errors.Is(r.err, semaphore.ErrClosed) {
		t.Fatalf("waiter at Close: %v; want ErrClosed", r.err)
	}
	st := laneStats(t, q, "slow")
	if st.Failed != 1 || st.Rejected != 0 || st.Acquired != 1 || !st.Closed {
		t.Errorf("lane slow: Failed %d, Rejected %d, Acquired %d, Closed %v; want 1, 0, 1, true", st.Failed, st.Rejected, st.Acquired, st.Closed)
	}
}

// TestBadSettingsAreErrors: every Add method reports a setting out of
// range as an error matching ErrInvalidConfig, adds nothing, and never
// panics, also for an option of package keyedsem or semaphore, which
// lanequeue cannot look inside (it asks their Validate). AddKeyedLane
// panicked for a bad keyedsem option before.
func TestBadSettingsAreErrors(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	cases := map[string]func() error{
		"per-key capacity 0":     func() error { return addKeyed(q, "k", keyedsem.WithPerKeyCapacity(0)) },
		"negative idle timeout":  func() error { return addKeyed(q, "k", keyedsem.WithIdleTimeout(-1)) },
		"negative waiters/key":   func() error { return addKeyed(q, "k", keyedsem.WithMaxWaitersPerKey(-1)) },
		"capacity 0":             func() error { return addGlobal(q, "g", 0) },
		"negative max waiters":   func() error { return addGlobal(q, "g", 1, semaphore.WithMaxWaiters(-1)) },
		"negative max wait":      func() error { return addGlobal(q, "g", 1, semaphore.WithMaxWait(-time.Second)) },
		"negative waiting total": func() error { return addGlobal(q, "g", 1, semaphore.WithMaxWaitingWeight(-1)) },
		"rate 0":                 func() error { return addRate(q, "r", 0, 1) },
		"burst 0":                func() error { return addRate(q, "r", 1, 0) },
		"negative janitor":       func() error { return addKeyed(q, "k", keyedsem.WithJanitor(-1)) },
		"max keys 0":             func() error { return addKeyed(q, "k", keyedsem.WithMaxKeys(0)) },
		"per-key capacity above": func() error {
			return addKeyed(q, "k", keyedsem.WithPerKeyCapacity(1<<28 /* above the largest, 2^28-1 */))
		},
		"capacity above":    func() error { return addGlobal(q, "g", semaphore.MaxCapacity+1) },
		"negative capacity": func() error { return addGlobal(q, "g", -1) },
		"rate NaN":          func() error { return addRate(q, "r", rate.Limit(math.NaN()), 1) },
		"rate +Inf":         func() error { return addRate(q, "r", rate.Limit(math.Inf(1)), 1) },
		// A nil option (one chosen conditionally and left unset) is a
		// setting out of range too, not a nil dereference.
		"nil keyedsem option":  func() error { return addKeyed(q, "k", nil) },
		"nil semaphore option": func() error { return addGlobal(q, "g", 1, nil) },
	}
	for name, add := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("panicked with %v; want an error", v)
					}
				}()
				err = add()
			}()
			if !errors.Is(err, semaphore.ErrInvalidConfig) {
				t.Errorf("error %v; want one matching ErrInvalidConfig", err)
			}
		})
	}
	if names := lanequeue.Names(q); len(names) != 0 {
		t.Errorf("lanes %v added by refused calls; want none", names)
	}

	// The constructors without an error result panic with the same error
	// that their package's Validate returns.
	if err := semaphore.Validate(1, semaphore.WithMaxWaiters(2)); err != nil {
		t.Errorf("semaphore.Validate of good settings: %v", err)
	}
	if err := keyedsem.Validate(keyedsem.WithPerKeyCapacity(2)); err != nil {
		t.Errorf("keyedsem.Validate of good settings: %v", err)
	}
	panicsWith := func(what string, want error, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			v := recover()
			if err, ok := v.(error); !ok || !errors.Is(err, semaphore.ErrInvalidConfig) || !strings.Contains(err.Error(), want.Error()) {
				t.Errorf("%s panicked with %v; want Validate's error %v", what, v, want)
			}
		}()
		f()
	}
	panicsWith("semaphore.New", semaphore.Validate(1, semaphore.WithMaxWaiters(-1)), func() { semaphore.New(1, semaphore.WithMaxWaiters(-1)) })
	panicsWith("keyedsem.New", keyedsem.Validate(keyedsem.WithMaxKeys(0)), func() { keyedsem.New[string](keyedsem.WithMaxKeys(0)) })
	panicsWith("lanequeue.Default", keyedsem.Validate(keyedsem.WithMaxKeys(0)), func() { lanequeue.Default[string](16, keyedsem.WithMaxKeys(0)) })
	panicsWith("lanequeue.Default", semaphore.ErrInvalidConfig, func() { lanequeue.Default[string](0) })
}

// TestTooManyKeysThroughAKeyedLane: a keyed lane under WithHardMaxKeys
// refuses a new key with an error that matches keyedsem.ErrTooManyKeys,
// the same value as keyedsem's, wrapped with the lane's name.
func TestTooManyKeysThroughAKeyedLane(t *testing.T) {
	if keyedsem.ErrTooManyKeys != keyedsem.ErrTooManyKeys {
		t.Fatal("keyedsem.ErrTooManyKeys must be keyedsem.ErrTooManyKeys itself")
	}
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addKeyed(q, "k", keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys()))
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	tk, err := acquireAll(q, ctx, "a", []string{"k"})
	must(t, err)
	defer tk.Release()
	tb, err := acquireAll(q, ctx, "b", []string{"k"})
	if err == nil {
		tb.Release()
	}
	if !errors.Is(err, keyedsem.ErrTooManyKeys) || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("a second key under a hard cap of 1 got %v; want keyedsem.ErrTooManyKeys naming lane \"k\"", err)
	}
}
