package fuzz_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// Operations of FuzzSemaphore, chosen by an op byte modulo semOps; most
// take one argument byte.
const (
	semTry         = iota // TryAcquire(weight)
	semAcquire            // Acquire(weight) in a goroutine; it may wait
	semAcquireDone        // Acquire with a context already cancelled
	semCancel             // cancel a waiter's context
	semRelease            // release a held permit
	semDouble             // release an already released permit again
	semResize             // SetCapacity(0..21)
	semAdvance            // move the fake clock on (expires WithMaxWait waiters)
	semClose              // Close
	semFill               // TryAcquire(1) until refused
	semOps
)

// semErr maps the model's outcomes to the package's errors.
var semErr = map[model.Err]error{
	model.InvalidWeight: semaphore.ErrInvalidWeight,
	model.TooHeavy:      semaphore.ErrTooHeavy,
	model.Closed:        semaphore.ErrClosed,
	model.QueueFull:     semaphore.ErrQueueFull,
	model.Cancelled:     context.Canceled,
	model.WaitTooLong:   semaphore.ErrWaitTooLong,
}

type acquired struct {
	p   semaphore.Permit
	err error
}

type semWaiter struct {
	id       int
	n        int64
	cancel   context.CancelFunc // nil: the waiter's context cannot end
	deadline time.Time          // zero without WithMaxWait
	res      chan acquired
}

type semDriver struct {
	t        *testing.T
	s        *semaphore.Weighted
	m        *model.Semaphore
	clk      *clock.Fake
	maxWait  time.Duration
	waiters  map[int]*semWaiter       // by model id, while queued
	held     map[int]semaphore.Permit // by model id
	released []int                    // ids of released permits, for double releases
	old      map[int]semaphore.Permit // released permits, by id
	log      []string                 // the operations so far, for the failure message
}

// FuzzSemaphore drives one semaphore.Weighted and model.Semaphore with the
// same operations and compares, after every step, the outcome of the call,
// who was woken and how, and Stats (every field). It also checks that
// available + held == capacity with the permits the driver holds.
//
// Capacities reach past 15, and semFill takes single permits until one is
// refused, so that more permits can be out at once than a semaphore has
// inline tokens (15): the grants beyond them take spare tokens, whose
// release goes through the lock.
//
// Input: capacity (0..20), WithMaxWaiters (0: none, 1..4), WithMaxWaitingWeight
// (0: none, 1..11), WithMaxWait (0: none, 1..8 s on a fake clock), then
// pairs of (op, argument).
func FuzzSemaphore(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		in := &input{b: data}
		capacity := int64(in.byte() % 21)
		maxWaiters := int(in.byte() % 5)
		maxWaitWeight := int64(in.byte() % 12)
		var maxWait time.Duration
		if b := in.byte(); b%2 == 1 {
			maxWait = time.Duration(1+b/2%8) * time.Second
		}
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		d := &semDriver{
			t: t,
			s: semaphore.New(capacity, semaphore.WithMaxWaiters(maxWaiters),
				semaphore.WithMaxWaitingWeight(maxWaitWeight), semaphore.WithMaxWait(maxWait),
				semaphore.WithClock(clk)),
			m:       model.NewSemaphore(capacity, maxWaiters, maxWaitWeight),
			clk:     clk,
			maxWait: maxWait,
			waiters: map[int]*semWaiter{},
			held:    map[int]semaphore.Permit{},
			old:     map[int]semaphore.Permit{},
		}
		d.logf("New(%d, maxWaiters=%d, maxWaitWeight=%d, maxWait=%v)", capacity, maxWaiters, maxWaitWeight, maxWait)
		d.check()
		for ops := 0; in.more() && ops < maxOps; ops++ {
			d.step(in.byte()%semOps, in.byte())
			d.check()
		}
		d.finish()
		if testing.Verbose() {
			t.Logf("operations:\n  %s", joinLines(d.log))
		}
	})
}

func (d *semDriver) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *semDriver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s\noperations:\n  %s", fmt.Sprintf(format, args...), joinLines(d.log))
}

func joinLines(l []string) string {
	s := ""
	for i, x := range l {
		if i > 0 {
			s += "\n  "
		}
		s += x
	}
	return s
}

func (d *semDriver) weight(arg byte) int64 { return int64(arg) % (d.m.Capacity() + 2) }

