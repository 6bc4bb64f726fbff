package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/lanequeue"
)

// TestDeadlockFreeOppositeOrders has two callers name the same lanes in
// opposite orders, thousands of times each. Taken in the order named, two
// global lanes of capacity 1 (or a session lane and a global lane of
// capacity 1, same key) deadlock quickly; the canonical order makes every
// call finish. The context deadline is only a failsafe: reaching it fails
// the test.
func TestDeadlockFreeOppositeOrders(t *testing.T) {
	const rounds = 3000
	for _, c := range []struct {
		name   string
		a, b   []string
		keyOf  func(g int) string
		global int64
	}{
		{"two global lanes", []string{"global", "other"}, []string{"other", "global"}, func(g int) string { return fmt.Sprint("key", g) }, 1},
		{"session and global, same key", []string{"session", "global"}, []string{"global", "session"}, func(int) string { return "same" }, 1},
		{"three lanes", []string{"session", "global", "other"}, []string{"other", "global", "session"}, func(int) string { return "same" }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := testQueue(t, c.global)
			must(t, addGlobal(q, "other", 1))
			ctx, cancel := context.WithTimeout(context.Background(), failsafe)
			defer cancel()
			var inGlobal atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for g, lanes := range [][]string{c.a, c.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						tk, err := acquireAll(q, ctx, c.keyOf(g), lanes)
						if err != nil {
							errs <- fmt.Errorf("caller %d: %w (deadlock?)", g, err)
							return
						}
						if n := inGlobal.Add(1); n > 1 {
							errs <- fmt.Errorf("%d holders of a capacity-1 lane", n)
						}
						inGlobal.Add(-1)
						tk.Release()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			assertNothingHeld(t, q)
		})
	}
}

// TestWaitingOnKeyHoldsNoGlobalPermit checks the first canonical-order
// claim: a caller blocked on its key holds no global permit, even when it
// names the global lane first.
func TestWaitingOnKeyHoldsNoGlobalPermit(t *testing.T) {
	q := testQueue(t, 4)
	first, err := acquireAll(q, context.Background(), "thread-1", []string{"session", "global"})
	must(t, err)
	ch := acquireAsync(context.Background(), q, "thread-1", []string{"global", "session"})
	waitFor(t, "second caller to wait on the session lane", func() bool { return laneStats(t, q, "session").Waiters == 1 })
	if held := laneStats(t, q, "global").Held; held != 1 {
		t.Fatalf("global lane holds %d while the second caller waits for its key; want 1 (the first caller's only)", held)
	}
	// Another thread is not held up by thread-1's queue.
	other, ok := tryAcquireAll(q, "thread-2", []string{"session", "global"})
	if !ok {
		t.Fatal("thread-2 could not acquire while thread-1 waits")
	}
	other.Release()
	first.Release()
	r := receive(t, ch)
	must(t, r.err)
	if held := laneStats(t, q, "global").Held; held != 1 {
		t.Fatalf("global lane holds %d with one ticket out; want 1", held)
	}
	r.t.Release()
	assertNothingHeld(t, q)
}

