package modelcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// semServed is what one Acquire goroutine of the driver returned.
type semServed struct {
	id  int
	p   semaphore.Permit
	err error
}

// semRun drives a real semaphore and a model.Semaphore with the same
// operations, one at a time, and checks after each that they agree.
//
// Blocking Acquires run in goroutines that report on one channel. The
// driver waits for each to queue before the next step, so arrival order is
// the order of the steps; and after each step it collects exactly the
// waiters that the model says the step served, so that a grant to the wrong
// waiter is caught at once, as an unexpected id.
type semRun struct {
	t       *rapid.T
	s       *semaphore.Weighted
	m       *model.Semaphore
	clk     *clock.Fake   // nil: neither WithMaxWait nor WithPriorities
	maxWait time.Duration // 0: no WithMaxWait
	step    time.Duration // 0: no WithPriorities
	fair    bool          // WithFairShare
	fuzz    bool          // see skip

	results   chan semServed
	running   int                        // goroutines whose result is not yet received
	waiting   map[int]context.CancelFunc // queued waiters by id; nil: a context that cannot end
	deadlines map[int]time.Time          // their max-wait deadlines
	permits   map[int]semaphore.Permit   // permits out by id
	released  map[int]semaphore.Permit   // permits released, for double releases
	cancels   map[int]context.CancelFunc // contexts of granted acquires, cancelled at cleanup
	weights   map[int]int64              // weight of each acquire by id
	journal                              // the steps, for failure messages
}

// Semaphore checks random sequences of operations on a semaphore.Weighted
// against model.Semaphore: the same grants, to the same waiters, in the
// model's order of service, the same failures, and the same Stats after
// every step; every waiter served once, none lost.
//
// The operations: Acquire that may wait (with a context that can be
// cancelled or one that cannot), Acquire with an ended context,
// TryAcquire, fill (TryAcquire(1) until refused), Release, a second
// Release, cancel a waiter, let the oldest waiter's WithMaxWait run out,
// move the fake clock on (every waiter whose max wait ends in between
// times out, one at a time), cancel or time out a waiter and at once free
// permits (a release or a grow) so that they may reach it before it left,
// SetCapacity, Close. After every step: the model's invariants, no Acquire
// returned that the model keeps waiting, Stats field by field,
// Available+Held == Capacity, Held == the weight of the permits the driver
// holds, one max-wait timer per waiter. At the end: Close, every waiter
// failed, every permit released in id order, nobody left waiting,
// everything back.
//
// Capacities reach past the inline tokens (14), and fill and weight 1 for half the draws (two
// thirds under fair share), so that more permits can be out at once than
// a semaphore has inline tokens: the grants beyond them take spare
// tokens.
//
// Each run has one of the orders of service (FIFO, priorities, fair
// share, or priorities and fair share composed: model
// PrioritiesFairShare), so that one driver checks them all. A quarter of
// the runs order by priority with aging (WithPriorities, model Priorities, both on the
// fake clock): their acquires are Acquire calls with drawn priorities
// (the bounds ±1,000,000 (call.MaxPriority) included) or plain Acquire at priority 0, and
// age moves the clock on by quarters of the step, so the grants checked
// are those of the highest effective priority. A quarter share fairly
// (WithFairShare, model FairShare): their acquires name one of the groups
// "", "a", "b" and "c" (plain Acquire waits in ""), with equal weights or
// weights from 1 to 4, so the grants checked are those of start-time fair
// queuing, FIFO within a group. A quarter do both, each acquire with a
// drawn priority and group, so the grants checked are band first, then the
// groups' turns within a band (the model checks after every step that no
// waiter was passed by a later one that does not overtake it). Every run
// also tries Turns it must refuse
// (badTurn: a field without its option, a priority out of range):
// nothing taken, counted in Rejected.
//
// Semaphore is the driver for rapid.Check; SemaphoreFuzz is the same for
// rapid.MakeFuzz (see skip).
func Semaphore(t *rapid.T) { semaphoreDriver(t, false, anyOrder) }

