package modelcheck

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// BargingSUT is what Barging drives: one semaphore made WithBarging (for
// keyedsem, one key of it), with the test-only hooks its package exports
// to its tests. Each method is called from the driver's goroutine except
// Acquire, which runs in a goroutine of its own.
type BargingSUT interface {
	Acquire(ctx context.Context, n int64) (semaphore.Permit, error)
	TryAcquire(n int64) (semaphore.Permit, bool)
	Close()
	// Stats is printed on failure.
	Stats() any
	// Waiters is the number of waiters Stats counts.
	Waiters() int
	// Check compares the semaphore's state with m between steps; held is
	// the weight of the permits the driver holds. nil when they agree.
	Check(m *model.Barging, held int64) error
	// Settled reports whether the semaphore has seen the timers that an
	// advance to m's state fired (the old count, the strict bit).
	Settled(m *model.Barging) bool
	// Balanced reports whether, at the end, every permit went back.
	Balanced() bool
}

// BargingConfig says how Barging drives a BargingSUT.
type BargingConfig struct {
	SUT   BargingSUT
	Model *model.Barging
	Clock *clock.Fake
	Bound time.Duration
	// New is the first step logged (how the semaphore was made).
	New string
	// Closed and Full are the errors of the package for model.Closed and
	// model.QueueFull.
	Closed, Full error
	// SetCapacity, if set, is a step that resizes the semaphore.
	SetCapacity func(n int64)
	// Hang is how long a step waits for a goroutine before failing.
	Hang time.Duration
	// CheckTryWeight makes the driver check the weight of a permit that
	// TryAcquire granted.
	CheckTryWeight bool
	// AdvanceLog describes the model's state after an advance, for the log.
	AdvanceLog func(m *model.Barging) string
	// Fuzz says that the draws come from a fuzz target's bytes (see skip).
	Fuzz bool
}

type bargeServed struct {
	id  int
	p   semaphore.Permit
	err error
}

type bargeRun struct {
	BargingConfig
	t       *rapid.T
	results chan bargeServed
	running int
	waiting map[int]context.CancelFunc
	permits map[int]semaphore.Permit
	weights map[int]int64
	steps   []string
}

// Barging checks random sequences of operations on c.SUT against c.Model:
// the same grants at once (newcomers ahead of young waiters), the same
// waiters served, the same refusals, strict mode as soon as a waiter has
// waited the bound on c.Clock, and after every step the model's invariants,
// c.SUT.Check and one bound's timer per young waiter. A failure prints the
// steps; -rapid.seed replays it.
func Barging(t *rapid.T, c BargingConfig) {
	r := &bargeRun{
		BargingConfig: c,
		t:             t,
		results:       make(chan bargeServed, 256),
		waiting:       make(map[int]context.CancelFunc),
		permits:       make(map[int]semaphore.Permit),
		weights:       make(map[int]int64),
	}
	r.logf("%s", c.New)
	actions := map[string]func(*rapid.T){
		"acquire":      r.acquire,
		"acquireAgain": r.acquire,
		"tryAcquire":   r.tryAcquire,
		"release":      r.release,
		"cancel":       r.cancel,
		"advance":      r.advance,
		"close":        r.close,
		"":             r.check,
	}
	if c.SetCapacity != nil {
		actions["setCapacity"] = r.setCapacity
	}
	drive(t, c.Fuzz, r.cleanup, r.finish, actions)
}

func (r *bargeRun) logf(format string, args ...any) {
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
}

func (r *bargeRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v queue %v old %d",
		fmt.Sprintf(format, args...), strings.Join(r.steps, "\n  "), r.SUT.Stats(), r.Model.Stats(), r.Model.Queue(), r.Model.Old())
}

