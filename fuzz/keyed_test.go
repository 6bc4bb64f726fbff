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
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Operations of FuzzKeyed, chosen by an op byte modulo keyedOps; each
// takes one argument byte: the key in its low bits, the weight above.
const (
	keyedTry         = iota // TryAcquireN(key, weight)
	keyedAcquire            // AcquireN(key, weight) in a goroutine; it may wait
	keyedAcquireDone        // AcquireN with a context already cancelled
	keyedCancel             // cancel a waiter's context
	keyedRelease            // release a held permit
	keyedDouble             // release an already released permit again
	keyedAdvance            // move the fake clock on (ages idle entries)
	keyedSweep              // Sweep
	keyedClose              // Close
	keyedOps
)

// fuzzKeys is the number of distinct keys: few, so that keys collide,
// entries are evicted and made again, and the cap on keys binds.
const fuzzKeys = 6

var keyedErr = map[model.Err]error{
	model.InvalidWeight: semaphore.ErrInvalidWeight,
	model.TooHeavy:      semaphore.ErrTooHeavy,
	model.Closed:        keyedsem.ErrClosed,
	model.QueueFull:     keyedsem.ErrQueueFull,
	model.Cancelled:     context.Canceled,
	model.TooManyKeys:   keyedsem.ErrTooManyKeys,
}

type keyedWaiter struct {
	id     int
	key    int
	n      int64
	cancel context.CancelFunc // nil: the context cannot end
	res    chan acquired
}

type keyedHeld struct {
	key int
	p   semaphore.Permit
}

type keyedDriver struct {
	t        *testing.T
	s        *keyedsem.KeyedSemaphore[int]
	m        *model.Keyed[int]
	clk      *clock.Fake
	cfg      model.KeyedConfig
	waiters  map[int]*keyedWaiter // by model id, while queued
	held     map[int]keyedHeld    // by model id
	old      map[int]keyedHeld    // released, for double releases
	released []int
	log      []string
}

// FuzzKeyed drives one keyedsem.KeyedSemaphore[int] and model.Keyed with
// the same operations on a handful of keys, and compares after every step
// the outcome of the call, who was woken and how, Sweep's count, and Stats
// (every field, Keys included: so an entry evicted or kept against the
// policy shows, and an entry evicted while referenced shows as a second
// holder of its key or a surplus Created). It also checks per-key
// exclusion with the permits the driver holds: never more than the
// per-key capacity out on one key.
//
// Input: per-key capacity (1..3), idle timeout (0, 1 s, 5 s on a fake
// clock), WithMaxKeys (1..4), WithHardMaxKeys (bit 0 of the next byte),
// WithMaxWaitersPerKey (0: none, 1..2), then pairs of (op, argument).
func FuzzKeyed(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		in := &input{b: data}
		cfg := model.KeyedConfig{
			Capacity:    int64(1 + in.byte()%3),
			IdleTimeout: []time.Duration{0, time.Second, 5 * time.Second}[in.byte()%3],
			MaxKeys:     int(1 + in.byte()%4),
		}
		b := in.byte()
		cfg.Hard = b&1 == 1
		cfg.MaxWaitersPerKey = int(in.byte() % 3)
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		opts := []keyedsem.Option{
			keyedsem.WithPerKeyCapacity(cfg.Capacity), keyedsem.WithIdleTimeout(cfg.IdleTimeout),
			keyedsem.WithMaxKeys(cfg.MaxKeys), keyedsem.WithMaxWaitersPerKey(cfg.MaxWaitersPerKey),
			keyedsem.WithClock(clk),
		}
		if cfg.Hard {
			opts = append(opts, keyedsem.WithHardMaxKeys())
		}
		d := &keyedDriver{
			t: t, s: keyedsem.New[int](opts...), m: model.NewKeyed[int](cfg), clk: clk, cfg: cfg,
			waiters: map[int]*keyedWaiter{}, held: map[int]keyedHeld{}, old: map[int]keyedHeld{},
		}
		d.logf("New(%+v)", cfg)
		d.check()
		for ops := 0; in.more() && ops < maxOps; ops++ {
			d.step(in.byte()%keyedOps, in.byte())
			d.tick()
			d.check()
		}
		d.finish()
		if testing.Verbose() {
			t.Logf("operations:\n  %s", joinLines(d.log))
		}
	})
}

func (d *keyedDriver) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

func (d *keyedDriver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s\noperations:\n  %s", fmt.Sprintf(format, args...), joinLines(d.log))
}

