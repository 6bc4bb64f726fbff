package semaphore_test

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingMatchesModel checks random sequences of operations on a
// semaphore made WithBarging against model.Barging: the same grants at
// once (newcomers ahead of young waiters), the same waiters served (in
// FIFO order once woken or handed off), the same refusals, strict mode as
// soon as a waiter has waited the bound on the fake clock, and after every
// step Stats field by field, Available+Held == Capacity, the old waiters'
// count and one bound's timer per waiter. A failure prints the steps;
// -rapid.seed replays it.
func TestBargingMatchesModel(t *testing.T) { rapid.Check(t, bargingProperty) }

// FuzzBargingMatchesModel runs TestBargingMatchesModel's driver on the
// fuzzer's bytes (rapid's draws, eight bytes a draw). It lives beside the
// driver, not in package fuzz, because the driver checks the barging state
// through this package's test hooks; the seeds run with go test.
func FuzzBargingMatchesModel(f *testing.F) {
	for _, seed := range bargeSeeds() {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(bargingProperty))
}

func bargingProperty(t *rapid.T) {
	r := newBargeRun(t)
	defer r.cleanup()
	t.Repeat(map[string]func(*rapid.T){
		"acquire":      r.acquire,
		"acquireAgain": r.acquire,
		"tryAcquire":   r.tryAcquire,
		"release":      r.release,
		"cancel":       r.cancel,
		"advance":      r.advance,
		"setCapacity":  r.setCapacity,
		"close":        r.close,
		"":             r.check,
	})
	r.finish()
}

type bargeRun struct {
	t       *rapid.T
	s       *semaphore.Weighted
	m       *model.Barging
	clk     *clock.Fake
	bound   time.Duration
	results chan semServedT
	running int
	waiting map[int]context.CancelFunc
	permits map[int]semaphore.Permit
	weights map[int]int64
	steps   []string
}

type semServedT struct {
	id  int
	p   semaphore.Permit
	err error
}

func newBargeRun(t *rapid.T) *bargeRun {
	capacity := rapid.Int64Range(0, 20).Draw(t, "capacity")
	maxWaiters := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "maxWaiters")
	bound := time.Second
	r := &bargeRun{
		t:       t,
		m:       model.NewBarging(capacity, maxWaiters, 0, bound),
		clk:     clock.NewFake(time.Unix(1_700_000_000, 0)),
		bound:   bound,
		results: make(chan semServedT, 256),
		waiting: make(map[int]context.CancelFunc),
		permits: make(map[int]semaphore.Permit),
		weights: make(map[int]int64),
	}
	r.s = semaphore.New(capacity, semaphore.WithMaxWaiters(maxWaiters),
		semaphore.WithBarging(bound), semaphore.WithClock(r.clk))
	r.logf("New(%d, maxWaiters=%d, WithBarging(%v))", capacity, maxWaiters, bound)
	return r
}

func (r *bargeRun) logf(format string, args ...any) {
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
}

func (r *bargeRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v queue %v old %d",
		fmt.Sprintf(format, args...), strings.Join(r.steps, "\n  "), r.s.Stats(), r.m.Stats(), r.m.Queue(), r.m.Old())
}

func (r *bargeRun) spin(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
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
	return rapid.Int64Range(0, r.m.Capacity()+1).Draw(t, "n")
}

func (r *bargeRun) acquire(t *rapid.T) {
	if len(r.waiting) >= 12 {
		t.Skip("enough waiters")
	}
	n := r.drawWeight(t)
	id, queued, want := r.m.Acquire(n)
	r.logf("acquire#%d(%d): queued=%v %v (strict=%v)", id, n, queued, want, r.m.Strict())
	r.weights[id] = n
	ctx, cancel := context.WithCancel(context.Background())
	r.running++
	go func() {
		p, err := r.s.Acquire(ctx, n)
		r.results <- semServedT{id, p, err}
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
	want2 := r.m.Stats().Waiters
	r.spin(fmt.Sprintf("acquire#%d to queue", id), func() bool {
		if len(r.results) > 0 {
			got := <-r.results
			r.running--
			r.fatalf("acquire#%d returned (weight %d, %v) where the model queues it", got.id, got.p.Weight(), got.err)
		}
		return r.s.Stats().Waiters == want2 && r.clk.Pending() == want2-r.m.Old()
	})
}

func (r *bargeRun) tryAcquire(t *rapid.T) {
	n := r.drawWeight(t)
	id, want := r.m.TryAcquire(n)
	r.logf("tryAcquire#%d(%d): %v", id, n, want)
	p, ok := r.s.TryAcquire(n)
	if ok != want {
		r.fatalf("TryAcquire(%d) = %v, model says %v", n, ok, want)
	}
	if ok {
		if p.Weight() != n {
			r.fatalf("TryAcquire(%d) granted weight %d", n, p.Weight())
		}
		r.permits[id] = p
		r.weights[id] = n
	}
}

func (r *bargeRun) release(t *rapid.T) {
	ids := slices.Sorted(maps.Keys(r.permits))
	if len(ids) == 0 {
		t.Skip("no permit out")
	}
	id := rapid.SampledFrom(ids).Draw(t, "permit")
	_, granted := r.m.Release(id)
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
		t.Skip("nobody waits")
	}
	id := rapid.SampledFrom(ids).Draw(t, "waiter")
	granted := r.m.Cancel(id)
	r.logf("cancel#%d: grants %v", id, granted)
	r.waiting[id]()
	r.collect(append([]model.Served{{ID: id, Err: model.Cancelled}}, granted...))
}