// TestFailedAcquireAllSpendsNoRateToken checks the second canonical-order
// claim: a rate token is spent only when every permit is held. The rate
// lane has burst 1 and does not refill, so a spent token would show.
func TestFailedAcquireAllSpendsNoRateToken(t *testing.T) {
	tokenLeft := func(t *testing.T, q *lanequeue.Queue[string], lane string) {
		t.Helper()
		tk, ok := tryAcquireAll(q, "probe", []string{lane})
		if !ok {
			t.Fatalf("rate lane %q: token spent by a failed AcquireAll", lane)
		}
		tk.Release()
		if _, ok := tryAcquireAll(q, "probe", []string{lane}); ok {
			t.Fatalf("rate lane %q granted a second token with burst 1", lane)
		}
	}
	t.Run("TryAcquireAll with the global lane full", func(t *testing.T) {
		q := testQueue(t, 1)
		holder, err := acquireAll(q, context.Background(), "a", []string{"global"})
		must(t, err)
		if _, ok := tryAcquireAll(q, "b", []string{"rate", "global"}); ok {
			t.Fatal("TryAcquireAll succeeded with the global lane full")
		}
		holder.Release()
		tokenLeft(t, q, "rate")
	})
	t.Run("context cancelled while waiting on the global lane", func(t *testing.T) {
		q := testQueue(t, 1)
		holder, err := acquireAll(q, context.Background(), "a", []string{"global"})
		must(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ch := acquireAsync(ctx, q, "b", []string{"rate", "session", "global"})
		waitFor(t, "caller to wait on the global lane", func() bool { return laneStats(t, q, "global").Waiters == 1 })
		cancel()
		if r := receive(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
		}
		holder.Release()
		assertNothingHeld(t, q)
		tokenLeft(t, q, "rate")
	})
	t.Run("context cancelled while waiting on another rate lane", func(t *testing.T) {
		q := testQueue(t, 1)
		must(t, addRate(q, "rate2", rate.Limit(1e-9), 1))
		spent, ok := tryAcquireAll(q, "a", []string{"rate2"})
		if !ok {
			t.Fatal("fresh rate lane refused a token")
		}
		spent.Release()
		ctx, cancel := context.WithCancel(context.Background())
		ch := acquireAsync(ctx, q, "b", []string{"rate", "rate2", "global"})
		waitFor(t, "caller to wait on rate2", func() bool { return laneStats(t, q, "rate2").Waiters == 1 })
		cancel()
		if r := receive(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("AcquireAll = %v; want context.Canceled", r.err)
		}
		assertNothingHeld(t, q)
		tokenLeft(t, q, "rate")
	})
	t.Run("deadline before the next token", func(t *testing.T) {
		q := testQueue(t, 1)
		spent, ok := tryAcquireAll(q, "a", []string{"rate"})
		if !ok {
			t.Fatal("fresh rate lane refused a token")
		}
		spent.Release()
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		defer cancel()
		r := receive(t, acquireAsync(ctx, q, "b", []string{"session", "global", "rate"}))
		if !errors.Is(r.err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("AcquireAll = %v (ctx %v); want an immediate error wrapping DeadlineExceeded", r.err, ctx.Err())
		}
		assertNothingHeld(t, q)
	})
}

// TestPerKeyExclusionStress runs many goroutines over a few keys through
// session + global and checks, inside every critical section, that its key
// has one holder and the global lane at most its capacity.
func TestPerKeyExclusionStress(t *testing.T) {
	const keys, goroutines, rounds, global = 4, 16, 200, 3
	q := testQueue(t, global)
	lanes, err := q.Lanes("global", "session") // one set, shared by all
	must(t, err)
	var perKey [keys]atomic.Int32
	var inGlobal atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % keys
			for range rounds {
				err := q.Do(context.Background(), fmt.Sprint("key-", k), lanes, func(context.Context) error {
					if n := perKey[k].Add(1); n != 1 {
						return fmt.Errorf("key %d has %d holders", k, n)
					}
					if n := inGlobal.Add(1); n > global {
						return fmt.Errorf("global lane has %d holders, capacity %d", n, global)
					}
					inGlobal.Add(-1)
					perKey[k].Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	assertNothingHeld(t, q)
}

// TestCanonicalOrderAcrossAdds: a ticket lists its lanes keyed, global,
// rate, by name within each kind, whatever the order named or added.
func TestCanonicalOrderAcrossAdds(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, addRate(q, "a-rate", rate.Inf, 1))
	must(t, addGlobal(q, "z-global", 2))
	must(t, addGlobal(q, "b-global", 2))
	must(t, addKeyed(q, "y-session"))
	must(t, addKeyed(q, "c-session"))
	want := []string{"c-session", "y-session", "b-global", "z-global", "a-rate"}
	if got := lanequeue.Names(q); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v; want %v", got, want)
	}
	tk, err := acquireAll(q, context.Background(), "k", []string{"a-rate", "z-global", "y-session", "b-global", "c-session"})
	must(t, err)
	defer tk.Release()
	if got := lanequeue.TicketLanes(tk); !slices.Equal(got, want) {
		t.Fatalf("Ticket.Lanes() = %v; want %v", got, want)
	}
}