// SemaphoreFuzz is Semaphore for a fuzz target: an operation that cannot
// run in the current state does nothing instead of asking rapid for
// another.
func SemaphoreFuzz(t *rapid.T) { semaphoreDriver(t, true, anyOrder) }

// PrioritySemaphore is Semaphore with priorities in every run.
func PrioritySemaphore(t *rapid.T) { semaphoreDriver(t, false, priorityOrder) }

// FairSemaphore is Semaphore with fair share in every run.
func FairSemaphore(t *rapid.T) { semaphoreDriver(t, false, fairOrder) }

// ComposedSemaphore is Semaphore with priorities and fair share together
// in every run.
func ComposedSemaphore(t *rapid.T) { semaphoreDriver(t, false, composedOrder) }

// semOrder is the order of service of a run of the semaphore driver.
type semOrder int

const (
	anyOrder semOrder = iota // drawn
	fifoOrder
	priorityOrder
	fairOrder
	composedOrder // priorities and fair share together
)

// fairGroups are the groups the driver draws from under fair share; "" is
// a group like any other.
var fairGroups = []string{"", "a", "b", "c"}

func semaphoreDriver(t *rapid.T, fuzz bool, order semOrder) {
	r := newSemRun(t, order)
	r.fuzz = fuzz
	drive(t, fuzz, r.cleanup, r.finish, r.actions())
}

// actions returns the driver's operations, by name, and its check ("").
func (r *semRun) actions() map[string]func(*rapid.T) {
	actions := map[string]func(*rapid.T){
		"acquire":       r.acquire,
		"acquireAgain":  r.acquire, // blocking acquires twice as often
		"acquireDone":   r.acquireDone,
		"badTurn":       r.badTurn,
		"age":           r.age,
		"tryAcquire":    r.tryAcquire,
		"fill":          r.fill,
		"release":       r.release,
		"doubleRelease": r.doubleRelease,
		"cancel":        r.cancel,
		"expire":        r.expire,
		"advance":       r.advance,
		"cancelThen":    r.cancelThenGrant,
		"expireThen":    r.expireThenGrant,
		"setCapacity":   r.setCapacity,
		"close":         r.close,
		"":              r.check,
	}
	if r.fair {
		// Queues long enough, in enough groups, for their turns to show.
		actions["acquireMore"] = r.acquire
		actions["acquireMost"] = r.acquire
	}
	return actions
}

