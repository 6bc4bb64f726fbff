package lanequeue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// tokenSlots is the token lane's window in seconds (lanequeue's window
// constant): 62 one-second slots.
const tokenSlots = 62

// TestTokenLaneMatchesModel runs grants, settles (debts and refunds,
// which the lane may leave for the next grant to fold in), cooldowns
// (which charge the lane up to its budget) and clock moves
// (within a second, across a few, past the window, and a year on) on a
// token lane and on model.Tokens, and checks after every step that the
// lane grants exactly what the model does.
func TestTokenLaneMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const budget = 100
		q := lanequeue.New[string]()
		defer q.Close()
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		q.SetClock(clk)
		ls, err := tokenLanes(q, budget)
		if err != nil {
			rt.Fatal(err)
		}
		m := model.NewTokens(budget, tokenSlots)
		type grant struct {
			tk       *lanequeue.Ticket[string]
			sec, has int64
		}
		var grants []grant
		rt.Repeat(map[string]func(*rapid.T){
			"take": func(rt *rapid.T) {
				n := rapid.Int64Range(1, budget).Draw(rt, "n")
				tk, ok := q.TryAcquireAll("k", ls, lanequeue.LaneWeight("tpm", n))
				if want := m.Take(n); ok != want {
					rt.Fatalf("take %d at second %d with %d used: lane %v, model %v", n, m.Now(), m.Used(), ok, want)
				}
				if ok {
					grants = append(grants, grant{tk, m.Now(), n})
				}
			},
			"settle": func(rt *rapid.T) {
				if len(grants) == 0 {
					rt.Skip("no grant")
				}
				i := rapid.IntRange(0, len(grants)-1).Draw(rt, "grant")
				actual := rapid.Int64Range(0, 2*budget).Draw(rt, "actual")
				g := &grants[i]
				if err := g.tk.Settle("tpm", actual); err != nil {
					rt.Fatal(err)
				}
				m.Settle(g.sec, actual-g.has)
				g.has = actual
			},
			"exhaust": func(rt *rapid.T) {
				if err := q.Cooldown(context.Background(), "tpm", time.Nanosecond); err != nil {
					rt.Fatal(err)
				}
				if err := q.Exhaust("tpm"); err != nil {
					rt.Fatal(err)
				}
				m.Fill()
			},
			"advance": func(rt *rapid.T) {
				d := rapid.SampledFrom([]int64{0, 1, 2, 5, tokenSlots - 1, tokenSlots, 300, 1 << 25}).Draw(rt, "seconds")
				clk.Advance(time.Duration(d) * time.Second)
				m.Advance(d)
			},
		})
		for _, g := range grants {
			g.tk.Release()
		}
	})
}

// TestTokenLaneConcurrentSettlesAddUp: settles made at once from many
// goroutines, some of them beside grants, lose nothing and count nothing
// twice: once every grant has settled to 0, the whole budget is free
// again, and no more.
func TestTokenLaneConcurrentSettlesAddUp(t *testing.T) {
	const budget, callers, rounds = 1_000_000, 8, 200
	q, ls := tokenOnlyQueue(t, budget)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				tk, err := q.AcquireAll(ctx, "k", ls, lanequeue.LaneWeight("tpm", 100))
				if err != nil {
					t.Errorf("caller %d round %d: 100 tokens with at most %d out: %v", c, r, callers*300, err)
					return
				}
				for _, actual := range []int64{300, 50, 170, 0} { // a debt, refunds, a debt, all back
					if err := tk.Settle("tpm", actual); err != nil {
						t.Error(err)
					}
				}
				tk.Release()
			}
		}()
	}
	wg.Wait()
	tk, err := q.AcquireAll(ctx, "all", ls, lanequeue.LaneWeight("tpm", budget))
	if err != nil {
		t.Fatalf("the whole budget after every grant settled to 0: %v", err)
	}
	defer tk.Release()
	if _, ok := q.TryAcquireAll("one", ls, lanequeue.LaneWeight("tpm", 1)); ok {
		t.Fatal("a token granted beyond the budget: a settle was counted twice or lost")
	}
}

// tokenLanes adds a token lane "tpm" of perMinute tokens to q and returns
// the set of it alone.
func tokenLanes(q *lanequeue.Queue[string], perMinute int64) (lanequeue.LaneSet[string], error) {
	if err := addToken(q, "tpm", perMinute); err != nil {
		return lanequeue.LaneSet[string]{}, err
	}
	return q.Lanes("tpm")
}

