package lanequeue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

type laneGrant struct {
	key string
	t   *lanequeue.Ticket[string]
	err error
}

// waiting is the number of callers waiting on any lane of q.
func waiting(q *lanequeue.Queue[string]) int {
	n := 0
	for _, st := range q.Stats() {
		n += st.Waiters
	}
	return n
}

// startInOrder starts AcquireAll(key, lanes) for each key in turn, each
// waiting on some lane before the next starts, so that arrival order is
// the order of keys. Results arrive on the returned channel.
func startInOrder(t *testing.T, q *lanequeue.Queue[string], lanes []string, keys []string) <-chan laneGrant {
	t.Helper()
	done := make(chan laneGrant, len(keys))
	for _, key := range keys {
		want := waiting(q) + 1
		go func() {
			tk, err := acquireAll(q, context.Background(), key, lanes)
			done <- laneGrant{key, tk, err}
		}()
		testkit.Eventually(t, fmt.Sprintf("%s to wait", key), func() bool { return waiting(q) == want })
	}
	return done
}

// hotKeyShare runs one key with 20 messages and five keys with one each
// through lanes (which include "global", capacity 2, and perhaps a
// session lane), the hot key's messages first, while the global lane is
// held; then it lets them through, never holding more tickets than the
// global capacity, and reports how many of the hot key's messages were
// granted before the last of the others, and the most global permits the
// hot key held at once while another key was still waiting.
func hotKeyShare(t *testing.T, lanes []string) (hotBefore, hotMost int) {
	t.Helper()
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "session"))
	must(t, addGlobal(q, "global", 2))
	defer q.Close()
	var held []*lanequeue.Ticket[string]
	for _, k := range []string{"x", "y"} {
		tk, err := acquireAll(q, context.Background(), k, []string{"global"})
		must(t, err)
		held = append(held, tk)
	}
	var keys []string
	for range 20 {
		keys = append(keys, "hot")
	}
	others := []string{"c1", "c2", "c3", "c4", "c5"}
	done := startInOrder(t, q, lanes, append(keys, others...))
	othersLeft, hotHeld := len(others), 0
	for got := 0; got < len(keys)+len(others); {
		// Hold what the global lane has room for; once the others are
		// through, let the rest go at once (the hot key's next message
		// waits for its previous one's session permit).
		if len(held) == 2 || (othersLeft == 0 && len(held) > 0) {
			tk := held[0]
			held = held[1:]
			if lanequeue.TicketKey(tk) == "hot" {
				hotHeld--
			}
			tk.Release()
			continue
		}
		g := testkit.Recv(t, done, "the next grant")
		must(t, g.err)
		got++
		held = append(held, g.t)
		if g.key == "hot" {
			hotHeld++
			if othersLeft > 0 {
				hotBefore++
				hotMost = max(hotMost, hotHeld)
			}
		} else {
			othersLeft--
		}
	}
	for _, tk := range held {
		tk.Release()
	}
	assertNothingHeld(t, q)
	return hotBefore, hotMost
}

// Keys share a global lane fairly when the keyed lane is taken first: the
// hot key's 20 messages queue on the session lane, one at a time reaches
// the global lane, and the five other keys are all served after the hot
// key's first message alone. The same calls without the session lane show
// what the check catches: the hot key's messages take both global permits
// and all 20 go first.
func TestKeysShareGlobalLaneFairly(t *testing.T) {
	before, most := hotKeyShare(t, []string{"session", "global"})
	if before != 1 || most != 1 {
		t.Fatalf("session + global: the hot key got %d grants (at most %d at once) before the others were served; want 1 (1)", before, most)
	}
	before, most = hotKeyShare(t, []string{"global"})
	if before != 20 || most != 2 {
		t.Fatalf("global alone: the hot key got %d grants (at most %d at once) before the others; want 20 (2), which the check above refuses", before, most)
	}
}

// tenantOf is the tenant of a thread key "tenant/thread".
func tenantOf(key string) string {
	tenant, _, _ := strings.Cut(key, "/")
	return tenant
}

// A tenant with 500 threads waiting does not take every global permit
// from a tenant with 5 whose threads queue behind them: on a fair lane of
// capacity 10 the 5 are among the 10 grants that come first, with equal
// weights (A's threads 0-4, then B's, take turns). A FIFO global lane
// gives those 10 to A.
func TestFairLaneSmallTenantNotStarved(t *testing.T) {
	for _, fair := range []bool{true, false} {
		q := lanequeue.New[string]()
		must(t, addKeyed(q, "session"))
		if fair {
			must(t, addFair(q, "global", 10, tenantOf))
		} else {
			must(t, addGlobal(q, "global", 10))
		}
		all, err := acquireAll(q, context.Background(), "ops/hold", []string{"global"}, semaphore.Weight(10))
		must(t, err)
		var keys []string
		for i := range 500 {
			keys = append(keys, fmt.Sprintf("A/%d", i))
		}
		for i := range 5 {
			keys = append(keys, fmt.Sprintf("B/%d", i))
		}
		done := startInOrder(t, q, []string{"session", "global"}, keys)
		all.Release() // decides the next 10 grants before it returns
		var first []string
		var granted []*lanequeue.Ticket[string]
		b := 0
		for range 10 {
			g := testkit.Recv(t, done, "one of the first 10 grants")
			must(t, g.err)
			first = append(first, g.key)
			granted = append(granted, g.t)
			if tenantOf(g.key) == "B" {
				b++
			}
		}
		if fair && b != 5 {
			t.Errorf("fair lane: the first 10 grants %v hold %d of B's 5 threads", first, b)
		}
		if !fair && b != 0 {
			t.Errorf("FIFO lane: the first 10 grants %v hold %d of B's threads, want none", first, b)
		}
		q.Close() // fails the others; tickets out stay valid
		for range len(keys) - 10 {
			if g := testkit.Recv(t, done, "a waiter failed by Close"); !errors.Is(g.err, semaphore.ErrClosed) {
				t.Fatalf("%s: %v after Close", g.key, g.err)
			}
		}
		for _, tk := range granted {
			tk.Release()
		}
	}
}