func newSemRun(t *rapid.T, order semOrder) *semRun {
	capacity := rapid.Int64Range(0, 20).Draw(t, "capacity")
	if order == anyOrder {
		order = rapid.SampledFrom([]semOrder{fifoOrder, priorityOrder, fairOrder, composedOrder}).Draw(t, "order")
	}
	// Half the runs have no bound on the queue, so that it grows; under
	// fair share three quarters, as the groups' turns show on long queues.
	var maxWaiters int
	var maxWaitWeight int64
	if order != fairOrder && order != composedOrder || rapid.Bool().Draw(t, "fairBounds") {
		maxWaiters = rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "maxWaiters")
		maxWaitWeight = rapid.OneOf(rapid.Just[int64](0), rapid.Int64Range(1, 16)).Draw(t, "maxWaitWeight")
	}
	opts := []semaphore.Option{
		semaphore.WithMaxWaiters(maxWaiters),
		semaphore.WithMaxWaitingWeight(maxWaitWeight),
	}
	r := &semRun{
		t:         t,
		results:   make(chan semServed, 1024),
		waiting:   make(map[int]context.CancelFunc),
		deadlines: make(map[int]time.Time),
		permits:   make(map[int]semaphore.Permit),
		released:  make(map[int]semaphore.Permit),
		cancels:   make(map[int]context.CancelFunc),
		weights:   make(map[int]int64),
	}
	if rapid.Bool().Draw(t, "withMaxWait") {
		r.maxWait = rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, time.Hour}).Draw(t, "maxWait")
		r.clk = clock.NewFake(time.Unix(1_700_000_000, 0))
		opts = append(opts, semaphore.WithMaxWait(r.maxWait), semaphore.WithClock(r.clk))
	}
	weighted, mo := false, model.FIFO()
	if order == priorityOrder || order == composedOrder {
		// Aging steps against the clock's moves (a tick of 1s at most
		// per waiter, age in quarters of a step): a step of a tick makes
		// a priority's lead equal to one tick of waiting (equal keys),
		// 3s makes newcomers pass some waiters, and a minute is strict
		// priority unless age runs.
		r.step = rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second, time.Minute}).Draw(t, "step")
		if r.clk == nil {
			r.clk = clock.NewFake(time.Unix(1_700_000_000, 0))
			opts = append(opts, semaphore.WithClock(r.clk))
		}
		opts = append(opts, semaphore.WithPriorities(r.step))
		mo = model.Priorities(r.step, call.MaxPriority)
	}
	if order == fairOrder || order == composedOrder {
		var weight func(string) int
		if weighted = rapid.Bool().Draw(t, "weighted"); weighted {
			table := make(map[string]int, len(fairGroups))
			for _, g := range fairGroups {
				table[g] = rapid.IntRange(1, 4).Draw(t, "weight "+g)
			}
			weight = func(g string) int { return table[g] }
		}
		r.fair = true
		opts = append(opts, semaphore.WithFairShare(weight))
		mo = model.FairShare(weight)
		if order == composedOrder {
			mo = model.PrioritiesFairShare(r.step, call.MaxPriority, weight)
		}
	}
	r.m = model.NewOrderedSemaphore(capacity, maxWaiters, maxWaitWeight, mo)
	r.s = semaphore.New(capacity, opts...)
	r.logf("New(%d, maxWaiters=%d, maxWaitWeight=%d, maxWait=%v, step=%v, fair=%v weighted=%v)",
		capacity, maxWaiters, maxWaitWeight, r.maxWait, r.step, r.fair, weighted)
	return r
}

// semErrOf is the error semaphore returns for a model outcome.
func semErrOf(e model.Err) error { return errOf(e, semaphore.ErrClosed, semaphore.ErrQueueFull) }

func (r *semRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v queue %+v",
		fmt.Sprintf(format, args...), r.journal, r.s.Stats(), r.m.Stats(), r.m.Queue())
}

// drawWeight draws 1 for half the draws, else a weight around the current
// capacity, including the invalid and too heavy ones.
func (r *semRun) drawWeight(t *rapid.T) int64 {
	if one := rapid.IntRange(0, 5).Draw(t, "one"); one < 3 || r.fair && one < 4 {
		return 1 // under fair share for two thirds: more waiters, more turns
	}
	return rapid.Int64Range(0, r.m.Capacity()+1).Draw(t, "n")
}