// advance moves both clocks on; waiters whose bound ran out count
// themselves old (nothing is served: in a sequential run the head never
// fits the free permits between steps).
func (r *bargeRun) advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(0, 12).Draw(t, "eighths")) * r.bound / 8
	r.m.Advance(d)
	r.logf("advance(%v): old %d", d, r.m.Old())
	r.clk.Advance(d)
	want := r.m.Old()
	r.spin("the old waiters to count themselves", func() bool { return semaphore.BargingOld(r.s) == want })
}

func (r *bargeRun) setCapacity(t *rapid.T) {
	n := rapid.Int64Range(0, 21).Draw(t, "capacity")
	out := r.m.SetCapacity(n)
	r.logf("setCapacity(%d): serves %v", n, out)
	r.s.SetCapacity(n)
	r.collect(out)
}

func (r *bargeRun) close(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "reallyClose") != 0 {
		t.Skip("not this time")
	}
	failed := r.m.Close()
	r.logf("close: fails %v", failed)
	r.s.Close()
	r.collect(failed)
}

func (r *bargeRun) receive() semServedT {
	r.t.Helper()
	var got semServedT
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

func (r *bargeRun) expect(got semServedT, want model.Err) {
	r.t.Helper()
	werr := bargeErrOf(want)
	if got.err != werr {
		r.fatalf("acquire#%d (weight %d) returned %v, want %v", got.id, r.weights[got.id], got.err, werr)
	}
	if want != model.OK {
		if got.p.Valid() {
			r.fatalf("acquire#%d failed with %v but returned a permit", got.id, got.err)
		}
		return
	}
	if got.p.Weight() != r.weights[got.id] {
		r.fatalf("acquire#%d granted weight %d, want %d", got.id, got.p.Weight(), r.weights[got.id])
	}
	r.permits[got.id] = got.p
}

func bargeErrOf(e model.Err) error {
	switch e {
	case model.OK:
		return nil
	case model.InvalidWeight:
		return semaphore.ErrInvalidWeight
	case model.TooHeavy:
		return semaphore.ErrTooHeavy
	case model.Closed:
		return semaphore.ErrClosed
	case model.QueueFull:
		return semaphore.ErrQueueFull
	case model.Cancelled:
		return context.Canceled
	}
	panic(fmt.Sprintf("unexpected model outcome %v", e))
}

// check runs after every step: the model's invariants, nothing returned
// that the model did not serve, Stats equal the model's (the woken
// waiters of the step have all taken their permits by now: their results
// are in), the old count, one timer per waiter, and the permits held.
func (r *bargeRun) check(*rapid.T) {
	if err := r.m.Check(); err != nil {
		r.fatalf("%v", err)
	}
	if len(r.results) > 0 {
		got := <-r.results
		r.running--
		r.fatalf("acquire#%d returned (weight %d, %v) that the model did not serve", got.id, got.p.Weight(), got.err)
	}
	got, want := r.s.Stats(), r.m.Stats()
	if got.Available+got.Held != got.Capacity {
		r.fatalf("Available %d + Held %d != Capacity %d", got.Available, got.Held, got.Capacity)
	}
	if model.SemStats(got) != want {
		r.fatalf("Stats differ from the model\n got %+v\nwant %+v", got, want)
	}
	if o := semaphore.BargingOld(r.s); o != r.m.Old() {
		r.fatalf("%d waiters count themselves old; the model has %d", o, r.m.Old())
	}
	if semaphore.BargingWoken(r.s) {
		r.fatalf("a waiter is still woken between steps")
	}
	if p := r.clk.Pending(); p != want.Waiters-r.m.Old() {
		r.fatalf("%d timers pending for %d waiters, %d of them old", p, want.Waiters, r.m.Old())
	}
	var held int64
	for _, p := range r.permits {
		held += p.Weight()
	}
	if got.Held != held {
		r.fatalf("the driver holds %d, Held is %d", held, got.Held)
	}
}

func (r *bargeRun) cleanup() {
	r.s.Close()
	for _, c := range r.waiting {
		c()
	}
	deadline := time.Now().Add(20 * time.Second)
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
	failed := r.m.Close()
	r.s.Close()
	r.collect(failed)
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		r.m.Release(id)
		if !r.permits[id].Release() {
			r.fatalf("final Release of permit %d returned false", id)
		}
		delete(r.permits, id)
	}
	r.check(r.t)
	if st := r.s.Stats(); r.running != 0 || st.Available != st.Capacity || st.Acquired != st.Released {
		r.fatalf("not balanced at the end: %+v", st)
	}
}

// bargeSeeds are the fuzz targets' seed inputs: a few byte patterns, each
// a run of draws that reaches waiters, releases and the bound.
func bargeSeeds() [][]byte {
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