// A fair lane in a queue takes the call's semaphore.Group when it gives
// one, the key's tenant otherwise; its own Acquire, the key's tenant.
func TestFairLaneGroupOfACall(t *testing.T) {
	s := semaphore.New(1, semaphore.WithFairShare(nil))
	lane := lanequeue.NewFairLane[string](s, tenantOf)
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("fair", lane))
	ctx := context.Background()
	hold, err := lane.Acquire(ctx, "a/0", 1)
	must(t, err)
	type result struct {
		name    string
		err     error
		release func()
	}
	done := make(chan result, 3)
	start := func(name string, f func() (func(), error)) {
		want := s.Stats().Waiters + 1
		go func() {
			release, err := f()
			done <- result{name, err, release}
		}()
		testkit.Eventually(t, name+" to wait", func() bool { return s.Stats().Waiters == want })
	}
	viaQueue := func(key string, opts ...semaphore.AcquireOption) func() (func(), error) {
		return func() (func(), error) {
			tk, err := acquireAll(q, ctx, key, []string{"fair"}, opts...)
			if err != nil {
				return nil, err
			}
			return func() { tk.Release() }, nil
		}
	}
	// a/1 and a/2 are tenant a; a/3 asks for group b, so it takes b's
	// first turn, beside a/1's, and goes before a/2.
	start("a/1", func() (func(), error) {
		p, err := lane.Acquire(ctx, "a/1", 1)
		return func() { p.Release() }, err
	})
	start("a/2", viaQueue("a/2"))
	start("a/3 as b", viaQueue("a/3", semaphore.Group("b")))
	var order []string
	release := func() { hold.Release() }
	for range 3 {
		release()
		r := testkit.Recv(t, done, "the next grant")
		must(t, r.err)
		order = append(order, r.name)
		release = r.release
	}
	release()
	if got := strings.Join(order, ", "); got != "a/1, a/3 as b, a/2" {
		t.Fatalf("order %s, want a/1, a/3 as b, a/2", got)
	}
}

// AddFairLane checks its settings as AddGlobalLane does, and its lane's
// semaphore is reachable through GlobalSemaphore; the same semaphore
// cannot be registered twice.
func TestAddFairLaneSettings(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	if err := addFair(q, "g", 0, tenantOf); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("capacity 0: %v", err)
	}
	if err := addFair(q, "g", 1, tenantOf, nil); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("a nil option: %v", err)
	}
	must(t, addFair(q, "g", 3, tenantOf, semaphore.WithFairShare(func(string) int { return 2 })))
	s, err := lanequeue.GlobalSemaphore(q, "g")
	must(t, err)
	if s.Capacity() != 3 {
		t.Fatalf("GlobalSemaphore(g).Capacity() = %d, want 3", s.Capacity())
	}
	if err := q.Add("again", lanequeue.NewFairLane[string](s, nil)); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("the same semaphore under a second name: %v", err)
	}
	if err := q.Add("plain", lanequeue.NewGlobalLane[string](s)); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("the same semaphore as a plain global lane: %v", err)
	}
}

// A call's priority or sequence is for the lanes that order by them: on a
// set with a fair lane it is ignored there (fair share orders by group
// alone), not refused, and the fair lane counts no refusal.
func TestFairLaneIgnoresOtherTurnFields(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	if err := addKeyed(q, "session"); err != nil {
		t.Fatal(err)
	}
	if err := addFair(q, "global", 1, func(k string) string { return k[:1] }); err != nil {
		t.Fatal(err)
	}
	set, err := q.Lanes("session", "global")
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []semaphore.AcquireOption{semaphore.Priority(2), semaphore.Sequence(7)} {
		tk, err := q.AcquireAll(context.Background(), "a1", set, opt)
		if err != nil {
			t.Fatalf("AcquireAll with %v on a fair lane: %v, want the ticket", opt, err)
		}
		tk.Release()
	}
	for _, st := range q.Stats() {
		if st.Name == "global" && st.Rejected != 0 {
			t.Fatalf("the fair lane counted %d refusals, want 0", st.Rejected)
		}
	}
}