// acquire starts a blocking Acquire, with a context that can be cancelled
// or, for some, with context.Background (which only Close, a grant or the
// max wait ends). With priorities it is an Acquire with a drawn
// priority (the bounds included), or for some a plain Acquire, which
// waits at priority 0; with fair share, of a drawn group, or a plain
// Acquire, which waits in the group "".
func (r *semRun) acquire(t *rapid.T) {
	n := r.drawWeight(t)
	background := rapid.IntRange(0, 3).Draw(t, "background") == 0
	var turn model.Turn
	plain := rapid.Bool().Draw(t, "plain") // else Acquire with the options of a drawn turn, none on FIFO
	if r.step != 0 {
		small := rapid.IntRange(-2, 2)
		turn.Priority = rapid.OneOf(small, small, small,
			rapid.SampledFrom([]int{-call.MaxPriority, call.MaxPriority})).Draw(t, "priority")
		plain = plain && turn.Priority == 0
	}
	if r.fair {
		turn.Group = rapid.SampledFrom(fairGroups).Draw(t, "group")
		plain = plain && turn.Group == ""
	}
	if len(r.waiting) >= maxWaiters {
		skip(t, r.fuzz, "enough waiters")
		return
	}
	id, queued, want := r.m.AcquireTurn(n, turn)
	r.logf("acquire#%d(%d, %+v) [background=%v plain=%v]: queued=%v %v", id, n, turn, background, plain, queued, want)
	r.weights[id] = n
	ctx, cancel := context.Background(), context.CancelFunc(nil)
	if !background {
		ctx, cancel = context.WithCancel(ctx)
	}
	r.running++
	go func() {
		var p semaphore.Permit
		var err error
		if plain {
			p, err = r.s.Acquire(ctx, n)
		} else {
			p, err = r.s.Acquire(ctx, n, optsOf(turn)...)
		}
		r.results <- semServed{id, p, err}
	}()
	if !queued {
		got := r.receive(func() string {
			if st := r.s.Stats(); st.Waiters > r.m.Stats().Waiters {
				return fmt.Sprintf("acquire#%d(%d) waits where the model answers %v at once", id, n, want)
			}
			return ""
		})
		if got.id != id {
			r.fatalf("waiter %d returned while acquire#%d should have answered at once", got.id, id)
		}
		r.expect(got, want)
		if want == model.OK {
			r.cancels[id] = cancel
		} else if cancel != nil {
			cancel()
		}
		return
	}
	r.waiting[id] = cancel
	wantWaiters := r.m.Stats().Waiters
	r.spin(fmt.Sprintf("acquire#%d to queue", id), func() bool {
		if len(r.results) > 0 {
			got := <-r.results
			r.running--
			r.fatalf("acquire#%d returned (weight %d, %v) where the model queues it", got.id, got.p.Weight(), got.err)
		}
		if r.maxWait > 0 && r.clk.Pending() < wantWaiters {
			return false // queued, but its max-wait timer is not armed yet
		}
		return r.s.Stats().Waiters == wantWaiters
	})
	if r.maxWait > 0 {
		r.deadlines[id] = r.clk.Now().Add(r.maxWait)
	}
	if r.clk != nil {
		r.tick()
	}
}

// tick moves the fake clock on a little after a waiter queued (and armed
// its timer), so that the next waiter's deadline and arrival differ,
// without reaching any deadline.
func (r *semRun) tick() {
	step := time.Second
	for _, w := range r.m.Queue() {
		if d := r.deadlines[w.ID].Sub(r.clk.Now()) / 2; r.maxWait > 0 && d < step {
			step = d
		}
	}
	if step > 0 {
		r.advanceClock(step)
	}
}

// advanceClock moves the fake clock and the model's on by d.
func (r *semRun) advanceClock(d time.Duration) {
	r.clk.Advance(d)
	r.m.Advance(d)
}

// badTurn calls Acquire with options the semaphore must refuse at once:
// a field without its option, or a priority out of range. Nothing is
// taken, and the refusal counts in Rejected.
func (r *semRun) badTurn(t *rapid.T) {
	n := r.drawWeight(t)
	bad := []model.Turn{{Sequence: 1}, {Priority: call.MaxPriority + 1}, {Priority: -call.MaxPriority - 1}}
	if !r.fair {
		bad = append(bad, model.Turn{Group: "tenant"})
	}
	if r.step == 0 {
		bad = append(bad, model.Turn{Priority: 1}, model.Turn{Priority: -1})
	}
	turn := rapid.SampledFrom(bad).Draw(t, "turn")
	_, queued, want := r.m.AcquireTurn(n, turn)
	r.logf("badTurn(%d, %+v): %v", n, turn, want)
	if queued || want != model.InvalidTurn {
		r.fatalf("the model takes Turn %+v: queued=%v %v", turn, queued, want)
	}
	p, err := r.s.Acquire(context.Background(), n, optsOf(turn)...)
	if !errors.Is(err, semaphore.ErrInvalidConfig) || p.Weight() != 0 {
		r.fatalf("Acquire(%d, %+v) = (valid %v, %v), want an error wrapping ErrInvalidConfig", n, turn, p.Weight() != 0, err)
	}
}

// age moves the clock on by quarters of the aging step, so that waiters
// of lower priority catch up with those above; with a max wait, those
// whose wait ends in between time out, as in advance.
func (r *semRun) age(t *rapid.T) {
	if r.step == 0 {
		skip(t, r.fuzz, "no priorities")
		return
	}
	r.advanceBy(time.Duration(rapid.IntRange(0, 12).Draw(t, "quarters")) * r.step / 4)
}

