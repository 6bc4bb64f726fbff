package keyedsem_test

import (
	"context"
	"errors"
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

// idleInModel is the idle timeout of the model runs that keep idle
// entries.
const idleInModel = time.Minute

// hangGuard bounds the wait for a result that must come; it only turns a
// hang into a failure with the steps printed, and is not a speed check.
const hangGuard = time.Minute

// kserved is what one acquire goroutine of the model test returned.
type kserved struct {
	id  int
	p   keyedsem.Permit
	err error
}

// keyedRun drives a real keyed semaphore and a model.Keyed with the same
// operations, one at a time, on a few keys, and checks after each that they
// agree: same grants to the same waiters in FIFO order per key, same
// failures, same entries (an entry with references is never evicted; an
// idle one goes when the policy says), and the same Stats.
//
// Blocking acquires run in goroutines that report on one channel. The test
// waits for each to queue before the next step, so arrival order is the
// order of the steps, and after each step it collects exactly the waiters
// that the model says the step served.
type keyedRun struct {
	t    *rapid.T
	s    *keyedsem.KeyedSemaphore[string]
	m    *model.Keyed[string]
	cfg  model.KeyedConfig
	clk  *clock.Fake
	keys []string

	results  chan kserved
	running  int                        // goroutines whose result is not yet received
	waiting  map[int]context.CancelFunc // queued waiters by id
	permits  map[int]keyedsem.Permit    // permits out by id
	released map[int]keyedsem.Permit    // permits released, for double and stale releases
	weights  map[int]int64
	log      []string
}

// TestKeyedMatchesModel checks random sequences of operations against the
// sequential model. A failure prints the steps and the seed; -rapid.seed
// replays it, and -rapid.checks=1000 -rapid.steps=100 searches longer.
func TestKeyedMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := newKeyedRun(rt)
		defer r.cleanup()
		rt.Repeat(map[string]func(*rapid.T){
			"acquire":       r.acquire,
			"acquireAgain":  r.acquire, // blocking acquires twice as often
			"acquireDone":   r.acquireDone,
			"tryAcquire":    r.tryAcquire,
			"release":       r.release,
			"releaseAgain":  r.release,
			"doubleRelease": r.doubleRelease,
			"cancel":        r.cancel,
			"sweep":         r.sweep,
			"advance":       r.advance,
			"close":         r.close,
			"":              r.check,
		})
		r.finish()
	})
}

func newKeyedRun(t *rapid.T) *keyedRun {
	cfg := model.KeyedConfig{
		Capacity:         rapid.Int64Range(1, 3).Draw(t, "capacity"),
		IdleTimeout:      rapid.SampledFrom([]time.Duration{0, idleInModel}).Draw(t, "idleTimeout"),
		MaxKeys:          rapid.IntRange(1, 4).Draw(t, "maxKeys"),
		Hard:             rapid.Bool().Draw(t, "hard"),
		MaxWaitersPerKey: rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 3)).Draw(t, "maxWaitersPerKey"),
	}
	nkeys := rapid.IntRange(1, 6).Draw(t, "keys")
	r := &keyedRun{
		t:        t,
		cfg:      cfg,
		m:        model.NewKeyed[string](cfg),
		clk:      clock.NewFake(time.Unix(0, 0)),
		results:  make(chan kserved, 1024),
		waiting:  map[int]context.CancelFunc{},
		permits:  map[int]keyedsem.Permit{},
		released: map[int]keyedsem.Permit{},
		weights:  map[int]int64{},
	}
	for i := range nkeys {
		r.keys = append(r.keys, fmt.Sprintf("k%d", i))
	}
	opts := []keyedsem.Option{
		keyedsem.WithPerKeyCapacity(cfg.Capacity),
		keyedsem.WithIdleTimeout(cfg.IdleTimeout),
		keyedsem.WithMaxKeys(cfg.MaxKeys),
		keyedsem.WithMaxWaitersPerKey(cfg.MaxWaitersPerKey),
		keyedsem.WithClock(r.clk),
	}
	if cfg.Hard {
		opts = append(opts, keyedsem.WithHardMaxKeys())
	}
	r.s = keyedsem.New[string](opts...)
	return r
}

func keyedErrOf(e model.Err) error {
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
	case model.TooManyKeys:
		return keyedsem.ErrTooManyKeys
	}
	panic(fmt.Sprintf("unknown model outcome %v", e))
}

func (r *keyedRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *keyedRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.log, "\n  "))
}

