package waitq_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pile is an owner of plain permits under a mutex: the least an owner does.
type pile struct {
	mu       sync.Mutex
	q        waitq.Queue
	c        waitq.Cache
	avail    int64
	waiters  int
	emptied  int
	claimed  int
	unclaims int
	counts   [3]int
}

func (p *pile) Lock()   { p.mu.Lock() }
func (p *pile) Unlock() { p.mu.Unlock() }
func (p *pile) Claim(n int64) (*permit.Token, bool) {
	if p.avail < n {
		return nil, false
	}
	p.avail -= n
	p.claimed++
	return permit.NewToken(p, -1), true
}
func (p *pile) Unclaim(_ *permit.Token, w *waitq.Waiter) { p.avail += w.N; p.claimed--; p.unclaims++ }
func (p *pile) Dequeued(*waitq.Waiter)                   { p.waiters-- }
func (p *pile) Emptied()                                 { p.emptied++ }
func (p *pile) Count(e waitq.Ending)                     { p.counts[e]++ }
func (p *pile) Serve() (c waitq.Chain)                   { waitq.Grant(&p.q, p, &c); return c }

func (p *pile) ReleaseToken(_ *permit.Token, n int64) { p.give(n) }
func (p *pile) CountDoubleRelease(*permit.Token)      {}

// give returns n permits and serves the waiters, as a release does.
func (p *pile) give(n int64) {
	var c waitq.Chain
	p.mu.Lock()
	p.avail += n
	waitq.Grant(&p.q, p, &c)
	p.mu.Unlock()
	c.Wake()
}

// push queues a waiter of n permits, as an owner's acquire does.
func (p *pile) push(n int64) *waitq.Waiter {
	w := p.c.Get()
	w.N = n
	p.mu.Lock()
	p.q.Push(w)
	p.waiters++
	p.mu.Unlock()
	return w
}

type result struct {
	p   permit.Permit
	err error
}

