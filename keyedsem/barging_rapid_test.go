package keyedsem_test

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
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingKeyMatchesModel checks random sequences of operations on one
// key of a keyed semaphore made WithBarging against model.Barging (a key
// is a semaphore of the per-key capacity): the same grants at once
// (newcomers ahead of the key's young waiters), the same waiters served,
// the same refusals, strict hand-off as soon as a waiter has waited the
// bound on the fake clock, and after every step the counters, Held,
// Waiters, the key's strict bit and one bound's timer per waiter.
func TestBargingKeyMatchesModel(t *testing.T) { rapid.Check(t, keyBargingProperty) }

// FuzzBargingKeyMatchesModel runs TestBargingKeyMatchesModel's driver on the
// fuzzer's bytes (rapid's draws, eight bytes a draw). It lives beside the
// driver, not in package fuzz, because the driver checks the barging state
// through this package's test hooks; the seeds run with go test.
func FuzzBargingKeyMatchesModel(f *testing.F) {
	for _, seed := range bargeSeeds() {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(keyBargingProperty))
}

func keyBargingProperty(t *rapid.T) {
	r := newKeyBargeRun(t)
	defer r.cleanup()
	t.Repeat(map[string]func(*rapid.T){
		"acquire":      r.acquire,
		"acquireAgain": r.acquire,
		"tryAcquire":   r.tryAcquire,
		"release":      r.release,
		"cancel":       r.cancel,
		"advance":      r.advance,
		"close":        r.close,
		"":             r.check,
	})
	r.finish()
}

const bKey = "k"

type kbServed struct {
	id  int
	p   keyedsem.Permit
	err error
}

type keyBargeRun struct {
	t       *rapid.T
	s       *keyedsem.Keyed[string]
	m       *model.Barging
	clk     *clock.Fake
	bound   time.Duration
	results chan kbServed
	running int
	waiting map[int]context.CancelFunc
	permits map[int]keyedsem.Permit
	weights map[int]int64
	steps   []string
}

func newKeyBargeRun(t *rapid.T) *keyBargeRun {
	capacity := rapid.Int64Range(1, 8).Draw(t, "capacity")
	maxWaiters := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "maxWaiters")
	idle := rapid.SampledFrom([]time.Duration{0, time.Hour}).Draw(t, "idle")
	bound := time.Second
	r := &keyBargeRun{
		t:       t,
		m:       model.NewBarging(capacity, maxWaiters, 0, bound),
		clk:     newFake(),
		bound:   bound,
		results: make(chan kbServed, 256),
		waiting: make(map[int]context.CancelFunc),
		permits: make(map[int]keyedsem.Permit),
		weights: make(map[int]int64),
	}
	r.s = keyedsem.New[string](keyedsem.WithPerKeyCapacity(capacity), keyedsem.WithMaxWaitersPerKey(maxWaiters),
		keyedsem.WithIdleTimeout(idle), keyedsem.WithBarging(bound), keyedsem.WithClock(r.clk))
	r.logf("New(capacity %d, maxWaiters %d, idle %v, WithBarging(%v))", capacity, maxWaiters, idle, bound)
	return r
}

func (r *keyBargeRun) logf(format string, args ...any) {
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
}

func (r *keyBargeRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v queue %v old %d",
		fmt.Sprintf(format, args...), strings.Join(r.steps, "\n  "), r.s.Stats(), r.m.Stats(), r.m.Queue(), r.m.Old())
}

