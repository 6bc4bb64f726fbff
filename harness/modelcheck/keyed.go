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
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// keyedServed is what one acquire goroutine of the keyed driver returned.
type keyedServed struct {
	id  int
	p   semaphore.Permit
	err error
}

// keyedRun drives a real keyed semaphore and a model.Keyed with the same
// operations, one at a time, on a few keys, and checks after each that they
// agree.
type keyedRun struct {
	t     *rapid.T
	s     *keyedsem.Keyed[string]
	m     *model.Keyed[string]
	cfg   model.KeyedConfig
	clk   *clock.Fake
	keys  []string
	has   func(*keyedsem.Keyed[string], string) bool
	ticks bool // move the clocks on by 1ns after every step: no ties
	close bool // finish by Close, not by cancelling the waiters
	fuzz  bool // see skip

	results  chan keyedServed
	running  int                        // goroutines whose result is not yet received
	waiting  map[int]context.CancelFunc // queued waiters by id; nil: a context that cannot end
	keyOf    map[int]string             // the key of every acquire by id
	permits  map[int]semaphore.Permit   // permits out by id
	released map[int]semaphore.Permit   // permits released, for double and stale releases
	weights  map[int]int64
	journal  // the steps, for failure messages
}

// Keyed returns the driver that checks random sequences of operations on a
// keyedsem.Keyed[string] against model.Keyed: the same grants to
// the same waiters in the same order per key (FIFO, by priority with aging
// on the fake clock, or by sequence, as the case draws the semaphore's
// order), the same refusals of a Turn, the same failures, the same
// entries (an entry with references is never evicted; an idle one goes when
// the policy says), Sweep's count, and the same Stats.
//
// has reports whether the real semaphore has an entry for a key (the
// package's export_test hook); with it, entries that went idle at the same
// instant may tie, and the model adopts the implementation's choice among
// them after checking the count. Without it (nil, as in the fuzz target,
// which cannot see the hook), the clocks move on by 1ns after every step,
// so that no two entries tie, and Stats.Keys shows every entry evicted or
// kept against the policy.
//
// The operations: acquire that may wait (with a context that can be
// cancelled or one that cannot; through Acquire with a drawn turn, now
// and then one whose field the order does not use), acquire with an ended
// context,
// TryAcquire, Release, a second Release, cancel a waiter, Sweep, move the
// clock on, Close. After every step: the model's invariants, no acquire
// returned that the model keeps waiting, Stats field by field, Len, per-key
// exclusion (never more than the per-key capacity out on a key, from the
// permits the driver holds), Acquired-Released == the permits out, no
// entry with references evicted. At the end: Close (or cancel the
// waiters), release every permit in id order, then the entries go as the
// policy says.
//
// Keyed is the driver for rapid.Check; KeyedFuzz is the same, without has,
// for rapid.MakeFuzz (see skip).
func Keyed(has func(*keyedsem.Keyed[string], string) bool) func(*rapid.T) {
	return func(t *rapid.T) { keyedDriver(t, has, false) }
}

// KeyedFuzz is Keyed(nil) for a fuzz target: an operation that cannot run
// in the current state does nothing instead of asking rapid for another.
func KeyedFuzz(t *rapid.T) { keyedDriver(t, nil, true) }

func keyedDriver(t *rapid.T, has func(*keyedsem.Keyed[string], string) bool, fuzz bool) {
	r := newKeyedRun(t, has)
	r.fuzz = fuzz
	drive(t, fuzz, r.cleanup, r.finish, map[string]func(*rapid.T){
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
		"close":         r.closeNow,
		"":              r.check,
	})
}