// wait runs Wait for w on a goroutine and returns where its result comes.
func (p *pile) wait(ctx context.Context, w *waitq.Waiter, mw *waitq.MaxWait) <-chan result {
	ch := make(chan result, 1)
	go func() {
		pm, err := waitq.Wait(ctx, &p.q, p, &p.c, w, mw)
		ch <- result{pm, err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter did not return within 10s")
		return result{}
	}
}

// Waiters are served in the order they joined, while they fit; a head that
// does not fit is not overtaken by a lighter waiter behind it.
func TestGrantServesTheHeadWhileItFits(t *testing.T) {
	p := &pile{}
	a, b, c := p.push(2), p.push(3), p.push(1)
	ra := p.wait(context.Background(), a, nil)
	rb := p.wait(context.Background(), b, nil)
	rc := p.wait(context.Background(), c, nil)
	p.give(2)
	if r := recv(t, ra); r.err != nil || r.p.Weight() != 2 {
		t.Fatalf("head: %v, weight %d", r.err, r.p.Weight())
	}
	p.give(1) // b needs 3: c, which fits, waits behind it
	p.mu.Lock()
	if p.waiters != 2 || p.avail != 1 {
		t.Fatalf("%d waiters, %d available; want 2, 1", p.waiters, p.avail)
	}
	p.mu.Unlock()
	p.give(3)
	rbv, rcv := recv(t, rb), recv(t, rc)
	if rbv.err != nil || rcv.err != nil {
		t.Fatalf("b: %v, c: %v", rbv.err, rcv.err)
	}
	if p.waiters != 0 || p.emptied == 0 || p.avail != 0 {
		t.Fatalf("after all served: %d waiters, emptied %d, avail %d", p.waiters, p.emptied, p.avail)
	}
}

// A head that leaves lets the next waiter be served if it fits.
func TestLeavingHeadServesTheNext(t *testing.T) {
	p := &pile{avail: 1}
	a, b := p.push(2), p.push(1)
	ctx, cancel := context.WithCancel(context.Background())
	ra := p.wait(ctx, a, nil)
	rb := p.wait(context.Background(), b, nil)
	cancel()
	if r := recv(t, ra); !errors.Is(r.err, context.Canceled) || r.p.Weight() != 0 {
		t.Fatalf("cancelled head: %v, valid permit %v", r.err, r.p.Weight() != 0)
	}
	if r := recv(t, rb); r.err != nil {
		t.Fatalf("the waiter behind the head that left: %v", r.err)
	}
	if p.counts[waitq.Cancelled] != 1 {
		t.Fatalf("Cancelled counted %d times, want 1", p.counts[waitq.Cancelled])
	}
}

// A grant that finds the context already ended when the waiter wakes is
// given back, and goes to the waiter behind; it is counted only as a
// cancellation.
func TestLateGrantIsGivenBack(t *testing.T) {
	p := &pile{}
	a, b := p.push(1), p.push(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // ended before the grant: it must win
	var c waitq.Chain
	p.mu.Lock()
	p.avail = 1
	waitq.Grant(&p.q, p, &c) // a is granted
	p.mu.Unlock()
	c.Wake()
	rb := p.wait(context.Background(), b, nil)
	pm, err := waitq.Wait(ctx, &p.q, p, &p.c, a, nil)
	if !errors.Is(err, context.Canceled) || pm.Weight() != 0 {
		t.Fatalf("a grant after the end: %v, valid %v; want Canceled and no permit", err, pm.Weight() != 0)
	}
	if r := recv(t, rb); r.err != nil {
		t.Fatalf("the grant given back did not reach the next waiter: %v", r.err)
	}
	if p.unclaims != 1 || p.counts[waitq.Cancelled] != 1 || p.claimed != 1 {
		t.Fatalf("unclaims %d, cancelled %d, claims standing %d; want 1, 1, 1", p.unclaims, p.counts[waitq.Cancelled], p.claimed)
	}
}

// The maximum wait ends a wait with its own error, counted as TimedOut.
func TestMaxWaitEndsTheWait(t *testing.T) {
	p := &pile{}
	clk := clock.NewFake(time.Unix(0, 0))
	tooLong := errors.New("too long")
	r := p.wait(context.Background(), p.push(1), &waitq.MaxWait{D: time.Second, Clock: clk, Err: tooLong})
	clk.BlockUntilPending(1)
	clk.Advance(time.Second)
	if got := recv(t, r); got.err != tooLong {
		t.Fatalf("err %v, want %v", got.err, tooLong)
	}
	if p.counts[waitq.TimedOut] != 1 || p.waiters != 0 {
		t.Fatalf("timed out %d, waiters %d; want 1, 0", p.counts[waitq.TimedOut], p.waiters)
	}
}

// Fail fails the waiters above the bound and keeps the others in order;
// a failure wins over a context that ended after it.
func TestFailAbove(t *testing.T) {
	p := &pile{}
	ws := []*waitq.Waiter{p.push(3), p.push(1), p.push(5), p.push(2)}
	closed := errors.New("closed")
	var c waitq.Chain
	p.mu.Lock()
	waitq.Fail(&p.q, p, 2, closed, &c)
	p.mu.Unlock()
	c.Wake()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, i := range []int{0, 2} {
		if _, err := waitq.Wait(ctx, &p.q, p, &p.c, ws[i], nil); err != closed {
			t.Fatalf("waiter %d: %v, want the failure", i, err)
		}
	}
	if p.counts[waitq.Failed] != 2 || p.waiters != 2 || p.q.Len() != 2 {
		t.Fatalf("failed %d, waiters %d, len %d; want 2, 2, 2", p.counts[waitq.Failed], p.waiters, p.q.Len())
	}
	r1 := p.wait(context.Background(), ws[1], nil)
	r3 := p.wait(context.Background(), ws[3], nil)
	p.give(3)
	if a, b := recv(t, r1), recv(t, r3); a.err != nil || b.err != nil {
		t.Fatalf("kept waiters: %v, %v", a.err, b.err)
	}
	p.mu.Lock()
	waitq.Fail(&p.q, p, 0, closed, &c) // an empty queue: nothing to fail
	p.mu.Unlock()
	c.Wake()
}

// A chain wakes its waiters once each, and a waiter back in the cache has
// no outcome and no wake-up left.
func TestChainWakesOnceAndCacheClears(t *testing.T) {
	p := &pile{avail: 3}
	ws := []*waitq.Waiter{p.push(1), p.push(1), p.push(1)}
	var c waitq.Chain
	p.mu.Lock()
	waitq.Grant(&p.q, p, &c)
	p.mu.Unlock()
	c.Wake()
	for i, w := range ws {
		pm, err := waitq.Wait(context.Background(), &p.q, p, &p.c, w, nil)
		if err != nil || !pm.Release() {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	w := p.c.Get()
	p.c.Put(w)
	if p.c.Get() != w {
		t.Fatal("the cache did not hand back the waiter in its slot")
	}
	if w.N != 0 {
		t.Fatal("a reused waiter kept its weight")
	}
}

// Under races of grants and cancellations, each waiter ends with exactly
// one of a permit and an error, no permit is lost, and no waiter in the cache
// holds a wake-up (a stale one would end a later wait at once).
func TestRaceGrantAndCancel(t *testing.T) {
	p := &pile{}
	for round := 0; round < 1000; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		a, b := p.push(1), p.push(1)
		ra := p.wait(ctx, a, nil)
		rb := p.wait(context.Background(), b, nil)
		go cancel()
		p.give(1)
		if x := recv(t, ra); x.err == nil {
			x.p.Release() // a got the permit: b gets it next
		} else if x.p.Weight() != 0 {
			t.Fatalf("round %d: an error with a permit", round)
		}
		y := recv(t, rb)
		if y.err != nil {
			t.Fatalf("round %d: the second waiter failed: %v", round, y.err)
		}
		y.p.Release()
		p.mu.Lock()
		if p.avail != 1 || p.waiters != 0 {
			t.Fatalf("round %d: avail %d, waiters %d; want 1, 0", round, p.avail, p.waiters)
		}
		p.avail = 0
		p.mu.Unlock()
	}
}

// Whichever waiter leaves (the head, one in the middle, the newest), the
// others keep their order, and waiters who join after are served behind
// them: the links and the newest stay right.
func TestLeavingAnyPlaceKeepsTheOrder(t *testing.T) {
	for leaving := 0; leaving < 4; leaving++ {
		p := &pile{}
		ws := make([]*waitq.Waiter, 4)
		for i := range ws {
			ws[i] = p.push(int64(i + 1)) // weights tell the waiters apart
		}
		ctx, cancel := context.WithCancel(context.Background())
		rs := make([]<-chan result, len(ws))
		for i, w := range ws {
			c := context.Background()
			if i == leaving {
				c = ctx
			}
			rs[i] = p.wait(c, w, nil)
		}
		cancel()
		if r := recv(t, rs[leaving]); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("leaving %d: %v, want context.Canceled", leaving, r.err)
		}
		late := p.push(10)
		rl := p.wait(context.Background(), late, nil)
		if got := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.q.Len() }(); got != 4 {
			t.Fatalf("leaving %d: Len %d after one left and one joined, want 4", leaving, got)
		}
		order := append(append([]<-chan result{}, rs[:leaving]...), rs[leaving+1:]...)
		order = append(order, rl)
		for i, ch := range order {
			// Exactly the next one's weight is free: only the one that is
			// next in line can take it.
			var n int64
			switch {
			case ch == rl:
				n = 10
			case i < leaving:
				n = int64(i + 1)
			default:
				n = int64(i + 2)
			}
			p.give(n)
			r := recv(t, ch)
			if r.err != nil || r.p.Weight() != n {
				t.Fatalf("leaving %d: grant %d: %v, %d permits, want %d", leaving, i, r.err, r.p.Weight(), n)
			}
			r.p.Release()
			p.mu.Lock()
			p.avail = 0 // the release gave them back; start each grant from none
			p.mu.Unlock()
		}
	}
}

// PushOrdered orders by Place: with one band, ascending rank with equal
// ranks in arrival order, wherever the rank lands (the new head, the
// middle, the newest); Grant then serves in that order.
func TestPushOrderedOrdersByRankThenArrival(t *testing.T) {
	ranks := []int64{5, 3, 9, 3, 7, 1, 9, 5, 0, 8}
	p := &pile{}
	type queued struct {
		rank int64
		idx  int
		r    <-chan result
	}
	var all []queued
	for i, k := range ranks {
		w := p.c.Get()
		w.N = int64(i + 1) // weights tell the waiters apart
		w.Rank = k
		p.mu.Lock()
		p.q.PushOrdered(w, 0)
		p.waiters++
		p.mu.Unlock()
		all = append(all, queued{k, i, p.wait(context.Background(), w, nil)})
	}
	want := append([]queued(nil), all...)
	sort.SliceStable(want, func(i, j int) bool { return want[i].rank < want[j].rank })
	for i, q := range want {
		n := int64(q.idx + 1)
		p.give(n)
		r := recv(t, q.r)
		if r.err != nil || r.p.Weight() != n {
			t.Fatalf("grant %d: %v, %d permits, want waiter %d (rank %d, %d permits)", i, r.err, r.p.Weight(), q.idx, q.rank, n)
		}
		// Not released: a release would serve the next waiter if it fit,
		// and each grant here must come from give alone.
	}
}

// queueOrder returns the places of q's waiters, head first.
func queueOrder(q *waitq.Queue) []waitq.Place {
	var out []waitq.Place
	for w := q.Head(); w != nil; w = w.Next() {
		out = append(out, w.Place)
	}
	return out
}

// PushOrdered composes bands with aging and ranks within a band: with
// ranks all 0 it is the order of the keys arrival - band*step (priorities
// with aging, the order semaphore.WithPriorities promised before bands
// and ranks composed); and whatever the places, a waiter is never passed
// by a later one that does not go ahead of it (Ahead), which is what
// bounds its wait.
func TestPushOrderedComposesBandsAndRanks(t *testing.T) {
	const step = 10
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		withRanks := round%2 == 1
		var q waitq.Queue
		var c waitq.Cache
		var pushed []waitq.Place
		now := int64(0)
		for range 1 + rng.IntN(12) {
			now += rng.Int64N(3 * step)
			pl := waitq.Place{Band: int32(rng.IntN(4) - 1), Arrival: now}
			if withRanks {
				pl.Rank = rng.Int64N(5)
			}
			w := c.Get()
			w.N, w.Place = 1, pl
			q.PushOrdered(w, step)
			pushed = append(pushed, pl)
		}
		got := queueOrder(&q)
		if len(got) != len(pushed) {
			t.Fatalf("round %d: %d waiters queued, want %d", round, len(got), len(pushed))
		}
		if !withRanks {
			want := append([]waitq.Place(nil), pushed...)
			sort.SliceStable(want, func(i, j int) bool {
				return want[i].Arrival-int64(want[i].Band)*step < want[j].Arrival-int64(want[j].Band)*step
			})
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: order %v, want the aged keys' %v (pushed %v)", round, got, want, pushed)
			}
		}
		// Arrivals are distinct or equal-in-order, so a place's arrival
		// and rank identify its push; check every pair that was swapped.
		pos := func(pl waitq.Place) int { return slices.Index(got, pl) }
		for i := range pushed {
			for j := i + 1; j < len(pushed); j++ {
				x, y := pushed[i], pushed[j]
				if pos(y) < pos(x) {
					wx := &waitq.Waiter{Place: x}
					if !waitq.Ahead(&y, wx, step) {
						t.Fatalf("round %d: %+v passed %+v, which it does not go ahead of (order %v)", round, y, x, got)
					}
				}
			}
		}
	}
}