func (r *bargeRun) spin(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(r.Hang)
	for !cond() {
		if time.Now().After(deadline) {
			r.fatalf("hang: gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func (r *bargeRun) drawWeight(t *rapid.T) int64 {
	if rapid.Bool().Draw(t, "one") {
		return 1
	}
	return rapid.Int64Range(0, r.Model.Capacity()+1).Draw(t, "n")
}

func (r *bargeRun) acquire(t *rapid.T) {
	if len(r.waiting) >= 12 {
		skip(t, r.Fuzz, "enough waiters")
		return
	}
	n := r.drawWeight(t)
	id, queued, want := r.Model.Acquire(n)
	r.logf("acquire#%d(%d): queued=%v %v (strict=%v)", id, n, queued, want, r.Model.Strict())
	r.weights[id] = n
	ctx, cancel := context.WithCancel(context.Background())
	r.running++
	go func() {
		p, err := r.SUT.Acquire(ctx, n)
		r.results <- bargeServed{id, p, err}
	}()
	if !queued {
		got := r.receive()
		if got.id != id {
			r.fatalf("waiter %d returned while acquire#%d should have answered at once", got.id, id)
		}
		r.expect(got, want)
		cancel() // a permit granted stays valid
		return
	}
	r.waiting[id] = cancel
	want2 := r.Model.Stats().Waiters
	r.spin(fmt.Sprintf("acquire#%d to queue", id), func() bool {
		if len(r.results) > 0 {
			got := <-r.results
			r.running--
			r.fatalf("acquire#%d returned (weight %d, %v) where the model queues it", got.id, got.p.Weight(), got.err)
		}
		return r.SUT.Waiters() == want2 && r.Clock.Pending() == want2-r.Model.Old()
	})
}

func (r *bargeRun) tryAcquire(t *rapid.T) {
	n := r.drawWeight(t)
	id, want := r.Model.TryAcquire(n)
	r.logf("tryAcquire#%d(%d): %v", id, n, want)
	p, ok := r.SUT.TryAcquire(n)
	if ok != want {
		r.fatalf("TryAcquire(%d) = %v, model says %v", n, ok, want)
	}
	if ok {
		if r.CheckTryWeight && p.Weight() != n {
			r.fatalf("TryAcquire(%d) granted weight %d", n, p.Weight())
		}
		r.permits[id] = p
		r.weights[id] = n
	}
}

func (r *bargeRun) release(t *rapid.T) {
	ids := slices.Sorted(maps.Keys(r.permits))
	if len(ids) == 0 {
		skip(t, r.Fuzz, "no permit out")
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "permit")
	_, granted := r.Model.Release(id)
	r.logf("release#%d (weight %d): grants %v", id, r.weights[id], granted)
	p := r.permits[id]
	delete(r.permits, id)
	if !p.Release() {
		r.fatalf("first Release of permit %d returned false", id)
	}
	r.collect(granted)
}

func (r *bargeRun) cancel(t *rapid.T) {
	ids := slices.Sorted(maps.Keys(r.waiting))
	if len(ids) == 0 {
		skip(t, r.Fuzz, "nobody waits")
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "waiter")
	granted := r.Model.Cancel(id)
	r.logf("cancel#%d: grants %v", id, granted)
	r.waiting[id]()
	r.collect(append([]model.Served{{ID: id, Err: model.Cancelled}}, granted...))
}

// advance moves both clocks on; waiters whose bound ran out count
// themselves old (nothing is served: in a sequential run the head never
// fits the free permits between steps).
func (r *bargeRun) advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(0, 12).Draw(t, "eighths")) * r.Bound / 8
	r.Model.Advance(d)
	r.logf("advance(%v): %s", d, r.AdvanceLog(r.Model))
	r.Clock.Advance(d)
	r.spin("the semaphore to see the bound's timers", func() bool { return r.SUT.Settled(r.Model) })
}

func (r *bargeRun) setCapacity(t *rapid.T) {
	n := rapid.Int64Range(0, 21).Draw(t, "capacity")
	out := r.Model.SetCapacity(n)
	r.logf("setCapacity(%d): serves %v", n, out)
	r.SetCapacity(n)
	r.collect(out)
}

func (r *bargeRun) close(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "reallyClose") != 0 {
		skip(t, r.Fuzz, "not this time")
		return
	}
	failed := r.Model.Close()
	r.logf("close: fails %v", failed)
	r.SUT.Close()
	r.collect(failed)
}

