package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// TestFairShareMatchesModel is TestSemaphoreMatchesModel with
// WithFairShare in every case (the shared driver has it in a third of
// them, and FuzzSemaphore too), against the model's FairShare order: the
// same grants to the same waiters after every step, the same failures,
// the same Stats, nothing served twice or lost.
func TestFairShareMatchesModel(t *testing.T) {
	rapid.Check(t, modelcheck.FairSemaphore)
}

// arrival is one caller of a fair-order scenario: AcquireTurn(1) in group.
type arrival struct{ group string }

func arrivals(group string, k int) []arrival {
	out := make([]arrival, k)
	for i := range out {
		out[i] = arrival{group}
	}
	return out
}

type fairGrant struct {
	i   int // index of the arrival
	p   semaphore.Permit
	err error
}

// fairOrder runs a scenario on a real semaphore: its whole capacity held,
// the arrivals queued one after another (each waits before the next
// starts, so arrival order is theirs), then the capacity given back, and
// after that each permit released in the order it was granted, until
// nobody waits. Each release is a step; it returns, step by step, the
// arrivals that the step let in (sorted: a step's grants are decided in
// one pass under the lock, and their wake-ups race each other).
func fairOrder(t *testing.T, capacity int64, weight func(string) int, as []arrival) [][]int {
	t.Helper()
	s := semaphore.New(capacity, semaphore.WithFairShare(weight))
	hold := take(t, s, capacity)
	done := make(chan fairGrant, len(as))
	for i, a := range as {
		want := s.Stats().Waiters + 1
		go func() {
			p, err := s.Acquire(context.Background(), 1, semaphore.Group(a.group))
			done <- fairGrant{i, p, err}
		}()
		testkit.Eventually(t, fmt.Sprintf("arrival %d (%q) to queue", i, a.group), func() bool {
			return s.Stats().Waiters == want
		})
	}
	var steps [][]int
	var held []semaphore.Permit
	release := func(p semaphore.Permit) {
		t.Helper()
		before := s.Stats().Waiters
		p.Release()
		k := before - s.Stats().Waiters // decided under the lock before Release returned
		var step []int
		for range k {
			g := testkit.Recv(t, done, "a grant")
			if g.err != nil {
				t.Fatalf("arrival %d (%q): %v", g.i, as[g.i].group, g.err)
			}
			step = append(step, g.i)
			held = append(held, g.p)
		}
		slices.Sort(step)
		steps = append(steps, step)
	}
	release(hold)
	for s.Stats().Waiters > 0 {
		if len(held) == 0 {
			t.Fatalf("%d waiters and nothing held", s.Stats().Waiters)
		}
		p := held[0]
		held = held[1:]
		release(p)
	}
	for _, p := range held {
		p.Release()
	}
	if st := s.Stats(); st.Waited != uint64(len(as)) || st.Held != 0 {
		t.Fatalf("after the scenario: %+v, want %d waited and nothing held", st, len(as))
	}
	return steps
}

// modelOrder is fairOrder on the model's FairShare order.
func modelOrder(capacity int64, weight func(string) int, as []arrival) [][]int {
	m := model.NewOrderedSemaphore(capacity, 0, 0, model.FairShare(weight))
	hold, _ := m.TryAcquire(capacity)
	index := make(map[int]int) // model id -> arrival
	for i, a := range as {
		id, queued, _ := m.AcquireTurn(1, model.Turn{Group: a.group})
		if !queued {
			panic("model: an arrival did not queue")
		}
		index[id] = i
	}
	var steps [][]int
	var held []int
	release := func(id int) {
		var step []int
		_, granted := m.Release(id)
		for _, g := range granted {
			step = append(step, index[g.ID])
			held = append(held, g.ID)
		}
		slices.Sort(step)
		steps = append(steps, step)
	}
	release(hold)
	for len(m.Queue()) > 0 {
		id := held[0]
		held = held[1:]
		release(id)
	}
	return steps
}