func (r *keyedRun) recv() kserved {
	r.t.Helper()
	select {
	case res := <-r.results:
		r.running--
		return res
	case <-time.After(hangGuard):
		r.fatalf("no acquire returned within %v", hangGuard)
		panic("unreachable")
	}
}

// collect receives the results of the goroutines that the model says the
// step ended, each with the error it must have.
func (r *keyedRun) collect(want map[int]error) {
	r.t.Helper()
	for range len(want) {
		res := r.recv()
		werr, ok := want[res.id]
		if !ok {
			r.fatalf("acquire %d returned (%v), the model did not end it", res.id, res.err)
		}
		delete(want, res.id)
		if !errors.Is(res.err, werr) || (werr == nil) != (res.err == nil) {
			r.fatalf("acquire %d: got error %v, want %v", res.id, res.err, werr)
		}
		delete(r.waiting, res.id)
		if res.err == nil {
			if res.p.Weight() != r.weights[res.id] {
				r.fatalf("acquire %d: weight %d, want %d", res.id, res.p.Weight(), r.weights[res.id])
			}
			r.permits[res.id] = res.p
		}
	}
}

func (r *keyedRun) served(granted []model.Served) map[int]error {
	want := map[int]error{}
	for _, g := range granted {
		want[g.ID] = keyedErrOf(g.Err)
	}
	return want
}

func (r *keyedRun) drawKey(t *rapid.T) string { return rapid.SampledFrom(r.keys).Draw(t, "key") }

func (r *keyedRun) drawWeight(t *rapid.T) int64 {
	return rapid.OneOf(
		rapid.Int64Range(1, r.cfg.Capacity),
		rapid.Int64Range(1, r.cfg.Capacity),
		rapid.Int64Range(-1, r.cfg.Capacity+1),
	).Draw(t, "n")
}

func (r *keyedRun) acquire(t *rapid.T) {
	key, n := r.drawKey(t), r.drawWeight(t)
	id, queued, merr := r.m.Acquire(key, n)
	r.logf("acquire(%s, %d) -> id %d queued=%v %v", key, n, id, queued, merr)
	tag := id
	if merr != model.OK {
		tag = -1
	}
	r.weights[tag] = n
	ctx, cancel := context.WithCancel(context.Background())
	r.running++
	go func() {
		p, err := r.s.AcquireN(ctx, key, n)
		r.results <- kserved{tag, p, err}
	}()
	if !queued {
		r.collect(map[int]error{tag: keyedErrOf(merr)})
		cancel()
		return
	}
	r.waiting[id] = cancel
	want := r.m.Stats().Waiters
	for r.s.Stats().Waiters != want {
		select {
		case res := <-r.results:
			r.running--
			r.fatalf("acquire %d returned (%v) instead of queueing", res.id, res.err)
		default:
		}
		runtime.Gosched()
	}
}

func (r *keyedRun) acquireDone(t *rapid.T) {
	key := r.drawKey(t)
	r.m.AcquireDone()
	r.logf("acquireDone(%s)", key)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.s.Acquire(ctx, key); !errors.Is(err, context.Canceled) {
		r.fatalf("acquire with a done context: %v, want context.Canceled", err)
	}
}

func (r *keyedRun) tryAcquire(t *rapid.T) {
	key, n := r.drawKey(t), r.drawWeight(t)
	id, ok := r.m.TryAcquire(key, n)
	r.logf("tryAcquire(%s, %d) -> id %d %v", key, n, id, ok)
	p, got := r.s.TryAcquireN(key, n)
	if got != ok {
		r.fatalf("TryAcquireN(%s, %d) = %v, model says %v", key, n, got, ok)
	}
	if ok {
		r.weights[id] = n
		r.permits[id] = p
	}
}

func (r *keyedRun) release(t *rapid.T) {
	if len(r.permits) == 0 {
		t.Skip("no permit out")
	}
	id := rapid.SampledFrom(slices.Sorted(maps.Keys(r.permits))).Draw(t, "permit")
	p := r.permits[id]
	first, granted := r.m.Release(id)
	r.logf("release(%d) -> %v, served %v", id, first, granted)
	if got := p.Release(); got != first {
		r.fatalf("Release of %d = %v, model says %v", id, got, first)
	}
	delete(r.permits, id)
	r.released[id] = p
	r.collect(r.served(granted))
}