// acquireDone calls Acquire with a context that has already ended.
func (r *semRun) acquireDone(t *rapid.T) {
	n := r.drawWeight(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want := r.m.AcquireDone()
	r.logf("acquireDone(%d): %v", n, want)
	p, err := r.s.Acquire(ctx, n)
	if err != semErrOf(want) || p.Weight() != 0 {
		r.fatalf("Acquire(done ctx, %d) = (valid %v, %v), want %v", n, p.Weight() != 0, err, semErrOf(want))
	}
}

func (r *semRun) tryAcquire(t *rapid.T) {
	n := r.drawWeight(t)
	id, want := r.m.TryAcquire(n)
	r.logf("tryAcquire#%d(%d): %v", id, n, want)
	p, ok := r.s.TryAcquire(n)
	if ok != want {
		r.fatalf("TryAcquire(%d) = %v, model says %v", n, ok, want)
	}
	if ok {
		if p.Weight() == 0 || p.Weight() != n {
			r.fatalf("TryAcquire(%d) granted weight %d (valid %v)", n, p.Weight(), p.Weight() != 0)
		}
		r.permits[id] = p
		r.weights[id] = n
	}
}

// fill takes single permits with TryAcquire until one is refused. With a
// capacity past the 14 inline tokens, the grants beyond them take spare tokens,
// whose releases go through the lock.
func (r *semRun) fill(*rapid.T) {
	for range r.m.Capacity() + 1 {
		id, want := r.m.TryAcquire(1)
		r.logf("fill: tryAcquire#%d(1): %v", id, want)
		p, ok := r.s.TryAcquire(1)
		if ok != want {
			r.fatalf("TryAcquire(1) = %v, model says %v", ok, want)
		}
		if !ok {
			return
		}
		r.permits[id] = p
		r.weights[id] = 1
	}
}

func (r *semRun) release(t *rapid.T) {
	id, ok := drawID(t, r.fuzz, r.permits, "no permit out")
	if !ok {
		return
	}
	first, granted := r.m.Release(id)
	r.logf("release#%d (weight %d): grants %v", id, r.weights[id], granted)
	p := r.permits[id]
	delete(r.permits, id)
	r.released[id] = p
	if got := p.Release(); got != first {
		r.fatalf("Release of permit %d = %v, want %v", id, got, first)
	}
	r.collect(granted, 0)
}

func (r *semRun) doubleRelease(t *rapid.T) {
	id, ok := drawID(t, r.fuzz, r.released, "no permit released yet")
	if !ok {
		return
	}
	first, _ := r.m.Release(id)
	r.logf("doubleRelease#%d", id)
	cp := r.released[id] // a copy of the handle
	if cp.Release() != first {
		r.fatalf("second Release of permit %d returned true", id)
	}
}

// cancellable returns the ids of the waiters whose context can end.
func (r *semRun) cancellable() []int {
	var ids []int
	for _, id := range slices.Sorted(maps.Keys(r.waiting)) {
		if r.waiting[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// cancelOne draws a waiter whose context can end and applies its
// cancellation to the model; id 0 if there is none.
func (r *semRun) cancelOne(t *rapid.T) (id int, granted []model.Served) {
	ids := r.cancellable()
	if len(ids) == 0 {
		skip(t, r.fuzz, "nobody waits with a context that can end")
		return 0, nil
	}
	id = rapid.SampledFrom(ids).Draw(t, "waiter")
	granted = r.m.Cancel(id)
	r.logf("cancel#%d: grants %v", id, granted)
	return id, granted
}

func (r *semRun) cancel(t *rapid.T) {
	id, granted := r.cancelOne(t)
	if id == 0 {
		return
	}
	r.waiting[id]()
	r.collect(append([]model.Served{{ID: id, Err: model.Cancelled}}, granted...), id)
}

// oldest returns the oldest waiter if its deadline is its own, for the
// expire actions; id 0 (model ids start at 1) if there is none.
func (r *semRun) oldest(t *rapid.T) (id int, at time.Time) {
	q := r.m.Queue()
	if r.maxWait == 0 || len(q) == 0 {
		skip(t, r.fuzz, "no waiter with a max wait")
		return 0, time.Time{}
	}
	id, at = q[0].ID, r.deadlines[q[0].ID]
	for _, w := range q[1:] {
		if !r.deadlines[w.ID].After(at) {
			skip(t, r.fuzz, "another waiter has the same deadline")
			return 0, time.Time{}
		}
	}
	return id, at
}

// expire moves the fake clock to the oldest waiter's deadline, which no
// other waiter shares.
func (r *semRun) expire(t *rapid.T) {
	id, at := r.oldest(t)
	if id == 0 {
		return
	}
	granted := r.m.Expire(id)
	r.logf("expire#%d: grants %v", id, granted)
	r.advanceClock(at.Sub(r.clk.Now()))
	r.collect(append([]model.Served{{ID: id, Err: model.WaitTooLong}}, granted...), id)
}

// advance moves the fake clock on by a drawn duration, one waiter's
// deadline at a time: each waiter whose max wait ends in between times
// out, and its leaving may grant those behind it.
func (r *semRun) advance(t *rapid.T) {
	if r.maxWait == 0 {
		skip(t, r.fuzz, "no max wait")
		return
	}
	r.advanceBy(time.Duration(rapid.IntRange(0, 16).Draw(t, "eighths")) * r.maxWait / 8)
}

// advanceBy moves the clocks on by by, one waiter's deadline at a time.
func (r *semRun) advanceBy(by time.Duration) {
	end := r.clk.Now().Add(by)
	r.logf("advance(%v)", by)
	for {
		next, at := 0, time.Time{}
		for _, w := range r.m.Queue() {
			if d := r.deadlines[w.ID]; r.maxWait > 0 && !d.After(end) && (next == 0 || d.Before(at)) {
				next, at = w.ID, d
			}
		}
		if next == 0 {
			break
		}
		granted := r.m.Expire(next)
		r.logf("  expire#%d: grants %v", next, granted)
		r.advanceClock(at.Sub(r.clk.Now()))
		r.collect(append([]model.Served{{ID: next, Err: model.WaitTooLong}}, granted...), next)
	}
	r.advanceClock(end.Sub(r.clk.Now()))
}

// cancelThenGrant cancels a waiter and at once, without waiting for it to
// leave, frees permits (a release, or a grow): they may reach the waiter
// before it has seen its context end. Its context ended first, so it must
// fail, and its permits must go where the model, which applies the cancel
// and then the release, sends them; Stats must agree with the model too.
func (r *semRun) cancelThenGrant(t *rapid.T) {
	id, granted := r.cancelOne(t)
	if id == 0 {
		return
	}
	r.endThenGrant(t, id, model.Cancelled, granted, r.waiting[id])
}

// expireThenGrant is cancelThenGrant with the oldest waiter's max wait
// running out.
func (r *semRun) expireThenGrant(t *rapid.T) {
	id, at := r.oldest(t)
	if id == 0 {
		return
	}
	granted := r.m.Expire(id)
	r.logf("expire#%d: grants %v", id, granted)
	r.endThenGrant(t, id, model.WaitTooLong, granted, func() { r.advanceClock(at.Sub(r.clk.Now())) })
}

// endThenGrant ends waiter id's wait (end; the model has applied it and
// granted those in granted), then at once releases a permit or grows the
// capacity, and collects the outcomes.
func (r *semRun) endThenGrant(t *rapid.T, id int, e model.Err, granted []model.Served, end func()) {
	var grant func()
	if ids := slices.Sorted(maps.Keys(r.permits)); len(ids) > 0 && rapid.Bool().Draw(t, "byRelease") {
		pid := rapid.SampledFrom(ids).Draw(t, "permit")
		_, more := r.m.Release(pid)
		r.logf("  then release#%d (weight %d): grants %v", pid, r.weights[pid], more)
		granted = append(granted, more...)
		p := r.permits[pid]
		delete(r.permits, pid)
		r.released[pid] = p
		grant = func() {
			if !p.Release() {
				r.fatalf("first Release of permit %d returned false", pid)
			}
		}
	} else {
		n := rapid.Int64Range(r.m.Capacity(), 21).Draw(t, "grow")
		out := r.m.SetCapacity(n)
		r.logf("  then setCapacity(%d): serves %v", n, out)
		granted = append(granted, out...)
		grant = func() { r.s.SetCapacity(n) }
	}
	end()
	grant()
	r.collect(append([]model.Served{{ID: id, Err: e}}, granted...), id)
}

func (r *semRun) setCapacity(t *rapid.T) {
	n := rapid.Int64Range(0, 21).Draw(t, "capacity")
	out := r.m.SetCapacity(n)
	r.logf("setCapacity(%d): serves %v", n, out)
	r.s.SetCapacity(n)
	r.collect(out, 0)
}

func (r *semRun) close(t *rapid.T) {
	// Close ends the interesting part of a run, so it is drawn rarely.
	if rapid.IntRange(0, 3).Draw(t, "reallyClose") != 0 {
		skip(t, r.fuzz, "not this time")
		return
	}
	failed := r.m.Close()
	r.logf("close: fails %v", failed)
	r.s.Close()
	r.collect(failed, 0)
}

// receive returns the next result of an Acquire goroutine. It fails the
// test if abort, polled while it waits, reports a reason to stop.
func (r *semRun) receive(abort func() string) semServed {
	r.t.Helper()
	var got semServed
	r.spin("an Acquire to return", func() bool {
		select {
		case got = <-r.results:
			r.running--
			return true
		default:
		}
		if abort != nil {
			if why := abort(); why != "" {
				r.fatalf("%s", why)
			}
		}
		return false
	})
	return got
}

// collect receives the results of exactly the waiters the model says the
// last step served, in any order, and checks each. The step decided them
// all under the semaphore's lock before it returned, so Stats must already
// agree with the model: collect compares them first, so that a waiter not
// served fails the test at once instead of being waited for. A waiter that
// left by itself (leaving != 0: cancelled or timed out) decides its
// followers' grants before it returns, so its result is awaited first.
func (r *semRun) collect(want []model.Served, leaving int) {
	r.t.Helper()
	outcome := make(map[int]model.Err, len(want))
	for _, w := range want {
		outcome[w.ID] = w.Err
	}
	take := func(got semServed) {
		r.t.Helper()
		e, ok := outcome[got.id]
		if !ok {
			r.fatalf("waiter %d returned (weight %d, %v); the model serves only %v", got.id, got.p.Weight(), got.err, want)
		}
		delete(outcome, got.id)
		r.expect(got, e)
		cancel := r.waiting[got.id]
		delete(r.waiting, got.id)
		delete(r.deadlines, got.id)
		if e == model.OK {
			r.cancels[got.id] = cancel
		} else if cancel != nil {
			cancel()
		}
	}
	if leaving != 0 {
		for {
			got := r.receive(nil)
			take(got)
			if got.id == leaving {
				break
			}
		}
	}
	r.compareStats()
	for len(outcome) > 0 {
		take(r.receive(nil))
	}
}

// expect checks one Acquire result against the model's outcome, and keeps
// the permit if it was a grant.
func (r *semRun) expect(got semServed, want model.Err) {
	r.t.Helper()
	werr := semErrOf(want)
	if got.err != werr {
		r.fatalf("acquire#%d (weight %d) returned %v, want %v", got.id, r.weights[got.id], got.err, werr)
	}
	if want != model.OK {
		if got.p.Weight() != 0 {
			r.fatalf("acquire#%d failed with %v but returned a permit", got.id, got.err)
		}
		return
	}
	if got.p.Weight() == 0 || got.p.Weight() != r.weights[got.id] {
		r.fatalf("acquire#%d granted weight %d (valid %v), want %d", got.id, got.p.Weight(), got.p.Weight() != 0, r.weights[got.id])
	}
	if _, dup := r.permits[got.id]; dup {
		r.fatalf("acquire#%d granted twice", got.id)
	}
	r.permits[got.id] = got.p
}

// check runs after every step: the model's own invariants hold, no Acquire
// returned that the model did not serve, Stats equal the model's, and the
// permits the driver holds are what the semaphore counts as held.
func (r *semRun) check(*rapid.T) {
	if err := r.m.Check(); err != nil {
		r.fatalf("%v", err)
	}
	if len(r.results) > 0 {
		got := <-r.results
		r.running--
		r.fatalf("acquire#%d returned (weight %d, %v) that the model did not serve", got.id, got.p.Weight(), got.err)
	}
	r.compareStats()
	var held int64
	for _, p := range r.permits {
		held += p.Weight()
	}
	if st := r.s.Stats(); st.Held != held || st.Available+held != st.Capacity {
		r.fatalf("the driver holds weight %d: Held %d, Available %d + %d != Capacity %d", held, st.Held, st.Available, held, st.Capacity)
	}
	if want := r.m.Stats().Waiters; r.maxWait > 0 && r.clk.Pending() != want {
		r.fatalf("%d max-wait timers pending for %d waiters", r.clk.Pending(), want)
	}
}

// compareStats checks the invariant, and every field of Stats against the
// model.
func (r *semRun) compareStats() {
	r.t.Helper()
	got, want := r.s.Stats(), r.m.Stats()
	if got.Available+got.Held != got.Capacity {
		r.fatalf("Available %d + Held %d != Capacity %d", got.Available, got.Held, got.Capacity)
	}
	if got.Held > got.Capacity && want.Available >= 0 {
		r.fatalf("Held %d above Capacity %d without a shrink", got.Held, got.Capacity)
	}
	if g := SemStats(got); g != want { // a new field on one side only stops the build
		r.fatalf("Stats differ from the model\n got %+v\nwant %+v", g, want)
	}
	if got.Timings != (semaphore.Timings{}) {
		r.fatalf("Timings recorded without WithHistograms: %+v", got.Timings)
	}
}

func (r *semRun) spin(what string, cond func() bool) {
	r.t.Helper()
	spin(what, cond, r.fatalf)
}

// cleanup ends every goroutine of the run, pass or fail (or a fuzz input
// that ran out of bytes): Close wakes the waiters, and their results are
// drained; then the permits go back.
func (r *semRun) cleanup() {
	r.s.Close()
	for _, cancel := range r.waiting {
		if cancel != nil {
			cancel()
		}
	}
	for _, cancel := range r.cancels {
		if cancel != nil {
			cancel()
		}
	}
	deadline := time.Now().Add(hang())
	for r.running > 0 && time.Now().Before(deadline) {
		select {
		case got := <-r.results:
			r.running--
			got.p.Release()
		case <-time.After(time.Millisecond):
		}
	}
	if r.running > 0 {
		gaveUp.Store(true) // calls lost: goleak names them at the end
	}
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		r.permits[id].Release()
		delete(r.permits, id)
	}
}

// finish ends a run that passed: Close fails every waiter as the model
// says, every permit is released in id order (so that a failing input
// replays the same way), and then everything is back.
func (r *semRun) finish() {
	failed := r.m.Close()
	r.logf("finish: close fails %v, then release all", failed)
	r.s.Close()
	r.collect(failed, 0)
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		p := r.permits[id]
		first, _ := r.m.Release(id)
		if !p.Release() || !first {
			r.fatalf("final Release of permit %d returned false", id)
		}
		delete(r.permits, id)
		r.released[id] = p
	}
	r.check(r.t)
	st := r.s.Stats()
	if r.running != 0 || len(r.waiting) != 0 || st.Available != st.Capacity || st.Held != 0 || st.Waiters != 0 || st.Acquired != st.Released {
		r.fatalf("not balanced after Close and the releases (%d Acquire calls running, %d waiting): %+v", r.running, len(r.waiting), st)
	}
}