// tick moves both clocks on by 1ns after every step, so that no two
// entries go idle at the same instant and "the oldest idle entries" is
// always one set: the model need not leave ties to the implementation.
func (d *keyedDriver) tick() {
	d.clk.Advance(time.Nanosecond)
	d.m.Advance(time.Nanosecond)
	// With no ties, the entry at the boundary of the last eviction pass
	// is the one the pass had to evict.
	if err := d.m.Reconcile(nil, func(int) bool { return false }); err != nil {
		d.fatalf("%v", err)
	}
}

func (d *keyedDriver) keyAndWeight(arg byte) (int, int64) {
	return int(arg % fuzzKeys), int64(arg/fuzzKeys) % (d.cfg.Capacity + 2)
}

func (d *keyedDriver) step(op, arg byte) {
	switch op {
	case keyedTry:
		k, n := d.keyAndWeight(arg)
		p, ok := d.s.TryAcquireN(k, n)
		id, want := d.m.TryAcquire(k, n)
		d.logf("TryAcquireN(%d, %d) = %v (model %v, id %d)", k, n, ok, want, id)
		if ok != want {
			d.fatalf("TryAcquireN(%d, %d) = %v, model says %v", k, n, ok, want)
		}
		if ok {
			d.grant(id, k, n, p)
		}
	case keyedAcquire:
		if len(d.waiters) >= maxWaiters {
			return
		}
		k, n := d.keyAndWeight(arg)
		d.acquire(k, n, arg&0x80 != 0)
	case keyedAcquireDone:
		k, n := d.keyAndWeight(arg)
		d.logf("AcquireN(done ctx, %d, %d)", k, n)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p, err := d.s.AcquireN(ctx, k, n)
		d.m.AcquireDone()
		if !errors.Is(err, context.Canceled) || p.Valid() {
			d.fatalf("AcquireN with a done context: %v, %v", p, err)
		}
	case keyedCancel:
		id, ok := pick(d.waiters, arg)
		if !ok || d.waiters[id].cancel == nil {
			return
		}
		w := d.waiters[id]
		d.logf("cancel waiter %d (key %d)", id, w.key)
		w.cancel()
		r := receive(d.t, fmt.Sprintf("cancelled waiter %d", id), w.res)
		if !errors.Is(r.err, context.Canceled) || r.p.Valid() {
			d.fatalf("cancelled waiter %d returned %v, %v", id, r.p, r.err)
		}
		delete(d.waiters, id)
		d.served(d.m.Cancel(id))
	case keyedRelease:
		id, ok := pick(d.held, arg)
		if !ok {
			return
		}
		h := d.held[id]
		d.logf("Release(permit %d, key %d)", id, h.key)
		delete(d.held, id)
		if !h.p.Release() {
			d.fatalf("first Release of permit %d returned false", id)
		}
		d.old[id] = h
		d.released = append(d.released, id)
		first, granted := d.m.Release(id)
		if !first {
			d.fatalf("model: release of held permit %d not first", id)
		}
		d.served(granted)
	case keyedDouble:
		if len(d.released) == 0 {
			return
		}
		id := d.released[int(arg)%len(d.released)]
		d.logf("Release(permit %d) again", id)
		if d.old[id].p.Release() {
			d.fatalf("second Release of permit %d returned true", id)
		}
		d.m.Release(id)
	case keyedAdvance:
		by := time.Duration(arg%16) * 500 * time.Millisecond
		d.logf("Advance(%v)", by)
		d.clk.Advance(by)
		d.m.Advance(by)
	case keyedSweep:
		got := d.s.Sweep()
		want := d.m.Sweep()
		d.logf("Sweep() = %d (model %d)", got, want)
		if got != want {
			d.fatalf("Sweep() = %d, model evicts %d", got, want)
		}
	case keyedClose:
		d.logf("Close()")
		d.s.Close()
		d.served(d.m.Close())
	}
}

func (d *keyedDriver) grant(id, key int, n int64, p semaphore.Permit) {
	if !p.Valid() || p.Weight() != n {
		d.fatalf("grant %d: permit %v, want weight %d", id, p, n)
	}
	d.held[id] = keyedHeld{key, p}
}