func (r *bargeRun) receive() bargeServed {
	r.t.Helper()
	var got bargeServed
	r.spin("an Acquire to return", func() bool {
		select {
		case got = <-r.results:
			r.running--
			return true
		default:
			return false
		}
	})
	return got
}

// collect receives the results of exactly the waiters the model says the
// step served, in any order. A woken waiter takes its permits after the
// step returned, so Stats are compared once they are all in (by check).
func (r *bargeRun) collect(want []model.Served) {
	r.t.Helper()
	outcome := make(map[int]model.Err, len(want))
	for _, w := range want {
		outcome[w.ID] = w.Err
	}
	for len(outcome) > 0 {
		got := r.receive()
		e, ok := outcome[got.id]
		if !ok {
			r.fatalf("waiter %d returned (weight %d, %v); the model serves only %v", got.id, got.p.Weight(), got.err, want)
		}
		delete(outcome, got.id)
		r.expect(got, e)
		if cancel := r.waiting[got.id]; cancel != nil {
			cancel() // a permit granted stays valid
		}
		delete(r.waiting, got.id)
	}
}

func (r *bargeRun) expect(got bargeServed, want model.Err) {
	r.t.Helper()
	if werr := errOf(want, r.Closed, r.Full); got.err != werr {
		r.fatalf("acquire#%d (weight %d) returned %v, want %v", got.id, r.weights[got.id], got.err, werr)
	}
	if want != model.OK {
		if got.p.Weight() != 0 {
			r.fatalf("acquire#%d failed with %v but returned a permit", got.id, got.err)
		}
		return
	}
	if got.p.Weight() != r.weights[got.id] {
		r.fatalf("acquire#%d granted weight %d, want %d", got.id, got.p.Weight(), r.weights[got.id])
	}
	r.permits[got.id] = got.p
}

// check runs after every step: the model's invariants, nothing returned
// that the model did not serve, the SUT's own checks (the woken waiters
// of the step have all taken their permits by now: their results are in)
// and one timer per young waiter.
func (r *bargeRun) check(*rapid.T) {
	if err := r.Model.Check(); err != nil {
		r.fatalf("%v", err)
	}
	if len(r.results) > 0 {
		got := <-r.results
		r.running--
		r.fatalf("acquire#%d returned (weight %d, %v) that the model did not serve", got.id, got.p.Weight(), got.err)
	}
	var held int64
	for _, p := range r.permits {
		held += p.Weight()
	}
	if err := r.SUT.Check(r.Model, held); err != nil {
		r.fatalf("%v", err)
	}
	want := r.Model.Stats().Waiters
	if p := r.Clock.Pending(); p != want-r.Model.Old() {
		r.fatalf("%d timers pending for %d waiters, %d of them old", p, want, r.Model.Old())
	}
}

func (r *bargeRun) cleanup() {
	r.SUT.Close()
	for _, c := range r.waiting {
		c()
	}
	deadline := time.Now().Add(r.Hang)
	for r.running > 0 && time.Now().Before(deadline) {
		select {
		case got := <-r.results:
			r.running--
			got.p.Release()
		case <-time.After(time.Millisecond):
		}
	}
	for _, p := range r.permits {
		p.Release()
	}
}

// finish ends a run that passed: Close fails every waiter as the model
// says, every permit goes back, and everything balances.
func (r *bargeRun) finish() {
	failed := r.Model.Close()
	r.SUT.Close()
	r.collect(failed)
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		r.Model.Release(id)
		if !r.permits[id].Release() {
			r.fatalf("final Release of permit %d returned false", id)
		}
		delete(r.permits, id)
	}
	r.check(r.t)
	if r.running != 0 || !r.SUT.Balanced() {
		r.fatalf("not balanced at the end: %+v", r.SUT.Stats())
	}
}

// BargeSeeds are the barging fuzz targets' seed inputs: a few byte
// patterns, each a run of draws that reaches waiters, releases and the
// bound.
func BargeSeeds() [][]byte {
	var seeds [][]byte
	for _, k := range []byte{1, 3, 7, 29} {
		b := make([]byte, 8*96)
		for i := range b {
			b[i] = byte(i)*k + k
		}
		seeds = append(seeds, b)
	}
	return seeds
}