func (r *keyBargeRun) spin(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.fatalf("hang: gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func (r *keyBargeRun) drawWeight(t *rapid.T) int64 {
	if rapid.Bool().Draw(t, "one") {
		return 1
	}
	return rapid.Int64Range(0, r.m.Capacity()+1).Draw(t, "n")
}

func (r *keyBargeRun) acquire(t *rapid.T) {
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
		p, err := r.s.AcquireN(ctx, bKey, n)
		r.results <- kbServed{id, p, err}
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

func (r *keyBargeRun) tryAcquire(t *rapid.T) {
	n := r.drawWeight(t)
	id, want := r.m.TryAcquire(n)
	r.logf("tryAcquire#%d(%d): %v", id, n, want)
	p, ok := r.s.TryAcquireN(bKey, n)
	if ok != want {
		r.fatalf("TryAcquireN(%d) = %v, model says %v", n, ok, want)
	}
	if ok {
		r.permits[id] = p
		r.weights[id] = n
	}
}

func (r *keyBargeRun) release(t *rapid.T) {
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

func (r *keyBargeRun) cancel(t *rapid.T) {
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

func (r *keyBargeRun) advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(0, 12).Draw(t, "eighths")) * r.bound / 8
	r.m.Advance(d)
	r.logf("advance(%v): strict %v", d, r.m.Strict())
	r.clk.Advance(d)
	if want := r.m.Strict(); !r.m.IsClosed() { // after Close the bit is not looked at
		r.spin("the key to go strict", func() bool { return keyedsem.BargingStrict(r.s, bKey) == want })
	}
}

func (r *keyBargeRun) close(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "reallyClose") != 0 {
		t.Skip("not this time")
	}
	failed := r.m.Close()
	r.logf("close: fails %v", failed)
	r.s.Close()
	r.collect(failed)
}

func (r *keyBargeRun) receive() kbServed {
	r.t.Helper()
	var got kbServed
	r.spin("an AcquireN to return", func() bool {
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

func (r *keyBargeRun) collect(want []model.Served) {
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

func keyErrOf(e model.Err) error {
	switch e {
	case model.OK:
		return nil
	case model.InvalidWeight:
		return semaphore.ErrInvalidWeight
	case model.TooHeavy:
		return semaphore.ErrTooHeavy
	case model.Closed:
		return keyedsem.ErrClosed
	case model.QueueFull:
		return keyedsem.ErrQueueFull
	case model.Cancelled:
		return context.Canceled
	}
	panic(fmt.Sprintf("unexpected model outcome %v", e))
}

func (r *keyBargeRun) expect(got kbServed, want model.Err) {
	r.t.Helper()
	if werr := keyErrOf(want); got.err != werr {
		r.fatalf("acquire#%d (weight %d) returned %v, want %v", got.id, r.weights[got.id], got.err, werr)
	}
	if want != model.OK {
		if got.p.Valid() {
			r.fatalf("acquire#%d failed but returned a permit", got.id)
		}
		return
	}
	if got.p.Weight() != r.weights[got.id] {
		r.fatalf("acquire#%d granted weight %d, want %d", got.id, got.p.Weight(), r.weights[got.id])
	}
	r.permits[got.id] = got.p
}

func (r *keyBargeRun) check(*rapid.T) {
	if err := r.m.Check(); err != nil {
		r.fatalf("%v", err)
	}
	if len(r.results) > 0 {
		got := <-r.results
		r.running--
		r.fatalf("acquire#%d returned (weight %d, %v) that the model did not serve", got.id, got.p.Weight(), got.err)
	}
	got, want := r.s.Stats(), r.m.Stats()
	if got.Counters != want.Counters || got.Held != want.Held || got.Waiters != want.Waiters || got.Closed != want.Closed {
		r.fatalf("Stats differ from the model\n got %+v\nwant %+v", got, want)
	}
	if !want.Closed {
		if s := keyedsem.BargingStrict(r.s, bKey); s != r.m.Strict() {
			r.fatalf("the key is strict: %v; the model: %v", s, r.m.Strict())
		}
	}
	if p := r.clk.Pending(); p != want.Waiters-r.m.Old() {
		r.fatalf("%d timers pending for %d waiters, %d of them old", p, want.Waiters, r.m.Old())
	}
}

func (r *keyBargeRun) cleanup() {
	r.s.Close()
	for _, c := range r.waiting {
		c()
	}
	deadline := time.Now().Add(hangGuard)
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

func (r *keyBargeRun) finish() {
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
	if st := r.s.Stats(); r.running != 0 || st.Held != 0 || st.Acquired != st.Released {
		r.fatalf("not balanced at the end: %+v", st)
	}
}

// bargeSeeds are the fuzz target's seed inputs: a few byte patterns, each
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