func (d *keyedDriver) acquire(k int, n int64, background bool) {
	ctx, cancel := context.Background(), context.CancelFunc(nil)
	if !background {
		ctx, cancel = context.WithCancel(ctx)
	}
	res := make(chan acquired, 1)
	go func() {
		p, err := d.s.AcquireN(ctx, k, n)
		res <- acquired{p, err}
	}()
	id, queued, want := d.m.Acquire(k, n)
	d.logf("AcquireN(%d, %d) [cancellable=%v] -> id %d, queued %v, %v", k, n, !background, id, queued, want)
	if !queued {
		r := receive(d.t, fmt.Sprintf("AcquireN(%d, %d)", k, n), res)
		if cancel != nil {
			cancel()
		}
		if want == model.OK {
			if r.err != nil {
				d.fatalf("AcquireN(%d, %d) = %v, model grants", k, n, r.err)
			}
			d.grant(id, k, n, r.p)
		} else if !errors.Is(r.err, keyedErr[want]) || r.p.Valid() {
			d.fatalf("AcquireN(%d, %d) = %v, %v; model says %v", k, n, r.p, r.err, want)
		}
		return
	}
	d.waiters[id] = &keyedWaiter{id: id, key: k, n: n, cancel: cancel, res: res}
	waiting := d.m.Stats().Waiters
	eventually(d.t, fmt.Sprintf("waiter %d to queue", id), func() bool {
		select {
		case r := <-res:
			d.fatalf("AcquireN(%d, %d) returned %v, %v; model says it waits", k, n, r.p, r.err)
		default:
		}
		return d.s.Stats().Waiters == waiting
	})
}

func (d *keyedDriver) served(list []model.Served) {
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
		d.logf("  waiter %d (key %d) served: %v", s.ID, w.key, s.Err)
		if s.Err == model.OK {
			if r.err != nil {
				d.fatalf("waiter %d got %v, model grants it", s.ID, r.err)
			}
			d.grant(s.ID, w.key, w.n, r.p)
			continue
		}
		if !errors.Is(r.err, keyedErr[s.Err]) || r.p.Valid() {
			d.fatalf("waiter %d got %v, %v; model says %v", s.ID, r.p, r.err, s.Err)
		}
	}
}

func (d *keyedDriver) check() {
	if err := d.m.Check(); err != nil {
		d.fatalf("%v", err)
	}
	got := d.s.Stats()
	real := model.KeyedStats(got) // a new field on one side only stops the build
	if want := d.m.Stats(); real != want {
		d.fatalf("Stats differ from the model:\n  real  %+v\n  model %+v", real, want)
	}
	if l := d.s.Len(); l != got.Keys {
		d.fatalf("Len() = %d, Stats().Keys = %d", l, got.Keys)
	}
	// Per-key exclusion, from the permits the driver holds.
	perKey := map[int]int64{}
	for _, h := range d.held {
		perKey[h.key] += h.p.Weight()
		if perKey[h.key] > d.cfg.Capacity {
			d.fatalf("key %d: %d permits out, capacity %d", h.key, perKey[h.key], d.cfg.Capacity)
		}
	}
	// Entries with references are never evicted.
	if ref := d.m.Referenced(); got.Keys < ref {
		d.fatalf("%d entries alive, %d keys referenced", got.Keys, ref)
	}
	for id, w := range d.waiters {
		select {
		case r := <-w.res:
			d.fatalf("waiter %d returned %v, %v while the model keeps it waiting", id, r.p, r.err)
		default:
		}
	}
}

// finish closes the semaphore, collects every waiter, releases every
// permit, and checks that the entries went back to what the policy keeps.
func (d *keyedDriver) finish() {
	d.logf("Close() and release all")
	d.s.Close()
	d.served(d.m.Close())
	for _, id := range sortedIDs(d.held) {
		if !d.held[id].p.Release() {
			d.fatalf("final Release of permit %d returned false", id)
		}
		d.m.Release(id)
		delete(d.held, id)
	}
	d.tick()
	d.check()
	if st := d.s.Stats(); st.Held != 0 || st.Waiters != 0 || (d.cfg.IdleTimeout == 0 && st.Keys != 0) {
		d.fatalf("after releasing everything: %+v", st)
	}
	d.clk.Advance(d.cfg.IdleTimeout)
	d.m.Advance(d.cfg.IdleTimeout)
	got, want := d.s.Sweep(), d.m.Sweep()
	d.tick()
	if got != want || d.s.Len() != 0 {
		d.fatalf("final Sweep() = %d (model %d), Len() = %d", got, want, d.s.Len())
	}
	d.check()
}

// sortedIDs returns the keys of m in increasing order.
func sortedIDs[V any](m map[int]V) []int {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