// aheadByDivision is Ahead as it was written first, with the aging
// computed by a division: the reference of TestAheadMatchesDivision and
// the baseline of BenchmarkAblationAhead.
func aheadByDivision(p *waitq.Place, w *waitq.Place, step int64) bool {
	if p.Band == w.Band {
		return p.Rank < w.Rank
	}
	d := int64(p.Band) - int64(w.Band)
	if d <= 0 {
		return false
	}
	if step <= 0 {
		return true
	}
	return d > max(p.Arrival-w.Arrival, 0)/step
}

// Ahead compares the band difference with the time waited by a
// multiplication, which must decide as the division does, at the edges
// of every range too.
func TestAheadMatchesDivision(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	bands := []int32{-1_000_000, -3, -1, 0, 1, 2, 3, 1_000_000}
	steps := []int64{1, 2, 3, 7, 1000, 1_000_000, 1 << 40, math.MaxInt64}
	arrivals := []int64{0, 1, 999, 1000, 1001, 1 << 40, math.MaxInt64 / 2, math.MaxInt64}
	check := func(p, x waitq.Place, step int64) {
		w := &waitq.Waiter{Place: x}
		if got, want := waitq.Ahead(&p, w, step), aheadByDivision(&p, &x, step); got != want {
			t.Fatalf("Ahead(%+v, %+v, %d) = %v, the division says %v", p, x, step, got, want)
		}
	}
	for _, pb := range bands {
		for _, wb := range bands {
			for _, step := range steps {
				for _, pa := range arrivals {
					for _, wa := range arrivals {
						check(waitq.Place{Band: pb, Arrival: pa}, waitq.Place{Band: wb, Arrival: wa}, step)
					}
				}
			}
		}
	}
	for range 200_000 {
		step := 1 + rng.Int64N(50)
		p := waitq.Place{Band: int32(rng.IntN(9) - 4), Arrival: rng.Int64N(500), Rank: rng.Int64N(3)}
		x := waitq.Place{Band: int32(rng.IntN(9) - 4), Arrival: rng.Int64N(500), Rank: rng.Int64N(3)}
		check(p, x, step)
		// and on the step's multiples, where the division rounds
		x.Arrival = p.Arrival - int64(rng.IntN(9))*step - int64(rng.IntN(3)-1)
		check(p, x, step)
	}
}

