package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// The agents lane's order, one grant at a time: no wall clock, no load.
// The run's figures (go run . -load 30s) measure latencies; these tests
// pin down the order of service behind them.

// line is a lane of one permit, held by the test, and the places joined
// on it, each waiting on a goroutine of its own; serve lets them through
// one at a time and says in which order.
type line struct {
	t      *testing.T
	s      *semaphore.Weighted
	clock  *clock.Fake
	held   semaphore.Permit
	grants chan grant
	order  []string
}

type grant struct {
	name string
	perm semaphore.Permit
	err  error
}

func newLine(t *testing.T, s func(opts ...semaphore.Option) *semaphore.Weighted) *line {
	fk := clock.NewFake(time.Unix(0, 0))
	l := &line{t: t, s: s(semaphore.WithClock(fk)), clock: fk, grants: make(chan grant, 1024)}
	p, ok := l.s.TryAcquire(1)
	if !ok {
		t.Fatal("a new lane of one permit has none free")
	}
	l.held = p
	// Whatever is still waiting at the end is failed by Close, so that no
	// goroutine outlives the test.
	t.Cleanup(l.s.Close)
	return l
}

// join takes a place in line for a message of tenant and kind (what the
// gateway passes the agents lane) and waits for it on a goroutine.
func (l *line) join(name, tenant, kind string) {
	l.t.Helper()
	p, err := l.s.Join(1, agentsTurn(tenant, kind))
	l.wait(name, p, err)
}

// next gives the permit held back and returns the name of the place it
// went to, which holds it now.
func (l *line) next() string {
	l.t.Helper()
	l.held.Release()
	g := testkit.Recv(l.t, l.grants, "the next grant")
	if g.err != nil {
		l.t.Fatalf("%s: %v", g.name, g.err)
	}
	l.held = g.perm
	l.order = append(l.order, g.name)
	return g.name
}

// TestAgentsSmallUserAheadOfBigBacklog: the big tenant has four messages
// waiting, then a cron job joins, and the small tenant's user message
// comes after the cron job has waited longer than a second (the old
// recipe's aging step). It goes ahead of every big message but the one
// at the head (equal turns keep their arrival order). On the old recipe's
// lane (bands aged by 1s, TestEngineAgedBandHoldsBackFairShare) it was
// served after all four: the loaded runs' slow small users.
func TestAgentsSmallUserAheadOfBigBacklog(t *testing.T) {
	l := newLine(t, func(opts ...semaphore.Option) *semaphore.Weighted { return newAgents(1, opts...) })
	for i := range 4 {
		l.join(fmt.Sprint("big", i), "big", "user")
	}
	l.join("cron", "big", "cron")
	l.clock.Advance(1500 * time.Millisecond)
	l.join("small", "small", "user")
	for range 6 {
		l.next()
	}
	if i := slices.Index(l.order, "small"); i < 0 || i > slices.Index(l.order, "big1") {
		t.Errorf("served %v: the small tenant's user waited behind the big tenant's backlog", l.order)
	}
}

// TestAgentsCronServedUnderLoad: while the users keep the lane full (a
// new big message for every grant, a small one for every fourth), the
// big tenant's three cron jobs get their share of the grants, at least
// weightCron in every 17 (the weights of big/user, small/user and
// big/cron), not when the users stop. On the old recipe's lane (cron jobs
// in a lower band, aged by 1s) none was served in those 51 grants: a cron
// job waited 100 grants here before it aged.
func TestAgentsCronServedUnderLoad(t *testing.T) {
	l := newLine(t, func(opts ...semaphore.Option) *semaphore.Weighted { return newAgents(1, opts...) })
	users := 0
	user := func(tenant string) {
		users++
		l.join(fmt.Sprint(tenant, users), tenant, "user")
	}
	for range 8 {
		user("big")
	}
	user("small")
	for i := range 3 {
		l.join(fmt.Sprint("cron", i), "big", "cron")
	}
	bound := 3 * (2*weightUser + weightCron) / weightCron
	cron := 0
	for n := 1; cron < 3; n++ {
		if n > bound {
			t.Fatalf("%d of 3 cron jobs served in %d grants while users kept the lane full, want 3: %v", cron, bound, l.order)
		}
		if strings.HasPrefix(l.next(), "cron") {
			cron++
		}
		l.clock.Advance(10 * time.Millisecond) // a grant every 10 ms: 8 agents running 80 ms each
		user("big")
		if n%4 == 0 {
			user("small")
		}
	}
}

// TestEngineAgedBandHoldsBackFairShare reproduces, on the lane the recipe
// used to make (semaphore.WithPriorities(1s) and WithFairShare(nil): users
// in band 1, cron jobs in band 0, tenants as groups), why the small
// tenant's users missed 2x in the loaded runs. A newcomer is placed once,
// searched from the newest, and passes only waiters it goes ahead of; a
// band-0 cron job that has waited a step is no longer passed by band 1, so
// a small user who comes then stops behind the cron job and so behind
// every big message queued before it, although its fair-share turn is
// before theirs. Not aged yet, the same cron job is passed, and the small
// user's turn comes second. In the loaded runs an aged cron job waited 95%
// of the time (two tenants' cron jobs, each served only once aged), and
// the slowest 2% of small users waited while about 40 big messages, all
// sent before them, went first. It asserts the engine's order today: if
// it fails, the order has changed (semaphore/internal/waitq), and the
// recipe's choice of groups over bands may be looked at again.
func TestEngineAgedBandHoldsBackFairShare(t *testing.T) {
	bands := func(opts ...semaphore.Option) *semaphore.Weighted {
		return semaphore.New(1, append([]semaphore.Option{semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil)}, opts...)...)
	}
	for _, tc := range []struct {
		name   string
		waited time.Duration // by the cron job when the small user comes
		want   []string
	}{
		{"cron job not aged", 500 * time.Millisecond, []string{"big0", "small", "big1", "big2", "big3", "cron"}},
		{"cron job aged", 1500 * time.Millisecond, []string{"big0", "big1", "big2", "big3", "cron", "small"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLine(t, bands)
			for i := range 4 {
				p, err := l.s.Join(1, semaphore.Priority(1), semaphore.Group("big"))
				l.wait(fmt.Sprint("big", i), p, err)
			}
			p, err := l.s.Join(1, semaphore.Priority(0), semaphore.Group("big"))
			l.wait("cron", p, err)
			l.clock.Advance(tc.waited)
			p, err = l.s.Join(1, semaphore.Priority(1), semaphore.Group("small"))
			l.wait("small", p, err)
			for range len(tc.want) {
				l.next()
			}
			if !slices.Equal(l.order, tc.want) {
				t.Errorf("served %v, want %v", l.order, tc.want)
			}
		})
	}
}

// wait waits for place p, joined as name, on a goroutine.
func (l *line) wait(name string, p semaphore.Place, err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatalf("join %s: %v", name, err)
	}
	go func() {
		perm, err := p.Wait(context.Background())
		l.grants <- grant{name, perm, err}
	}()
}