func (d *semDriver) step(op, arg byte) {
	switch op {
	case semTry:
		n := d.weight(arg)
		d.logf("TryAcquire(%d)", n)
		p, ok := d.s.TryAcquire(n)
		id, want := d.m.TryAcquire(n)
		d.logf("  -> id %d, %v", id, want)
		if ok != want {
			d.fatalf("TryAcquire(%d) = %v, model says %v", n, ok, want)
		}
		if ok {
			d.grant(id, n, p)
		}
	case semFill:
		// Single permits until one is refused: with a capacity past 15,
		// the grants beyond the inline tokens take spare tokens.
		for range d.m.Capacity() + 1 {
			d.logf("TryAcquire(1)")
			p, ok := d.s.TryAcquire(1)
			id, want := d.m.TryAcquire(1)
			d.logf("  -> id %d, %v", id, want)
			if ok != want {
				d.fatalf("TryAcquire(1) = %v, model says %v", ok, want)
			}
			if !ok {
				break
			}
			d.grant(id, 1, p)
		}
	case semAcquire:
		n := d.weight(arg)
		if len(d.waiters) >= maxWaiters {
			return
		}
		d.acquire(n, arg&0x80 != 0)
	case semAcquireDone:
		n := d.weight(arg)
		d.logf("Acquire(done ctx, %d)", n)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p, err := d.s.Acquire(ctx, n)
		want := d.m.AcquireDone()
		if !errors.Is(err, semErr[want]) || p.Valid() {
			d.fatalf("Acquire with a done context: %v, %v; want %v", p, err, want)
		}
	case semCancel:
		var ids []int
		for _, w := range d.m.Queue() {
			if d.waiters[w.ID].cancel != nil {
				ids = append(ids, w.ID)
			}
		}
		if len(ids) == 0 {
			return
		}
		w := d.waiters[ids[int(arg)%len(ids)]]
		d.logf("cancel waiter %d", w.id)
		w.cancel()
		r := receive(d.t, fmt.Sprintf("cancelled waiter %d", w.id), w.res)
		if !errors.Is(r.err, context.Canceled) || r.p.Valid() {
			d.fatalf("cancelled waiter %d returned %v, %v", w.id, r.p, r.err)
		}
		delete(d.waiters, w.id)
		d.served(d.m.Cancel(w.id))
	case semRelease:
		id, ok := pick(d.held, arg)
		if !ok {
			return
		}
		d.logf("Release(permit %d)", id)
		p := d.held[id]
		delete(d.held, id)
		if !p.Release() {
			d.fatalf("first Release of permit %d returned false", id)
		}
		d.old[id] = p
		d.released = append(d.released, id)
		first, granted := d.m.Release(id)
		if !first {
			d.fatalf("model: release of held permit %d not first", id)
		}
		d.served(granted)
	case semDouble:
		if len(d.released) == 0 {
			return
		}
		id := d.released[int(arg)%len(d.released)]
		d.logf("Release(permit %d) again", id)
		if d.old[id].Release() {
			d.fatalf("second Release of permit %d returned true", id)
		}
		d.m.Release(id)
	case semResize:
		n := int64(arg % 22)
		d.logf("SetCapacity(%d)", n)
		d.s.SetCapacity(n)
		d.served(d.m.SetCapacity(n))
	case semAdvance:
		by := time.Duration(arg%16) * 500 * time.Millisecond
		d.logf("Advance(%v)", by)
		d.advance(by)
	case semClose:
		d.logf("Close()")
		d.s.Close()
		d.served(d.m.Close())
	}
}

// pick returns the arg-th key of m in sorted order.
func pick[V any](m map[int]V, arg byte) (int, bool) {
	if len(m) == 0 {
		return 0, false
	}
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids[int(arg)%len(ids)], true
}

func (d *semDriver) grant(id int, n int64, p semaphore.Permit) {
	if !p.Valid() || p.Weight() != n {
		d.fatalf("grant %d: permit %v, want weight %d", id, p, n)
	}
	d.held[id] = p
}