// groupsOf names the groups of steps, for failure messages.
func groupsOf(as []arrival, steps [][]int) string {
	var b strings.Builder
	for _, step := range steps {
		b.WriteByte('[')
		for _, i := range step {
			g := as[i].group
			if g == "" {
				g = `""`
			}
			b.WriteString(g)
		}
		b.WriteByte(']')
	}
	return b.String()
}

func requireSteps(t *testing.T, as []arrival, got, want [][]int, what string) {
	t.Helper()
	if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Fatalf("%s: order of service\n got %s\nwant %s", what, groupsOf(as, got), groupsOf(as, want))
	}
}

// A tenant with 500 callers waiting does not take every permit from a
// tenant with 5 that queue behind them. Capacity 10, equal weights: A's
// i-th caller starts at turn i, B's j-th at turn j, equal turns in
// arrival order (A's first). So the ten permits given back at once go to
// A0..A4 and B0..B4, and from then on A's callers one by one. Under FIFO
// B would wait for all 500.
func TestFairShareSmallTenantNotStarved(t *testing.T) {
	as := append(arrivals("A", 500), arrivals("B", 5)...)
	got := fairOrder(t, 10, nil, as)
	want := [][]int{{0, 1, 2, 3, 4, 500, 501, 502, 503, 504}}
	for i := 5; i < 500; i++ {
		want = append(want, []int{i})
	}
	requireSteps(t, as, got, want, "500 of A, then 5 of B, capacity 10")
	requireSteps(t, as, got, modelOrder(10, nil, as), "against the model")
}

// Weighted shares: A of weight 3 and B of weight 1, 40 callers each, A's
// queued first, capacity 1. A request of A lasts a third of a turn, so the
// order is A B, then A A A B over and over while both wait: in the first
// 40 grants A has 30 and B 10, and at every point while both wait
// |grants(A)/3 - grants(B)/1| <= 1/3 + 1 (one request of each).
func TestFairShareWeightsInProportion(t *testing.T) {
	weight := func(g string) int {
		if g == "A" {
			return 3
		}
		return 1
	}
	as := append(arrivals("A", 40), arrivals("B", 40)...)
	got := fairOrder(t, 1, weight, as)
	requireSteps(t, as, got, modelOrder(1, weight, as), "A weight 3, B weight 1, capacity 1")
	var nA, nB int
	for k, step := range got[:80] {
		if as[step[0]].group == "A" {
			nA++
		} else {
			nB++
		}
		if k == 39 && (nA != 30 || nB != 10) {
			t.Fatalf("first 40 grants: %d of A, %d of B; want 30 and 10 (%s)", nA, nB, groupsOf(as, got[:40]))
		}
		if nA < 40 && nB < 40 && abs(nA-3*nB) > 4 {
			t.Fatalf("after %d grants: %d of A, %d of B: out of the 3:1 proportion by more than one request each (%s)", k+1, nA, nB, groupsOf(as, got[:k+1]))
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Small scenarios with their order written out, at capacity 1: the empty
// group is a group like any other (Acquire's callers share with a named
// group), FIFO within a group, three groups taking turns, and a group
// that arrives late joining at the current turn, with no credit for the
// time it was away.
func TestFairShareOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups string // one letter per arrival; '_' is the group ""
		want   string // groups in order of service
	}{
		{"empty group shares", "___xxx", "_x_x_x"},
		{"fifo within a group", "aaaa", "aaaa"},
		{"three groups", "aaaabbc", "abcabaa"},
		{"late group", "aaaaaab", "abaaaaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var as []arrival
			for _, c := range tc.groups {
				g := string(c)
				if c == '_' {
					g = ""
				}
				as = append(as, arrival{g})
			}
			got := fairOrder(t, 1, nil, as)
			requireSteps(t, as, got, modelOrder(1, nil, as), "against the model")
			order := strings.ReplaceAll(strings.Trim(groupsOf(as, got), "[]"), "][", "")
			order = strings.ReplaceAll(order, `""`, "_")
			if order != tc.want {
				t.Fatalf("order %s, want %s", order, tc.want)
			}
			// FIFO within a group: each group's arrivals in arrival order.
			last := make(map[string]int)
			for _, step := range got {
				i := step[0]
				if j, ok := last[as[i].group]; ok && j > i {
					t.Fatalf("group %q: arrival %d served after %d", as[i].group, j, i)
				}
				last[as[i].group] = i
			}
		})
	}
}