// BenchmarkAblationAhead is PushOrdered's walk: a newcomer of band 3
// walked from the tail past the 32 waiters of lower bands it goes ahead of
// (each comparison waits for the one before), with Ahead as it is (a
// multiplication) and by the division it replaced (docs/internals.md).
func BenchmarkAblationAhead(b *testing.B) {
	step := benchStep // a variable, as a lane's step is: no division by a constant
	var ws [33]waitq.Waiter
	for i := range ws {
		ws[i].Place = waitq.Place{Band: int32(i % 3), Arrival: int64(i) * 1000}
	}
	ws[0].Band = 3 // the walk stops at the head
	p := waitq.Place{Band: 3, Arrival: 33 * 1000}
	b.Run("impl=multiply", func(b *testing.B) {
		n := 0
		for b.Loop() {
			i := len(ws) - 1
			for i > 0 && waitq.Ahead(&p, &ws[i], step) {
				i--
			}
			n += i
		}
		sinkInt = n
	})
	b.Run("impl=divide", func(b *testing.B) {
		n := 0
		for b.Loop() {
			i := len(ws) - 1
			for i > 0 && aheadByDivision(&p, &ws[i].Place, step) {
				i--
			}
			n += i
		}
		sinkInt = n
	})
}

var (
	sinkInt   int
	benchStep = int64(time.Millisecond)
)
