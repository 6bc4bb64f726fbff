package lanequeue_test

// Regression tests for the findings of a new-user trial and a review: each
// failed (or hung, caught by returnsWithin) on the code before its fix.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// trialGuard bounds a call that must return at once: long enough for a
// loaded machine under -race, short of a hang.
const trialGuard = 10 * time.Second

// returnsWithin runs f on a goroutine and returns its error, failing the
// test if f has not returned within trialGuard (the goroutine is then left
// behind, and goleak reports it too).
func returnsWithin(t *testing.T, what string, f func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(trialGuard):
		t.Fatalf("%s has not returned after %v: it waits for ever", what, trialGuard)
		return nil
	}
}

// TestAddRateLaneRefusesALimitThatNeverRefills: a limit of 0 (for example
// rate.Limit(50/60), integer division), a negative one or NaN made a lane
// whose second call waited for ever.
func TestAddRateLaneRefusesALimitThatNeverRefills(t *testing.T) {
	for _, lim := range []rate.Limit{0, -1, rate.Limit(math.NaN()), rate.Limit(math.Inf(1)), rate.Limit(math.Inf(-1))} {
		q := lanequeue.New[string]()
		err := addRate(q, "r", lim, 1)
		if !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("AddRateLane(limit %v) = %v; want ErrInvalidConfig", lim, err)
		}
		if _, ok := lanequeue.LaneOf(q, "r"); ok {
			t.Errorf("AddRateLane(limit %v) registered the lane despite the error", lim)
		}
		q.Close()
	}
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addRate(q, "inf", rate.Inf, 1)) // rate.Inf: no limit
	must(t, addRate(q, "slow", 0.001, 1))
}

// TestRateLaneThatNeverRefillsFailsAtOnce: a lane over a limiter whose
// limit was set to 0 (or below) behind the lane's back (Add refuses such a
// limiter) has its burst and nothing more; once it is spent, a call fails
// at once with ErrTooHeavy instead of waiting for ever, and Check says so.
func TestRateLaneThatNeverRefillsFailsAtOnce(t *testing.T) {
	for _, lim := range []rate.Limit{0, -1} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			q := lanequeue.New[string]()
			defer q.Close()
			l := rate.NewLimiter(1, 2)
			must(t, q.Add("r", lanequeue.NewRateLane[string](l)))
			l.SetLimit(lim)
			r, err := q.Lanes("r")
			must(t, err)
			ctx := context.Background()
			tk, err := q.AcquireAll(ctx, "k", r)
			must(t, err)
			tk.Release()
			must(t, q.Check(r))
			if err := q.Check(r, semaphore.Weight(2)); !errors.Is(err, semaphore.ErrTooHeavy) {
				t.Errorf("Check of 2 tokens with 1 left and none to come = %v; want ErrTooHeavy", err)
			}
			tk, err = q.AcquireAll(ctx, "k", r)
			must(t, err)
			tk.Release()
			for _, c := range []struct {
				name string
				ctx  context.Context
			}{{"Background", ctx}, {"deadline", func() context.Context {
				c, cancel := context.WithTimeout(ctx, time.Hour)
				t.Cleanup(cancel)
				return c
			}()}} {
				err := returnsWithin(t, "AcquireAll on a spent rate lane of limit "+fmt.Sprint(lim), func() error {
					_, err := q.AcquireAll(c.ctx, "k", r)
					return err
				})
				if !errors.Is(err, semaphore.ErrTooHeavy) {
					t.Errorf("AcquireAll (%s) on a spent lane = %v; want ErrTooHeavy", c.name, err)
				}
			}
			if err := q.Check(r); !errors.Is(err, semaphore.ErrTooHeavy) {
				t.Errorf("Check on a spent lane = %v; want ErrTooHeavy", err)
			}
			if _, ok := q.TryAcquireAll("k", r); ok {
				t.Error("TryAcquireAll on a spent lane succeeded")
			}
		})
	}
}