func newKeyedRun(t *rapid.T, has func(*keyedsem.Keyed[string], string) bool) *keyedRun {
	cfg := model.KeyedConfig{
		Capacity:         rapid.Int64Range(1, 3).Draw(t, "capacity"),
		IdleTimeout:      rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, time.Minute}).Draw(t, "idleTimeout"),
		MaxKeys:          rapid.IntRange(1, 4).Draw(t, "maxKeys"),
		Hard:             rapid.Bool().Draw(t, "hard"),
		MaxWaitersPerKey: rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 3)).Draw(t, "maxWaitersPerKey"),
		Order:            rapid.SampledFrom([]model.KeyedOrder{model.KeyedFIFO, model.KeyedPriorities, model.KeyedSequence, model.KeyedPriorities | model.KeyedSequence}).Draw(t, "order"),
		MaxPriority:      call.MaxPriority,
	}
	if cfg.Order&model.KeyedPriorities != 0 {
		// Steps of the size of the clock's moves, so that aging reorders.
		cfg.Step = rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second}).Draw(t, "step")
	}
	nkeys := rapid.IntRange(1, 6).Draw(t, "keys")
	r := &keyedRun{
		t:        t,
		cfg:      cfg,
		m:        model.NewKeyed[string](cfg),
		clk:      clock.NewFake(time.Unix(1_700_000_000, 0)),
		has:      has,
		ticks:    has == nil || rapid.Bool().Draw(t, "noTies"),
		close:    rapid.Bool().Draw(t, "finishByClose"),
		results:  make(chan keyedServed, 1024),
		waiting:  map[int]context.CancelFunc{},
		keyOf:    map[int]string{},
		permits:  map[int]semaphore.Permit{},
		released: map[int]semaphore.Permit{},
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
	if cfg.Order&model.KeyedPriorities != 0 {
		opts = append(opts, keyedsem.WithPriorities(cfg.Step))
	}
	if cfg.Order&model.KeyedSequence != 0 {
		opts = append(opts, keyedsem.WithSequenceOrder())
	}
	r.s = keyedsem.New[string](opts...)
	r.logf("New(%+v), %d keys, ticks %v", cfg, nkeys, r.ticks)
	return r
}

// keyedErrOf is the error keyedsem returns for a model outcome.
func keyedErrOf(e model.Err) error {
	if e == model.InvalidTurn {
		return semaphore.ErrInvalidConfig
	}
	return errOf(e, semaphore.ErrClosed, semaphore.ErrQueueFull)
}

// drawTurn draws the Turn of an acquire (ok false: a plain Acquire): mostly
// one the order uses, small priorities and sequences so that they tie and
// overtake, and now and then a field the order does not use, which must be
// refused.
func (r *keyedRun) drawTurn(t *rapid.T) (model.Turn, bool) {
	var tn model.Turn
	switch rapid.IntRange(0, 9).Draw(t, "turnKind") {
	case 0:
		return tn, false
	case 1:
		tn.Priority = rapid.SampledFrom([]int{1, -1, call.MaxPriority + 1}).Draw(t, "anyPriority")
	case 2:
		tn.Sequence = rapid.Int64Range(-3, 3).Draw(t, "anySequence")
	case 3:
		tn.Group = rapid.SampledFrom([]string{"", "tenant"}).Draw(t, "group")
	default:
		if r.cfg.Order&model.KeyedPriorities != 0 {
			tn.Priority = rapid.SampledFrom([]int{0, 1, 2, -1, 3, call.MaxPriority, -call.MaxPriority}).Draw(t, "priority")
		}
		if r.cfg.Order&model.KeyedSequence != 0 {
			tn.Sequence = rapid.Int64Range(-1, 6).Draw(t, "sequence")
		}
	}
	return tn, true
}

func (r *keyedRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v", fmt.Sprintf(format, args...), r.journal, r.s.Stats(), r.m.Stats())
}

func (r *keyedRun) recv() keyedServed {
	r.t.Helper()
	d := hang()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case res := <-r.results:
		r.running--
		return res
	case <-timer.C:
		gaveUp.Store(true)
		r.fatalf("hang: no acquire returned within %v", d)
		panic("unreachable")
	}
}

