package lanequeue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestDrainServesNestedWork (issue 26): a call whose context carries a
// ticket the queue admitted before Drain (a thread's message, whose
// handler now calls the model) is served while draining, for another key
// and another lane, and is listed by Holders; Drain waits for its ticket
// too, also once the ticket it came with is released.
func TestDrainServesNestedWork(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	thread, err := q.Lanes("session")
	must(t, err)
	model, err := q.Lanes("global")
	must(t, err)
	msg, err := q.AcquireAll(context.Background(), "thread-1", thread)
	must(t, err)
	drained := drainAsync(t, q, context.Background())

	call, err := q.AcquireAll(lanequeue.WithTicket(context.Background(), msg), "tenant-a", model)
	if err != nil {
		t.Fatalf("nested AcquireAll while draining = %v; want a ticket (its context carries a held ticket of the queue)", err)
	}
	keys := map[string]bool{}
	for _, h := range q.Holders() {
		keys[h.Lane+"/"+h.Key] = true
	}
	if !keys["session/thread-1"] || !keys["global/tenant-a"] {
		t.Errorf("Holders() = %v; want the message's ticket and the nested call's", q.Holders())
	}
	msg.Release()
	notYet(t, drained, "the nested call's ticket is out")
	call.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainNestedDoServed (issue 26): Do's function is given a context
// with its ticket, so a Do nested in it, for another key and lane, is
// served while draining.
func TestDrainNestedDoServed(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	thread, err := q.Lanes("session")
	must(t, err)
	model, err := q.Lanes("global")
	must(t, err)
	var drained <-chan error
	err = q.Do(context.Background(), "thread-1", thread, func(ctx context.Context) error {
		drained = drainAsync(t, q, context.Background())
		return q.Do(ctx, "tenant-a", model, func(context.Context) error {
			notYet(t, drained, "the nested Do runs")
			return nil
		})
	})
	if err != nil {
		t.Fatalf("Do with a nested Do while draining = %v; want nil", err)
	}
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainRefusesNewWorkBesideNested (issue 26): while draining, only a
// context with a held ticket of this queue admits a call: none, a released
// ticket, and tickets of other queues (of the same key type or another)
// are new work, refused with ErrDraining, even in a chain of contexts; a
// held ticket anywhere in the chain admits. A closed queue refuses every
// call.
func TestDrainRefusesNewWorkBesideNested(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	model, err := q.Lanes("global")
	must(t, err)
	held, err := q.AcquireAll(context.Background(), "thread-1", model)
	must(t, err)
	gone, err := q.AcquireAll(context.Background(), "thread-2", model)
	must(t, err)
	gone.Release()

	other := testQueue(t, 4)
	otherSet, err := other.Lanes("global")
	must(t, err)
	otherTk, err := other.AcquireAll(context.Background(), "thread-1", otherSet)
	must(t, err)
	defer otherTk.Release()
	ints := lanequeue.New[int]()
	t.Cleanup(ints.Close)
	must(t, addGlobal(ints, "global", 4))
	intSet, err := ints.Lanes("global")
	must(t, err)
	intTk, err := ints.AcquireAll(context.Background(), 1, intSet)
	must(t, err)
	defer intTk.Release()

	drained := drainAsync(t, q, context.Background())
	bg := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"no ticket", bg},
		{"a released ticket", lanequeue.WithTicket(bg, gone)},
		{"a ticket of another queue", lanequeue.WithTicket(bg, otherTk)},
		{"a ticket of a queue of another key type", lanequeue.WithTicket(bg, intTk)},
		{"all of them", lanequeue.WithTicket(lanequeue.WithTicket(lanequeue.WithTicket(bg, gone), otherTk), intTk)},
	} {
		if tk, err := q.AcquireAll(c.ctx, "tenant-a", model); err != lanequeue.ErrDraining {
			tk.Release()
			t.Errorf("AcquireAll with %s while draining = %v; want ErrDraining", c.name, err)
		}
	}
	// The held ticket admits, also under the others in the chain.
	ctx := lanequeue.WithTicket(lanequeue.WithTicket(lanequeue.WithTicket(bg, held), gone), otherTk)
	call, err := q.AcquireAll(ctx, "tenant-a", model)
	if err != nil {
		t.Fatalf("AcquireAll with a held ticket under others while draining = %v; want a ticket", err)
	}
	call.Release()
	notYet(t, drained, "a ticket is out")

	q.Close()
	if tk, err := q.AcquireAll(lanequeue.WithTicket(bg, held), "tenant-a", model); !errors.Is(err, semaphore.ErrClosed) || errors.Is(err, lanequeue.ErrDraining) {
		tk.Release()
		t.Fatalf("nested AcquireAll on a closed queue = %v; want ErrClosed", err)
	}
	held.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
}

// TestDrainNestedWaitsItsTurn (issue 26): a nested call that finds its
// lane full waits in line behind the callers already there, stays
// admitted when the ticket it came with is released meanwhile, is served
// in its turn, and Drain waits for it.
func TestDrainNestedWaitsItsTurn(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 1)
	model := []string{"global"}
	busy, err := acquireAll(q, context.Background(), "tenant-b", model) // a model call in progress
	must(t, err)
	first := acquireAsync(context.Background(), q, "tenant-c", model) // in line before Drain
	waitQueued(t, q, "global", 1)
	msg, err := acquireAll(q, context.Background(), "thread-1", []string{"session"})
	must(t, err)
	drained := drainAsync(t, q, context.Background())

	nested := acquireAsync(lanequeue.WithTicket(context.Background(), msg), q, "tenant-a", model)
	testkit.Eventually(t, "the nested call waits on global", func() bool {
		return laneStats(t, q, "global").Waiters == 2 || len(nested) > 0
	})
	if len(nested) > 0 {
		r := <-nested
		t.Fatalf("nested AcquireAll while draining, its lane full = (%v, %v); want it to wait in line", r.t, r.err)
	}
	msg.Release() // the ticket it came with ends while it waits
	busy.Release()
	r := receive(t, first)
	if r.err != nil {
		t.Fatalf("the caller in line before Drain = %v; want its ticket", r.err)
	}
	select {
	case r := <-nested:
		t.Fatalf("the nested call returned (%v, %v) before the caller ahead of it released", r.t, r.err)
	default:
	}
	r.t.Release()
	n := receive(t, nested)
	if n.err != nil {
		t.Fatalf("nested AcquireAll waiting in line while draining = %v; want its ticket", n.err)
	}
	notYet(t, drained, "the nested call's ticket is out")
	n.t.Release()
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
	assertNothingHeld(t, q)
}

// TestDrainCountsNestedWork (issue 26): a Drain cut short counts a nested
// call's ticket among what is out.
func TestDrainCountsNestedWork(t *testing.T) {
	t.Parallel()
	q := testQueue(t, 4)
	model, err := q.Lanes("global")
	must(t, err)
	msg, err := acquireAll(q, context.Background(), "thread-1", []string{"session"})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	drained := drainAsync(t, q, ctx)
	call, err := q.AcquireAll(lanequeue.WithTicket(context.Background(), msg), "tenant-a", model)
	must(t, err)
	msg.Release()
	cancel()
	if err := testkit.Recv(t, drained, "the cancelled Drain"); !errors.Is(err, context.Canceled) || err.Error() != "lanequeue: drain: calls, places or tickets still out: 1: context canceled" {
		t.Fatalf("cancelled Drain = %v; want context.Canceled, with 1 out (the nested call)", err)
	}
	call.Release()
	if err := q.Drain(context.Background()); err != nil {
		t.Fatalf("second Drain = %v; want nil", err)
	}
}