// TestCapacityErrorsSayWhichBound: a capacity above semaphore.MaxCapacity
// was reported as "capacity must be at least 1". semaphore.New refuses a
// capacity out of its range; a global lane refuses 0 and a rate lane a
// burst of 0, each saying so.
func TestCapacityErrorsSayWhichBound(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	for _, c := range []struct {
		what string
		l    lanequeue.Lane[string]
	}{
		{"NewGlobalLane of capacity 0", lanequeue.NewGlobalLane[string](semaphore.New(0))},
		{"NewFairLane of capacity 0", lanequeue.NewFairLane[string](semaphore.New(0, semaphore.WithFairShare(nil)), nil)},
		{"NewRateLane of burst 0", lanequeue.NewRateLane[string](rate.NewLimiter(1, 0))},
	} {
		err := q.Add("bad", c.l)
		if !errors.Is(err, semaphore.ErrInvalidConfig) || !strings.Contains(err.Error(), "at least 1") || !strings.Contains(err.Error(), `"bad"`) {
			t.Errorf("Add(%s) = %v; want ErrInvalidConfig naming the lane, saying at least 1", c.what, err)
		}
	}
	for _, capacity := range []int64{-5, math.MaxInt64, semaphore.MaxCapacity + 1} {
		if err := semaphore.Validate(capacity); !errors.Is(err, semaphore.ErrInvalidConfig) || strings.Contains(err.Error(), "at least 1") {
			t.Errorf("semaphore.Validate(%d) = %v; want ErrInvalidConfig naming the range", capacity, err)
		}
	}
	must(t, addGlobal(q, "max", semaphore.MaxCapacity))
	if names := lanequeue.Names(q); len(names) != 1 {
		t.Fatalf("lanes %v after the refused Adds; want [max]", names)
	}
}

// TestZeroQueuePanicsWithAClearMessage: the zero Queue is not usable (see
// the package doc); its methods panicked with a bare nil dereference.
func TestZeroQueuePanicsWithAClearMessage(t *testing.T) {
	calls := map[string]func(q *lanequeue.Queue[string]){
		"Lanes":         func(q *lanequeue.Queue[string]) { _, _ = q.Lanes("global") },
		"AddGlobalLane": func(q *lanequeue.Queue[string]) { _ = addGlobal(q, "global", 1) },
		"AddKeyedLane":  func(q *lanequeue.Queue[string]) { _ = addKeyed(q, "s") },
		"AddRateLane":   func(q *lanequeue.Queue[string]) { _ = addRate(q, "r", 1, 1) },
		"Add":           func(q *lanequeue.Queue[string]) { _ = q.Add("g", lanequeue.NewGlobalLane[string](semaphore.New(1))) },
		"Lane":          func(q *lanequeue.Queue[string]) { lanequeue.LaneOf(q, "global") },
		"Names":         func(q *lanequeue.Queue[string]) { lanequeue.Names(q) },
		"Stats":         func(q *lanequeue.Queue[string]) { q.Stats() },
		"Close":         func(q *lanequeue.Queue[string]) { q.Close() },
		"GlobalSemaphore": func(q *lanequeue.Queue[string]) {
			_, _ = lanequeue.GlobalSemaphore(q, "global")
		},
		"KeyedSemaphore": func(q *lanequeue.Queue[string]) {
			_, _ = lanequeue.KeyedSemaphore(q, "session")
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var q lanequeue.Queue[string]
			defer func() {
				v := recover()
				if v == nil {
					t.Fatalf("%s on the zero Queue did not panic", name)
				}
				if s := fmt.Sprint(v); !strings.Contains(s, "use New or Default") {
					t.Fatalf("%s on the zero Queue panicked with %q; want a message that says to use New or Default", name, s)
				}
			}()
			call(&q)
		})
	}
}