// granted checks, after a Release or once a waiter that left by itself
// has returned, that the waiters the model says the step served have left
// the queue: the release, or the leaving waiter, grants them under the
// entry's lock before it returns, so a waiter it skipped fails here at
// once instead of after the hang guard.
func (r *keyedRun) granted() {
	r.t.Helper()
	if got, want := r.s.Stats().Waiters, r.m.Stats().Waiters; got != want {
		r.fatalf("%d waiters queued after the release, model %d: a waiter it serves was not granted", got, want)
	}
}

// collect receives the results of the goroutines that the model says the
// step ended, each with the error it must have.
func (r *keyedRun) collect(want map[int]error) { r.collectAfter(want, 0) }

// collectAfter is collect for a step in which waiter leaving (not 0) left
// by itself: it decides its followers' grants before it returns, so once
// its result is in, the queue must be what the model says (see granted).
func (r *keyedRun) collectAfter(want map[int]error, leaving int) {
	r.t.Helper()
	for range len(want) {
		res := r.recv()
		if leaving != 0 && res.id == leaving {
			r.granted()
		}
		werr, ok := want[res.id]
		if !ok {
			r.fatalf("acquire %d returned (%v), the model did not end it", res.id, res.err)
		}
		delete(want, res.id)
		if !errors.Is(res.err, werr) || (werr == nil) != (res.err == nil) {
			r.fatalf("acquire %d: got error %v, want %v", res.id, res.err, werr)
		}
		if cancel := r.waiting[res.id]; cancel != nil {
			cancel()
		}
		delete(r.waiting, res.id)
		if res.err != nil {
			if res.p.Weight() != 0 {
				r.fatalf("acquire %d failed with %v but returned a permit", res.id, res.err)
			}
			continue
		}
		if res.p.Weight() == 0 || res.p.Weight() != r.weights[res.id] {
			r.fatalf("acquire %d: weight %d (valid %v), want %d", res.id, res.p.Weight(), res.p.Weight() != 0, r.weights[res.id])
		}
		r.permits[res.id] = res.p
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

// acquire starts a blocking Acquire, with a context that can be cancelled
// or, for some, with context.Background.
func (r *keyedRun) acquire(t *rapid.T) {
	key, n := r.drawKey(t), r.drawWeight(t)
	background := rapid.IntRange(0, 3).Draw(t, "background") == 0
	turn, withTurn := r.drawTurn(t)
	if len(r.waiting) >= maxWaiters {
		skip(t, r.fuzz, "enough waiters")
		return
	}
	id, queued, merr := r.m.AcquireTurn(key, n, turn)
	r.logf("acquire(%s, %d, %+v) [background=%v turn=%v] -> id %d queued=%v %v", key, n, turn, background, withTurn, id, queued, merr)
	tag := id
	if merr != model.OK {
		tag = -1
	}
	r.weights[tag] = n
	r.keyOf[tag] = key
	ctx, cancel := context.Background(), context.CancelFunc(nil)
	if !background {
		ctx, cancel = context.WithCancel(ctx)
	}
	r.running++
	go func() {
		var p semaphore.Permit
		var err error
		if withTurn {
			p, err = r.s.Acquire(ctx, key, append(optsOf(turn), semaphore.Weight(n))...)
		} else {
			p, err = r.s.Acquire(ctx, key, semaphore.Weight(n))
		}
		r.results <- keyedServed{tag, p, err}
	}()
	if !queued {
		r.collect(map[int]error{tag: keyedErrOf(merr)})
		if cancel != nil {
			cancel()
		}
		return
	}
	r.waiting[id] = cancel
	want := r.m.Stats().Waiters
	spin(fmt.Sprintf("acquire %d to queue", id), func() bool {
		select {
		case res := <-r.results:
			r.running--
			r.fatalf("acquire %d returned (%v) instead of queueing", res.id, res.err)
		default:
		}
		return r.s.Stats().Waiters == want
	}, r.fatalf)
}

func (r *keyedRun) acquireDone(t *rapid.T) {
	key, n := r.drawKey(t), r.drawWeight(t)
	r.m.AcquireDone()
	r.logf("acquireDone(%s, %d)", key, n)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := r.s.Acquire(ctx, key, semaphore.Weight(n)); !errors.Is(err, context.Canceled) || p.Weight() != 0 {
		r.fatalf("acquire with a done context: %v (valid %v), want context.Canceled", err, p.Weight() != 0)
	}
}

func (r *keyedRun) tryAcquire(t *rapid.T) {
	key, n := r.drawKey(t), r.drawWeight(t)
	id, ok := r.m.TryAcquire(key, n)
	r.logf("tryAcquire(%s, %d) -> id %d %v", key, n, id, ok)
	p, got := r.s.TryAcquire(key, semaphore.Weight(n))
	if got != ok {
		r.fatalf("TryAcquire(%s, %d) = %v, model says %v", key, n, got, ok)
	}
	if ok {
		if p.Weight() == 0 || p.Weight() != n {
			r.fatalf("TryAcquire(%s, %d) granted weight %d (valid %v)", key, n, p.Weight(), p.Weight() != 0)
		}
		r.weights[id] = n
		r.keyOf[id] = key
		r.permits[id] = p
	}
}

func (r *keyedRun) release(t *rapid.T) {
	id, ok := drawID(t, r.fuzz, r.permits, "no permit out")
	if !ok {
		return
	}
	p := r.permits[id]
	first, granted := r.m.Release(id)
	r.logf("release(%d, key %s) -> %v, served %v", id, r.keyOf[id], first, granted)
	if got := p.Release(); got != first {
		r.fatalf("Release of %d = %v, model says %v", id, got, first)
	}
	delete(r.permits, id)
	r.released[id] = p
	r.granted()
	r.collect(r.served(granted))
}

// doubleRelease releases a permit again, through the copy kept at its
// first release. Its token may serve another grant by now: the release
// must still do nothing (the Stats check catches a freed grant).
func (r *keyedRun) doubleRelease(t *rapid.T) {
	id, ok := drawID(t, r.fuzz, r.released, "no permit released")
	if !ok {
		return
	}
	first, _ := r.m.Release(id)
	r.logf("release(%d) again", id)
	if got := r.released[id].Release(); got || first {
		r.fatalf("second Release of %d = %v (model %v), want false", id, got, first)
	}
}

func (r *keyedRun) cancellable() []int {
	var ids []int
	for _, id := range slices.Sorted(maps.Keys(r.waiting)) {
		if r.waiting[id] != nil && r.m.Waiting(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func (r *keyedRun) cancel(t *rapid.T) {
	ids := r.cancellable()
	if len(ids) == 0 {
		skip(t, r.fuzz, "nobody waiting with a context that can end")
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "waiter")
	r.cancelWaiter(id)
}

func (r *keyedRun) cancelWaiter(id int) {
	granted := r.m.Cancel(id)
	r.logf("cancel(%d, key %s), served %v", id, r.keyOf[id], granted)
	r.waiting[id]()
	want := r.served(granted)
	want[id] = context.Canceled
	r.collectAfter(want, id)
}

func (r *keyedRun) sweep(*rapid.T) {
	want := r.m.Sweep()
	r.logf("sweep -> %d", want)
	if got := r.s.Sweep(); got != want {
		r.fatalf("Sweep evicted %d, model %d", got, want)
	}
}

func (r *keyedRun) advance(t *rapid.T) {
	idle := max(r.cfg.IdleTimeout, time.Second)
	d := rapid.OneOf(
		rapid.SampledFrom([]time.Duration{time.Second, idle / 2, idle}),
		rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.IntRange(0, 15).Draw(t, "halfSeconds")) * 500 * time.Millisecond
		}),
	).Draw(t, "d")
	r.logf("advance(%v)", d)
	r.clk.Advance(d)
	r.m.Advance(d)
}

func (r *keyedRun) closeNow(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "closeNow") != 0 {
		skip(t, r.fuzz, "close is rare")
		return
	}
	r.doClose()
}

func (r *keyedRun) doClose() {
	failed := r.m.Close()
	r.logf("close, failed %v", failed)
	r.s.Close()
	r.collect(r.served(failed))
}

// check runs after every step.
func (r *keyedRun) check(*rapid.T) {
	if r.ticks {
		// No two entries go idle at the same instant, so "the oldest idle
		// entries" is always one set, and the entry at the boundary of the
		// last eviction pass is the one the pass had to evict.
		r.clk.Advance(time.Nanosecond)
		r.m.Advance(time.Nanosecond)
	}
	select {
	case res := <-r.results:
		r.running--
		r.fatalf("acquire %d returned (%v) unasked", res.id, res.err)
	default:
	}
	if r.has != nil {
		if err := r.m.Reconcile(r.keys, func(k string) bool { return r.has(r.s, k) }); err != nil {
			r.fatalf("entries: %v", err)
		}
	} else if err := r.m.Reconcile(nil, func(string) bool { return false }); err != nil {
		r.fatalf("entries: %v", err)
	}
	if err := r.m.Check(); err != nil {
		r.fatalf("model: %v", err)
	}
	got, want := r.s.Stats(), r.m.Stats()
	if g := KeyedStats(got); g != want { // a new field on one side only stops the build
		r.fatalf("Stats\n got %+v\nwant %+v", g, want)
	}
	if got.Timings != (semaphore.Timings{}) {
		r.fatalf("Timings recorded without WithHistograms: %+v", got.Timings)
	}
	if l := r.s.Len(); l != r.m.Len() || l != got.Keys || l < r.m.Referenced() {
		r.fatalf("Len %d, Stats().Keys %d, model %d with %d referenced", l, got.Keys, r.m.Len(), r.m.Referenced())
	}
	if got.Acquired-got.Released != uint64(len(r.permits)) {
		r.fatalf("Acquired-Released = %d, %d permits out", got.Acquired-got.Released, len(r.permits))
	}
	perKey := map[string]int64{}
	for id, p := range r.permits {
		k := r.keyOf[id]
		if perKey[k] += p.Weight(); perKey[k] > r.cfg.Capacity {
			r.fatalf("key %s: %d permits out, capacity %d", k, perKey[k], r.cfg.Capacity)
		}
	}
}

// finish closes the semaphore or cancels the waiters, releases everything
// in id order and checks that the entries go as the policy says: at once
// with idle timeout 0, by the first Sweep after the timeout otherwise (if
// normal use has not expired them already).
func (r *keyedRun) finish() {
	if r.close {
		r.doClose()
	} else {
		for _, id := range r.cancellable() {
			if r.m.Waiting(id) {
				r.cancelWaiter(id)
			}
		}
	}
	for len(r.permits) > 0 { // a release may grant a waiter that cannot be cancelled
		id := slices.Sorted(maps.Keys(r.permits))[0]
		_, granted := r.m.Release(id)
		if !r.permits[id].Release() {
			r.fatalf("final Release of permit %d returned false", id)
		}
		delete(r.permits, id)
		r.granted()
		r.collect(r.served(granted))
	}
	r.check(r.t)
	if st := r.s.Stats(); st.Held != 0 || st.Waiters != 0 || (r.cfg.IdleTimeout == 0 && st.Keys != 0) {
		r.fatalf("after releasing everything: %+v", st)
	}
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

// cleanup ends every goroutine the run started, also after a failure or a
// fuzz input that ran out of bytes.
func (r *keyedRun) cleanup() {
	r.s.Close()
	for _, cancel := range r.waiting {
		if cancel != nil {
			cancel()
		}
	}
	timer := time.NewTimer(hang())
	defer timer.Stop()
	for r.running > 0 {
		select {
		case res := <-r.results:
			r.running--
			res.p.Release()
		case <-timer.C:
			gaveUp.Store(true)
			return
		}
	}
}