// acquire starts Acquire(n) in a goroutine and waits until it has returned
// or queued, as the model says.
func (d *semDriver) acquire(n int64, background bool) {
	ctx, cancel := context.Background(), context.CancelFunc(nil)
	if !background {
		ctx, cancel = context.WithCancel(ctx)
	}
	d.logf("Acquire(%d) [cancellable=%v]", n, !background)
	res := make(chan acquired, 1)
	go func() {
		p, err := d.s.Acquire(ctx, n)
		res <- acquired{p, err}
	}()
	id, queued, want := d.m.Acquire(n)
	d.logf("  -> id %d, queued %v, outcome %v", id, queued, want)
	if !queued {
		r := receive(d.t, fmt.Sprintf("Acquire(%d)", n), res)
		if cancel != nil {
			cancel()
		}
		if want == model.OK {
			if r.err != nil {
				d.fatalf("Acquire(%d) = %v, model grants", n, r.err)
			}
			d.grant(id, n, r.p)
		} else if !errors.Is(r.err, semErr[want]) || r.p.Valid() {
			d.fatalf("Acquire(%d) = %v, %v; model says %v", n, r.p, r.err, want)
		}
		return
	}
	w := &semWaiter{id: id, n: n, cancel: cancel, res: res}
	d.waiters[id] = w
	queue := len(d.m.Queue())
	eventually(d.t, fmt.Sprintf("waiter %d to queue", id), func() bool {
		select {
		case r := <-res:
			d.fatalf("Acquire(%d) returned %v, %v; model says it waits", n, r.p, r.err)
		default:
		}
		return d.s.Stats().Waiters == queue
	})
	if d.maxWait > 0 {
		// The waiter arms its WithMaxWait timer after queueing: wait for
		// it, then move the clock on by 1ns so that every waiter has a
		// deadline of its own and expiries happen one at a time.
		eventually(d.t, fmt.Sprintf("waiter %d to arm its timer", id), func() bool { return d.clk.Pending() >= queue })
		w.deadline = d.clk.Now().Add(d.maxWait)
		d.clk.Advance(time.Nanosecond)
	}
}

// advance moves the fake clock on by `by`, one waiter's deadline at a time.
func (d *semDriver) advance(by time.Duration) {
	end := d.clk.Now().Add(by)
	for {
		var next *semWaiter
		for _, w := range d.waiters {
			if !w.deadline.IsZero() && !w.deadline.After(end) && (next == nil || w.deadline.Before(next.deadline)) {
				next = w
			}
		}
		if next == nil {
			break
		}
		d.clk.Advance(next.deadline.Sub(d.clk.Now()))
		r := receive(d.t, fmt.Sprintf("expired waiter %d", next.id), next.res)
		if !errors.Is(r.err, semaphore.ErrWaitTooLong) || r.p.Valid() {
			d.fatalf("expired waiter %d returned %v, %v", next.id, r.p, r.err)
		}
		if next.cancel != nil {
			next.cancel()
		}
		delete(d.waiters, next.id)
		d.served(d.m.Expire(next.id))
	}
	d.clk.Advance(end.Sub(d.clk.Now()))
}

// served collects the results of the waiters the model says were served,
// in the model's order, and checks them.
func (d *semDriver) served(list []model.Served) {
	for _, s := range list {
		w := d.waiters[s.ID]
		if w == nil {
			d.fatalf("model served %d, which the driver does not know as waiting", s.ID)
		}
		r := receive(d.t, fmt.Sprintf("waiter %d (%v)", s.ID, s.Err), w.res)
		delete(d.waiters, s.ID)
		if w.cancel != nil {
			w.cancel()
		}
		if s.Err == model.OK {
			if r.err != nil {
				d.fatalf("waiter %d got %v, model grants it", s.ID, r.err)
			}
			d.grant(s.ID, w.n, r.p)
			continue
		}
		if !errors.Is(r.err, semErr[s.Err]) || r.p.Valid() {
			d.fatalf("waiter %d got %v, %v; model says %v", s.ID, r.p, r.err, s.Err)
		}
	}
}

// check compares the real semaphore with the model after a step.
func (d *semDriver) check() {
	if err := d.m.Check(); err != nil {
		d.fatalf("%v", err)
	}
	got := d.s.Stats()
	want := d.m.Stats()
	// A conversion, not a field-by-field copy: a field added to either
	// side and not the other stops the build.
	real := model.SemStats(got)
	if real != want {
		d.fatalf("Stats differ from the model:\n  real  %+v\n  model %+v", real, want)
	}
	var held int64
	for _, p := range d.held {
		held += p.Weight()
	}
	if got.Available+held != got.Capacity {
		d.fatalf("available %d + held %d != capacity %d", got.Available, held, got.Capacity)
	}
	// FIFO: nobody the model keeps waiting has been served.
	for id, w := range d.waiters {
		select {
		case r := <-w.res:
			d.fatalf("waiter %d returned %v, %v while the model keeps it waiting", id, r.p, r.err)
		default:
		}
	}
}

// finish closes the semaphore, collects every waiter, releases every
// permit, and checks that everything came back.
func (d *semDriver) finish() {
	d.logf("Close() and release all")
	d.s.Close()
	d.served(d.m.Close())
	for _, id := range sortedIDs(d.held) { // in order, so that a failing input replays the same way
		p := d.held[id]
		if !p.Release() {
			d.fatalf("final Release of permit %d returned false", id)
		}
		d.m.Release(id)
		delete(d.held, id)
	}
	d.check()
	if st := d.s.Stats(); st.Held != 0 || st.Available != st.Capacity {
		d.fatalf("after releasing everything: %+v", st)
	}
}