// TestCheckSeesALaneClosedThroughItsSemaphore: Check returned nil for a set
// whose global or keyed lane had been closed through the semaphore that
// GlobalSemaphore or KeyedSemaphore handed out, while AcquireAll failed at
// once; and that error did not match semaphore.ErrClosed.
func TestCheckSeesALaneClosedThroughItsSemaphore(t *testing.T) {
	for _, c := range []struct {
		lane  string
		close func(*testing.T, *lanequeue.Queue[string])
		inner error
	}{
		{"global", func(t *testing.T, q *lanequeue.Queue[string]) {
			g, err := lanequeue.GlobalSemaphore(q, "global")
			must(t, err)
			g.Close()
		}, semaphore.ErrClosed},
		{"session", func(t *testing.T, q *lanequeue.Queue[string]) {
			s, err := lanequeue.KeyedSemaphore(q, "session")
			must(t, err)
			s.Close()
		}, semaphore.ErrClosed},
	} {
		t.Run(c.lane, func(t *testing.T) {
			q := lanequeue.Default[string](16)
			defer q.Close()
			ls, err := q.Lanes("session", "global")
			must(t, err)
			must(t, q.Check(ls))
			c.close(t, q)
			checkErr := q.Check(ls)
			_, acqErr := q.AcquireAll(context.Background(), "k", ls)
			if acqErr == nil {
				t.Fatal("AcquireAll on a closed lane succeeded")
			}
			for what, err := range map[string]error{"Check": checkErr, "AcquireAll": acqErr} {
				if !errors.Is(err, semaphore.ErrClosed) {
					t.Errorf("%s = %v; want it to match semaphore.ErrClosed", what, err)
				}
				if !errors.Is(err, c.inner) {
					t.Errorf("%s = %v; want it to match %v", what, err, c.inner)
				}
				if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("lane %q", c.lane)) {
					t.Errorf("%s = %q; want it to name the lane", what, err)
				}
			}
			if checkErr != nil && checkErr.Error() != acqErr.Error() {
				t.Errorf("Check = %q, AcquireAll = %q; want the same error", checkErr, acqErr)
			}
		})
	}
}

// TestCheckSeesAClosedRateLane: a rate lane closed on its own fails
// AcquireAll at once with ErrClosed; Check must say so too.
func TestCheckSeesAClosedRateLane(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addRate(q, "r", 10, 1))
	r, err := q.Lanes("r")
	must(t, err)
	l, _ := lanequeue.LaneOf(q, "r")
	l.Close()
	if _, err := q.AcquireAll(context.Background(), "k", r); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("AcquireAll on a closed rate lane = %v; want ErrClosed", err)
	}
	if err := q.Check(r); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Check on a closed rate lane = %v; want ErrClosed", err)
	}
}

type nanStruct struct {
	ID string
	F  float64
}

// TestNaNKeysAreRefusedAtTheDoor: a key not equal to itself was not refused
// on a queue of global lanes, and the re-entry check, which compares keys,
// never matched it: a nested Do waited for itself for ever.
func TestNaNKeysAreRefusedAtTheDoor(t *testing.T) {
	nan := math.NaN()
	t.Run("float64", func(t *testing.T) { testNaNKey(t, nan, 1.5) })
	t.Run("struct", func(t *testing.T) { testNaNKey(t, nanStruct{"a", nan}, nanStruct{"a", 1}) })
	t.Run("interface", func(t *testing.T) { testNaNKey[any](t, nan, "ok") })
	t.Run("array", func(t *testing.T) { testNaNKey(t, [2]complex128{0, complex(nan, 0)}, [2]complex128{}) })
}

func testNaNKey[K comparable](t *testing.T, nanKey, okKey K) {
	for _, lanes := range [][]string{{"global"}, {"session", "global"}} {
		// A global lane of capacity 1: a nested Do that passes the
		// re-entry check waits for itself.
		q := lanequeue.New[K]()
		must(t, addKeyed(q, "session"))
		must(t, addGlobal(q, "global", 1))
		ls, err := q.Lanes(lanes...)
		must(t, err)
		ctx := context.Background()
		err = returnsWithin(t, "a nested Do with a NaN key", func() error {
			return q.Do(ctx, nanKey, ls, func(ctx context.Context) error {
				return q.Do(ctx, nanKey, ls, func(context.Context) error { return nil })
			})
		})
		if !errors.Is(err, keyedsem.ErrNaNKey) {
			t.Errorf("%v: nested Do with a NaN key = %v; want ErrNaNKey", lanes, err)
		}
		if tk, err := q.AcquireAll(ctx, nanKey, ls); !errors.Is(err, keyedsem.ErrNaNKey) {
			tk.Release()
			t.Errorf("%v: AcquireAll with a NaN key = %v; want ErrNaNKey", lanes, err)
		}
		if tk, ok := q.TryAcquireAll(nanKey, ls); ok {
			tk.Release()
			t.Errorf("%v: TryAcquireAll with a NaN key succeeded", lanes)
		}
		// A key equal to itself still works, and re-entry is still caught.
		err = q.Do(ctx, okKey, ls, func(ctx context.Context) error {
			return q.Do(ctx, okKey, ls, func(context.Context) error { return nil })
		})
		if !errors.Is(err, lanequeue.ErrReentrant) {
			t.Errorf("%v: nested Do with key %v = %v; want ErrReentrant", lanes, okKey, err)
		}
		q.Close()
	}
}