// TestTokenLaneSettlesBeyond32Bits: debts and refunds too large for the
// word a settle may leave for the next grant are charged in full all the
// same.
func TestTokenLaneSettlesBeyond32Bits(t *testing.T) {
	const budget = semaphore.MaxCapacity
	q, ls := tokenOnlyQueue(t, budget)
	tk, ok := q.TryAcquireAll("k", ls, lanequeue.LaneWeight("tpm", 1))
	if !ok {
		t.Fatal("1 token refused on an empty lane")
	}
	defer tk.Release()
	for _, c := range []struct {
		actual int64
		what   string
	}{{3 << 31, "a debt of 3·2³¹"}, {1 << 31, "a refund of 2³²"}, {1 << 40, "a debt of about 2⁴⁰"}} {
		must(t, tk.Settle("tpm", c.actual))
		free := budget - c.actual
		if _, ok := q.TryAcquireAll("over", ls, lanequeue.LaneWeight("tpm", free+1)); ok {
			t.Fatalf("after %s: %d tokens granted with %d used", c.what, free+1, c.actual)
		}
		probe, ok := q.TryAcquireAll("fits", ls, lanequeue.LaneWeight("tpm", free))
		if !ok {
			t.Fatalf("after %s: %d tokens refused with %d used", c.what, free, c.actual)
		}
		must(t, probe.Settle("tpm", 0))
		probe.Release()
	}
}

// TestTokenLanesChargeNoneWhileOneWaits: a call on two token lanes that
// must wait for one holds no charge on the other meanwhile; it charges
// both once the one it waited for has room. A provider that counts a call
// at its arrival would otherwise see the first lane's budget spent by
// calls still waiting for the second (fleetsim -provider measured waits
// of 0.7 s between a call's requests charge and its arrival).
func TestTokenLanesChargeNoneWhileOneWaits(t *testing.T) {
	q, clk, a, b := twoTokenLanes(t)
	full, ok := q.TryAcquireAll("x", b, lanequeue.LaneWeight("b", 100)) // b is spent for a minute
	if !ok {
		t.Fatal("a fresh lane refused its budget")
	}
	full.Release()
	res := acquireAsync(context.Background(), q, "k", []string{"a", "b"}, lanequeue.LaneWeight("a", 60), lanequeue.LaneWeight("b", 1))
	pending(t, clk, 1) // it waits for b
	probe, ok := q.TryAcquireAll("probe", a, lanequeue.LaneWeight("a", 41))
	if !ok {
		t.Fatal("a's budget was charged by a call still waiting for b: 41 of 100 refused")
	}
	probe.Release()
	clk.Advance(62 * time.Second) // b's charge and the probe's leave the window
	r := receive(t, res)
	must(t, r.err)
	defer r.t.Release()
	if _, ok := q.TryAcquireAll("over", a, lanequeue.LaneWeight("a", 41)); ok {
		t.Fatal("the call granted after its wait did not charge a's 60")
	}
}

// tokenOnlyQueue is a queue on a fake clock with a token lane "tpm" of
// perMinute tokens, and the set of that lane alone.
func tokenOnlyQueue(t *testing.T, perMinute int64) (*lanequeue.Queue[string], lanequeue.LaneSet[string]) {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	q.SetClock(clock.NewFake(time.Unix(1_000_000, 0)))
	ls, err := tokenLanes(q, perMinute)
	must(t, err)
	return q, ls
}

// twoTokenLanes is a queue on a fake clock with two token lanes, "a" and
// "b", of 100 tokens a minute each, and the set of each.
func twoTokenLanes(t *testing.T) (q *lanequeue.Queue[string], clk *clock.Fake, a, b lanequeue.LaneSet[string]) {
	t.Helper()
	q = lanequeue.New[string]()
	t.Cleanup(q.Close)
	clk = clock.NewFake(time.Unix(1_000_000, 0))
	q.SetClock(clk)
	must(t, addToken(q, "a", 100))
	must(t, addToken(q, "b", 100))
	var err error
	a, err = q.Lanes("a")
	must(t, err)
	b, err = q.Lanes("b")
	must(t, err)
	return q, clk, a, b
}

// TestTokenLanesGiveBackOnce: a call gives back its tries' charges once,
// to wait for the lane that refused it first; after that wait it keeps
// what it holds while it waits for the others, so that later callers
// cannot take its place in every line for good.
func TestTokenLanesGiveBackOnce(t *testing.T) {
	h := holdB(t, 1) // it gave a back, took b at 62 s and waits for a
	h.spend.Release()
	if probe, ok := h.q.TryAcquireAll("probe", h.b, lanequeue.LaneWeight("b", 100)); ok {
		probe.Release()
		t.Fatal("the call gave b back to wait for a: a second give-back can lose its place for good")
	}
	h.clk.Advance(10 * time.Second) // a's 100 leave the window
	r := receive(t, h.res)
	must(t, r.err)
	r.t.Release()
}