// A Turn field the semaphore has no policy for is refused at once, before
// anything is taken, also when the permits are free; so is a weight out
// of range, from the call that would wait.
func TestFairShareRefusals(t *testing.T) {
	ctx := context.Background()
	fifo := semaphore.New(2)
	if p, err := fifo.Acquire(ctx, 1, semaphore.Group("a")); !errors.Is(err, semaphore.ErrInvalidConfig) || p.Weight() != 0 ||
		!strings.Contains(err.Error(), "WithFairShare") {
		t.Fatalf("Turn.Group on a FIFO semaphore: (%v, %v), want an error naming WithFairShare", p.Weight() != 0, err)
	}
	if st := fifo.Stats(); st.Held != 0 || st.Rejected != 1 {
		t.Fatalf("after the refusal: %+v, want nothing held and one rejected", st)
	}
	p, err := fifo.Acquire(ctx, 1) // the zero Turn is Acquire
	if err != nil {
		t.Fatal(err)
	}
	p.Release()

	s := semaphore.New(1, semaphore.WithFairShare(func(g string) int {
		if g == "big" {
			return 1001 // above the largest weight, 1000
		}
		return 1
	}))
	hold := take(t, s, 1)
	if p, err := s.Acquire(ctx, 1, semaphore.Group("big")); !errors.Is(err, semaphore.ErrInvalidConfig) || p.Weight() != 0 {
		t.Fatalf("a weight above 1000: (%v, %v), want ErrInvalidConfig", p.Weight() != 0, err)
	}
	if st := s.Stats(); st.Waiters != 0 || st.Rejected != 1 {
		t.Fatalf("after the refusal: %+v, want nobody waiting and one rejected", st)
	}
	hold.Release()
}

// A caller whose turn comes before a heavy head's joins the line ahead of
// it, and is served at once when its permits are free: nobody is left
// waiting at the head with its permits there. a's second request (3 of
// capacity 3, a turn after a's first) waits at the head with 1 permit
// free; b's first request starts at the current turn, before it.
func TestFairShareNewcomerAheadOfHeavyHead(t *testing.T) {
	ctx := context.Background()
	s := semaphore.New(3, semaphore.WithFairShare(nil))
	p1 := take(t, s, 1)
	p2 := take(t, s, 2)
	type res struct {
		p   semaphore.Permit
		err error
	}
	start := func(group string, n int64) <-chan res {
		want := s.Stats().Waiters + 1
		ch := make(chan res, 1)
		go func() {
			p, err := s.Acquire(ctx, n, semaphore.Group(group))
			ch <- res{p, err}
		}()
		testkit.Eventually(t, group+" to wait", func() bool { return s.Stats().Waiters == want })
		return ch
	}
	a1 := start("a", 1)
	a2 := start("a", 3)
	p2.Release() // a1 takes 1 of the 2; a2 (3) does not fit
	r1 := testkit.Recv(t, a1, "a's first request")
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	if st := s.Stats(); st.Available != 1 || st.Waiters != 1 {
		t.Fatalf("before b comes: %+v, want 1 available and a's heavy request waiting", st)
	}
	b := testkit.Go(func() res {
		p, err := s.Acquire(ctx, 1, semaphore.Group("b"))
		return res{p, err}
	})
	rb := testkit.Recv(t, b, "b's request, ahead of a's heavy one, with its permit free")
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if st := s.Stats(); st.Waiters != 1 || st.Waited != 2 {
		t.Fatalf("after b: %+v, want a's heavy request still waiting and 2 grants that waited", st)
	}
	p1.Release()
	r1.p.Release()
	rb.p.Release()
	r2 := testkit.Recv(t, a2, "a's heavy request")
	if r2.err != nil {
		t.Fatal(r2.err)
	}
	r2.p.Release()
}