// TestRepeatedWeightOptionsLastWins pins what the docs of WithWeight and
// WithLaneWeight say of an option given twice: the last counts, and a
// lane's own weight wins over WithWeight in either order.
func TestRepeatedWeightOptionsLastWins(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addGlobal(q, "a", 10))
	must(t, addGlobal(q, "b", 10))
	ls, err := q.Lanes("a", "b")
	must(t, err)
	for _, c := range []struct {
		opts []semaphore.AcquireOption
		a, b int64
	}{
		{[]semaphore.AcquireOption{semaphore.Weight(2), semaphore.Weight(3)}, 3, 3},
		{[]semaphore.AcquireOption{lanequeue.LaneWeight("a", 4), lanequeue.LaneWeight("a", 5)}, 5, 1},
		{[]semaphore.AcquireOption{lanequeue.LaneWeight("a", 4), semaphore.Weight(2)}, 4, 2},
		{[]semaphore.AcquireOption{semaphore.Weight(2), lanequeue.LaneWeight("b", 6)}, 2, 6},
	} {
		tk, err := q.AcquireAll(context.Background(), "k", ls, c.opts...)
		must(t, err)
		a, _ := lanequeue.TicketWeight(tk, "a")
		b, _ := lanequeue.TicketWeight(tk, "b")
		tk.Release()
		if a != c.a || b != c.b {
			t.Errorf("options %v: weights a=%d b=%d; want a=%d b=%d", c.opts, a, b, c.a, c.b)
		}
	}
}

// TestRefusedGlobalLaneReportsItsSemaphore: a global lane that Add refuses
// (a semaphore of capacity 0, which may grow later, or a fair lane's
// misuse) grants nothing, but its Stats are the semaphore's: open until the
// semaphore closes, which the lane's Close does, as a global lane's does. They were a closed lane with no figures, which made an
// exporter of a semaphore made at capacity 0 report it closed for good.
func TestRefusedGlobalLaneReportsItsSemaphore(t *testing.T) {
	for _, c := range []struct {
		what string
		s    *semaphore.Weighted
		lane func(s *semaphore.Weighted) lanequeue.Lane[string]
	}{
		{"NewGlobalLane of capacity 0", semaphore.New(0), lanequeue.NewGlobalLane[string]},
		{"NewFairLane of capacity 0", semaphore.New(0, semaphore.WithFairShare(nil)), func(s *semaphore.Weighted) lanequeue.Lane[string] {
			return lanequeue.NewFairLane(s, func(k string) string { return k })
		}},
		{"NewFairLane without WithFairShare", semaphore.New(2), func(s *semaphore.Weighted) lanequeue.Lane[string] {
			return lanequeue.NewFairLane(s, func(k string) string { return k })
		}},
	} {
		l := c.lane(c.s)
		q := lanequeue.New[string]()
		if err := q.Add("bad", l); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("%s: Add = %v; want ErrInvalidConfig", c.what, err)
		}
		q.Close()
		if _, err := l.Acquire(context.Background(), "k", 1); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Errorf("%s: Acquire = %v; want ErrInvalidConfig", c.what, err)
		}
		c.s.SetCapacity(3)
		p, ok := c.s.TryAcquire(1)
		if !ok {
			t.Fatalf("%s: TryAcquire(1) on the semaphore at capacity 3 failed", c.what)
		}
		if st := l.Stats(); st.Closed || st.Kind != lanequeue.Global || st.Capacity != 3 || st.Held != 1 || st.Acquired != 1 {
			t.Errorf("%s: Stats %+v; want the semaphore's: open, capacity 3, 1 held", c.what, st)
		}
		p.Release()
		l.Close() // the lane's Close closes its semaphore, refused or not
		if !c.s.Stats().Closed {
			t.Errorf("%s: the lane's Close left its semaphore open", c.what)
		}
		if st := l.Stats(); !st.Closed || st.Released != 1 {
			t.Errorf("%s: Stats after the lane's Close %+v; want closed, 1 released", c.what, st)
		}
	}
}
