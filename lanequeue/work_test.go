package lanequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sessionlane/lanes/harness/lanetest"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

var errLeaseGone = errors.New("lease gone")

// TestWorkEndsWithALeasedPermit: the work a ticket admits (Do's fn, a
// WorkContext) ends, with the permit's reason as its cause, when a permit
// of a Leased lane ends before the ticket is released (a fleet lane's
// lease lost: another holder may be let in); the work of a ticket of other
// lanes has no such end, and its context carries the ticket all the same.
func TestWorkEndsWithALeasedPermit(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	fleet := lanetest.NewLeased(1)
	must(t, q.Add("fleet", fleet))
	must(t, addGlobal(q, "local", 1))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()

	inFn := make(chan struct{})
	done := testkit.Go(func() error {
		return doAll(q, ctx, "k", []string{"fleet", "local"}, func(wctx context.Context) error {
			if tk, ok := lanequeue.TicketFrom[string](wctx); !ok || tk == nil {
				return errors.New("the work context carries no ticket")
			}
			close(inFn)
			<-wctx.Done()
			return context.Cause(wctx)
		})
	})
	testkit.Recv(t, inFn, "Do's fn")
	fleet.End(errLeaseGone)
	if err := testkit.Recv(t, done, "fn, after the lease ended"); !errors.Is(err, errLeaseGone) {
		t.Fatalf("fn's context ended with %v; want the permit's cause", err)
	}
	assertNothingHeld(t, q)

	// Without a Leased lane the work context ends only with ctx.
	must(t, doAll(q, context.Background(), "k", []string{"local"}, func(wctx context.Context) error {
		if wctx.Done() != nil {
			return errors.New("the work context of a local lane can end")
		}
		return nil
	}))

	// WorkContext, for a caller of AcquireAll, ends as Do's fn's does; a
	// released ticket's watches nothing.
	ls, err := q.Lanes("fleet")
	must(t, err)
	tk, err := q.AcquireAll(ctx, "k", ls)
	must(t, err)
	wctx, stop := lanequeue.WorkContext(ctx, tk)
	if wctx.Err() != nil {
		t.Fatalf("a fresh work context ended: %v", context.Cause(wctx))
	}
	fleet.End(errLeaseGone)
	testkit.Recv(t, wctx.Done(), "the work context, after the lease ended")
	stop()
	tk.Release()
	if wctx, stop := lanequeue.WorkContext(ctx, tk); wctx.Done() != ctx.Done() {
		t.Errorf("the work context of a released ticket watches a permit")
	} else {
		stop()
	}
}

// endedLane is a Leased lane whose permits' contexts have ended already
// (a fleet lane's block lapsed between the grant and the work), or whose
// PermitContext panics.
type endedLane struct {
	lanequeue.Lane[string]
	panics bool
}

func (l *endedLane) PermitContext(semaphore.Permit) context.Context {
	if l.panics {
		panic("PermitContext")
	}
	ctx, end := context.WithCancelCause(context.Background())
	end(errLeaseGone)
	return ctx
}

// TestWorkOfAnEndedPermitStartsEnded: a permit whose context ended before
// the work began gives the work an ended context at once (AfterFunc would
// end it later, from a goroutine of its own, with fn already running); a
// PermitContext that panics leaves nothing held, and the panic goes on.
func TestWorkOfAnEndedPermitStartsEnded(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("ended", &endedLane{Lane: lanequeue.NewGlobalLane[string](semaphore.New(1))}))
	must(t, q.Add("panics", &endedLane{Lane: lanequeue.NewGlobalLane[string](semaphore.New(1)), panics: true}))
	must(t, doAll(q, context.Background(), "k", []string{"ended"}, func(wctx context.Context) error {
		if !errors.Is(context.Cause(wctx), errLeaseGone) {
			return errors.New("fn began with a live context, its permit's ended already")
		}
		return nil
	}))
	called := false
	v := panics(func() {
		_ = doAll(q, context.Background(), "k", []string{"panics"}, func(context.Context) error { called = true; return nil })
	})
	if v != "PermitContext" || called {
		t.Fatalf("recovered %v, fn called %v; want PermitContext's panic, fn not called", v, called)
	}
	assertNothingHeld(t, q)
}

// countedCtx is a permit's context that counts the AfterFunc registrations
// on it still live (context.AfterFunc uses its AfterFunc method).
type countedCtx struct {
	context.Context
	mu   sync.Mutex
	live int
}

// Value hides the context under it, so that context.AfterFunc does not
// find its cancel context and registers through AfterFunc below.
func (c *countedCtx) Value(any) any { return nil }

func (c *countedCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	c.live++
	c.mu.Unlock()
	stop := context.AfterFunc(c.Context, f)
	return func() bool {
		ok := stop()
		if ok {
			c.mu.Lock()
			c.live--
			c.mu.Unlock()
		}
		return ok
	}
}

// countedLane is a Leased lane whose permits' contexts are ctx.
type countedLane struct {
	lanequeue.Lane[string]
	ctx *countedCtx
}

func (l *countedLane) PermitContext(semaphore.Permit) context.Context { return l.ctx }

// TestWorkUndoneWhenAPermitContextPanics: when a later lane's
// PermitContext panics, the watch already set on an earlier Leased lane's
// permit is undone, not left registered on the permit's context.
func TestWorkUndoneWhenAPermitContextPanics(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	permitCtx, end := context.WithCancel(context.Background()) // Done not nil: AfterFunc registers
	defer end()
	live := &countedLane{Lane: lanequeue.NewGlobalLane[string](semaphore.New(1)), ctx: &countedCtx{Context: permitCtx}}
	must(t, q.Add("a-live", live)) // global lanes go by name: this one is watched first
	must(t, q.Add("b-panics", &endedLane{Lane: lanequeue.NewGlobalLane[string](semaphore.New(1)), panics: true}))
	v := panics(func() {
		_ = doAll(q, context.Background(), "k", []string{"a-live", "b-panics"}, func(context.Context) error { return nil })
	})
	if v != "PermitContext" {
		t.Fatalf("recovered %v; want PermitContext's panic", v)
	}
	live.ctx.mu.Lock()
	n := live.ctx.live
	live.ctx.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d watches left on the first lane's permit context; want 0", n)
	}
	// The counting itself: a Do that returns leaves no watch either, and
	// one that runs has one.
	must(t, doAll(q, context.Background(), "k", []string{"a-live"}, func(context.Context) error {
		live.ctx.mu.Lock()
		defer live.ctx.mu.Unlock()
		if live.ctx.live != 1 {
			return errors.New("no watch counted while the work runs")
		}
		return nil
	}))
	assertNothingHeld(t, q)
}