// doubleRelease releases a permit again, through the copy kept at its
// first release. Its token may serve another grant by now: the release
// must still do nothing (the Stats check catches a freed grant).
func (r *keyedRun) doubleRelease(t *rapid.T) {
	if len(r.released) == 0 {
		t.Skip("no permit released")
	}
	id := rapid.SampledFrom(slices.Sorted(maps.Keys(r.released))).Draw(t, "permit")
	first, _ := r.m.Release(id)
	r.logf("release(%d) again", id)
	if got := r.released[id].Release(); got || first {
		r.fatalf("second Release of %d = %v (model %v), want false", id, got, first)
	}
}

func (r *keyedRun) cancel(t *rapid.T) {
	if len(r.waiting) == 0 {
		t.Skip("nobody waiting")
	}
	id := rapid.SampledFrom(slices.Sorted(maps.Keys(r.waiting))).Draw(t, "waiter")
	granted := r.m.Cancel(id)
	r.logf("cancel(%d), served %v", id, granted)
	r.waiting[id]()
	want := r.served(granted)
	want[id] = context.Canceled
	r.collect(want)
}

func (r *keyedRun) sweep(*rapid.T) {
	want := r.m.Sweep()
	r.logf("sweep -> %d", want)
	if got := r.s.Sweep(); got != want {
		r.fatalf("Sweep evicted %d, model %d", got, want)
	}
}

func (r *keyedRun) advance(t *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{time.Second, idleInModel / 2, idleInModel}).Draw(t, "d")
	r.logf("advance(%v)", d)
	r.clk.Advance(d)
	r.m.Advance(d)
}

func (r *keyedRun) close(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "closeNow") != 0 {
		t.Skip("close is rare")
	}
	failed := r.m.Close()
	r.logf("close, failed %v", failed)
	r.s.Close()
	r.collect(r.served(failed))
}

func (r *keyedRun) check(*rapid.T) {
	select {
	case res := <-r.results:
		r.running--
		r.fatalf("acquire %d returned (%v) unasked", res.id, res.err)
	default:
	}
	if err := r.m.Reconcile(r.keys, func(k string) bool { return keyedsem.Has(r.s, k) }); err != nil {
		r.fatalf("entries: %v", err)
	}
	if err := r.m.Check(); err != nil {
		r.fatalf("model: %v", err)
	}
	got, want := r.s.Stats(), r.m.Stats()
	if g := model.KeyedStats(got); g != want { // a new field on one side only stops the build
		r.fatalf("Stats\n got %+v\nwant %+v", g, want)
	}
	if r.s.Len() != r.m.Len() || r.s.Len() < r.m.Referenced() {
		r.fatalf("Len %d, model %d with %d referenced", r.s.Len(), r.m.Len(), r.m.Referenced())
	}
	if got.Acquired-got.Released != uint64(len(r.permits)) {
		r.fatalf("Acquired-Released = %d, %d permits out", got.Acquired-got.Released, len(r.permits))
	}
}

// finish releases everything and checks that the entries go as the policy
// says: at once with idle timeout 0, by the first Sweep after the timeout
// otherwise (if normal use has not expired them already).
func (r *keyedRun) finish() {
	for _, id := range slices.Sorted(maps.Keys(r.waiting)) {
		if !r.m.Waiting(id) {
			continue
		}
		granted := r.m.Cancel(id)
		r.waiting[id]()
		want := r.served(granted)
		want[id] = context.Canceled
		r.collect(want)
	}
	for len(r.permits) > 0 {
		id := slices.Sorted(maps.Keys(r.permits))[0]
		_, granted := r.m.Release(id)
		r.permits[id].Release()
		delete(r.permits, id)
		r.collect(r.served(granted))
	}
	r.check(r.t)
	if r.cfg.IdleTimeout > 0 {
		r.clk.Advance(r.cfg.IdleTimeout)
		r.m.Advance(r.cfg.IdleTimeout)
		if got, want := r.s.Sweep(), r.m.Sweep(); got != want {
			r.fatalf("final Sweep evicted %d, model %d", got, want)
		}
	}
	if n := r.s.Len(); n != 0 {
		r.fatalf("Len %d after everything was released and swept", n)
	}
	r.check(r.t)
}

// cleanup ends every goroutine the run started, also after a failure.
func (r *keyedRun) cleanup() {
	r.s.Close()
	for _, cancel := range r.waiting {
		cancel()
	}
	for r.running > 0 {
		<-r.results
		r.running--
	}
}
