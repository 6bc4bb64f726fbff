package modelcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// fairGroups are the groups the fair driver draws from; "" is a group
// like any other.
var fairGroups = []string{"", "a", "b", "c"}

// fairRun drives a semaphore made WithFairShare and a
// model.FairSemaphore with the same operations, one at a time, as semRun
// does for FIFO: arrival order is the order of the steps, and after each
// step exactly the waiters the model serves must return.
type fairRun struct {
	t    *rapid.T
	s    *semaphore.Weighted
	m    *model.FairSemaphore
	fuzz bool

	results chan semServed
	running int
	waiting map[int]context.CancelFunc // nil: a context that cannot end
	groups  map[int]string             // group of each waiter
	permits map[int]semaphore.Permit
	cancels map[int]context.CancelFunc
	weights map[int]int64
	journal
}

// FairShare checks random sequences of operations on a semaphore made
// with semaphore.WithFairShare against model.FairSemaphore: the same
// grants to the same waiters (so the same order of service, step by
// step), the same failures, and the same Stats after every step; every
// waiter served once, none lost. The groups are "", "a", "b" and "c",
// with equal weights or weights from 1 to 4. The operations: AcquireTurn
// that may wait (cancellable or not), TryAcquire, fill, Release, cancel a
// waiter, cancel one and at once free permits (a release or a grow, which
// may reach it before it left: the grant goes back and on, through the
// engine's grant loop), SetCapacity, Close.
func FairShare(t *rapid.T) { fairDriver(t, false) }

// FairShareFuzz is FairShare for a fuzz target (see skip).
func FairShareFuzz(t *rapid.T) { fairDriver(t, true) }

func fairDriver(t *rapid.T, fuzz bool) {
	r := newFairRun(t)
	r.fuzz = fuzz
	drive(t, fuzz, r.cleanup, r.finish, map[string]func(*rapid.T){
		"acquire":      r.acquire,
		"acquireAgain": r.acquire,
		"acquireMore":  r.acquire, // queues long enough for turns to show
		"tryAcquire":   r.tryAcquire,
		"fill":         r.fill,
		"release":      r.release,
		"cancel":       r.cancel,
		"cancelThen":   r.cancelThenGrant,
		"setCapacity":  r.setCapacity,
		"close":        r.close,
		"":             r.check,
	})
}

func newFairRun(t *rapid.T) *fairRun {
	capacity := rapid.Int64Range(0, 20).Draw(t, "capacity")
	var weight func(string) int
	if rapid.Bool().Draw(t, "weighted") {
		table := make(map[string]int, len(fairGroups))
		for _, g := range fairGroups {
			table[g] = rapid.IntRange(1, 4).Draw(t, "weight "+g)
		}
		weight = func(g string) int { return table[g] }
	}
	r := &fairRun{
		t:       t,
		m:       model.NewFairSemaphore(capacity, weight),
		s:       semaphore.New(capacity, semaphore.WithFairShare(weight)),
		results: make(chan semServed, 1024),
		waiting: make(map[int]context.CancelFunc),
		groups:  make(map[int]string),
		permits: make(map[int]semaphore.Permit),
		cancels: make(map[int]context.CancelFunc),
		weights: make(map[int]int64),
	}
	r.logf("New(%d, WithFairShare(weighted=%v))", capacity, weight != nil)
	return r
}

func (r *fairRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nreal: %+v\nmodel: %+v queue %+v",
		fmt.Sprintf(format, args...), r.journal, r.s.Stats(), r.m.Stats(), r.m.Queue())
}

func (r *fairRun) drawWeight(t *rapid.T) int64 {
	if rapid.IntRange(0, 2).Draw(t, "one") != 0 {
		return 1
	}
	return rapid.Int64Range(0, r.m.Capacity()+1).Draw(t, "n")
}

func (r *fairRun) acquire(t *rapid.T) {
	n := r.drawWeight(t)
	group := rapid.SampledFrom(fairGroups).Draw(t, "group")
	background := rapid.IntRange(0, 3).Draw(t, "background") == 0
	if len(r.waiting) >= maxWaiters {
		skip(t, r.fuzz, "enough waiters")
		return
	}
	id, queued, want := r.m.Acquire(group, n)
	r.logf("acquire#%d(%q, %d) [background=%v]: queued=%v %v", id, group, n, background, queued, want)
	r.weights[id] = n
	ctx, cancel := context.Background(), context.CancelFunc(nil)
	if !background {
		ctx, cancel = context.WithCancel(ctx)
	}
	r.running++
	go func() {
		p, err := r.s.AcquireTurn(ctx, n, semaphore.Turn{Group: group})
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
	r.groups[id] = group
	wantWaiters := r.m.Stats().Waiters
	r.spin(fmt.Sprintf("acquire#%d to queue", id), func() bool {
		if len(r.results) > 0 {
			got := <-r.results
			r.running--
			r.fatalf("acquire#%d returned (weight %d, %v) where the model queues it", got.id, got.p.Weight(), got.err)
		}
		return r.s.Stats().Waiters == wantWaiters
	})
}

func (r *fairRun) tryAcquire(t *rapid.T) {
	n := r.drawWeight(t)
	id, want := r.m.TryAcquire(n)
	r.logf("tryAcquire#%d(%d): %v", id, n, want)
	p, ok := r.s.TryAcquire(n)
	if ok != want {
		r.fatalf("TryAcquire(%d) = %v, model says %v", n, ok, want)
	}
	if ok {
		r.permits[id] = p
		r.weights[id] = n
	}
}

func (r *fairRun) fill(*rapid.T) {
	for range r.m.Capacity() + 1 {
		id, want := r.m.TryAcquire(1)
		p, ok := r.s.TryAcquire(1)
		if ok != want {
			r.fatalf("fill: TryAcquire(1) = %v, model says %v", ok, want)
		}
		if !ok {
			return
		}
		r.logf("fill: tryAcquire#%d(1)", id)
		r.permits[id] = p
		r.weights[id] = 1
	}
}

func (r *fairRun) drawPermit(t *rapid.T) int {
	ids := slices.Sorted(maps.Keys(r.permits))
	if len(ids) == 0 {
		skip(t, r.fuzz, "no permit out")
		return 0
	}
	return rapid.SampledFrom(ids).Draw(t, "permit")
}

func (r *fairRun) release(t *rapid.T) {
	id := r.drawPermit(t)
	if id == 0 {
		return
	}
	granted := r.m.Release(id)
	r.logf("release#%d (weight %d): grants %v", id, r.weights[id], granted)
	p := r.permits[id]
	delete(r.permits, id)
	if !p.Release() {
		r.fatalf("first Release of permit %d returned false", id)
	}
	r.collect(granted, 0)
}

func (r *fairRun) cancelOne(t *rapid.T) (id int, granted []model.Served) {
	var ids []int
	for _, id := range slices.Sorted(maps.Keys(r.waiting)) {
		if r.waiting[id] != nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		skip(t, r.fuzz, "nobody waits with a context that can end")
		return 0, nil
	}
	id = rapid.SampledFrom(ids).Draw(t, "waiter")
	granted = r.m.Cancel(id)
	r.logf("cancel#%d (%q): grants %v", id, r.groups[id], granted)
	return id, granted
}

func (r *fairRun) cancel(t *rapid.T) {
	id, granted := r.cancelOne(t)
	if id == 0 {
		return
	}
	r.waiting[id]()
	r.collect(append([]model.Served{{ID: id, Err: model.Cancelled}}, granted...), id)
}

// cancelThenGrant cancels a waiter and at once frees permits, as
// semRun.cancelThenGrant does: the grant may reach the waiter first, and
// must then go back and on as if it had left first.
func (r *fairRun) cancelThenGrant(t *rapid.T) {
	id, granted := r.cancelOne(t)
	if id == 0 {
		return
	}
	var grant func()
	if pid := r.drawPermitOrZero(t); pid != 0 {
		more := r.m.Release(pid)
		r.logf("  then release#%d (weight %d): grants %v", pid, r.weights[pid], more)
		granted = append(granted, more...)
		p := r.permits[pid]
		delete(r.permits, pid)
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
	r.waiting[id]()
	grant()
	r.collect(append([]model.Served{{ID: id, Err: model.Cancelled}}, granted...), id)
}

// drawPermitOrZero draws a permit out for half the draws, else 0.
func (r *fairRun) drawPermitOrZero(t *rapid.T) int {
	ids := slices.Sorted(maps.Keys(r.permits))
	if len(ids) == 0 || !rapid.Bool().Draw(t, "byRelease") {
		return 0
	}
	return rapid.SampledFrom(ids).Draw(t, "permit")
}

func (r *fairRun) setCapacity(t *rapid.T) {
	n := rapid.Int64Range(0, 21).Draw(t, "capacity")
	out := r.m.SetCapacity(n)
	r.logf("setCapacity(%d): serves %v", n, out)
	r.s.SetCapacity(n)
	r.collect(out, 0)
}

func (r *fairRun) close(t *rapid.T) {
	if rapid.IntRange(0, 5).Draw(t, "reallyClose") != 0 {
		skip(t, r.fuzz, "not this time")
		return
	}
	failed := r.m.Close()
	r.logf("close: fails %v", failed)
	r.s.Close()
	r.collect(failed, 0)
}

func (r *fairRun) receive(abort func() string) semServed {
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
// step served, as semRun.collect does.
func (r *fairRun) collect(want []model.Served, leaving int) {
	r.t.Helper()
	outcome := make(map[int]model.Err, len(want))
	for _, w := range want {
		outcome[w.ID] = w.Err
	}
	take := func(got semServed) {
		r.t.Helper()
		e, ok := outcome[got.id]
		if !ok {
			r.fatalf("waiter %d (%q) returned (weight %d, %v); the model serves only %v", got.id, r.groups[got.id], got.p.Weight(), got.err, want)
		}
		delete(outcome, got.id)
		r.expect(got, e)
		cancel := r.waiting[got.id]
		delete(r.waiting, got.id)
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

func (r *fairRun) expect(got semServed, want model.Err) {
	r.t.Helper()
	werr := semErrOf(want)
	if got.err != werr {
		r.fatalf("acquire#%d (weight %d) returned %v, want %v", got.id, r.weights[got.id], got.err, werr)
	}
	if want != model.OK {
		if got.p.Valid() {
			r.fatalf("acquire#%d failed with %v but returned a permit", got.id, got.err)
		}
		return
	}
	if !got.p.Valid() || got.p.Weight() != r.weights[got.id] {
		r.fatalf("acquire#%d granted weight %d (valid %v), want %d", got.id, got.p.Weight(), got.p.Valid(), r.weights[got.id])
	}
	if _, dup := r.permits[got.id]; dup {
		r.fatalf("acquire#%d granted twice", got.id)
	}
	r.permits[got.id] = got.p
}

func (r *fairRun) check(*rapid.T) {
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
}

func (r *fairRun) compareStats() {
	r.t.Helper()
	got, want := r.s.Stats(), r.m.Stats()
	if got.Available+got.Held != got.Capacity {
		r.fatalf("Available %d + Held %d != Capacity %d", got.Available, got.Held, got.Capacity)
	}
	if g := model.SemStats(got); g != want {
		r.fatalf("Stats differ from the model\n got %+v\nwant %+v", g, want)
	}
}

func (r *fairRun) spin(what string, cond func() bool) {
	r.t.Helper()
	spin(what, cond, r.fatalf)
}

func (r *fairRun) cleanup() {
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
	deadline := time.Now().Add(Hang)
	for r.running > 0 && time.Now().Before(deadline) {
		select {
		case got := <-r.results:
			r.running--
			got.p.Release()
		case <-time.After(time.Millisecond):
		}
	}
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		r.permits[id].Release()
		delete(r.permits, id)
	}
}

// finish closes (failing every waiter as the model says), releases every
// permit in id order, and checks that everything is back and that every
// acquire that waited was answered once.
func (r *fairRun) finish() {
	failed := r.m.Close()
	r.logf("finish: close fails %v, then release all", failed)
	r.s.Close()
	r.collect(failed, 0)
	for _, id := range slices.Sorted(maps.Keys(r.permits)) {
		r.m.Release(id)
		if !r.permits[id].Release() {
			r.fatalf("final Release of permit %d returned false", id)
		}
		delete(r.permits, id)
	}
	r.check(r.t)
	st := r.s.Stats()
	if r.running != 0 || len(r.waiting) != 0 || st.Available != st.Capacity || st.Held != 0 || st.Waiters != 0 || st.Acquired != st.Released {
		r.fatalf("not balanced after Close and the releases (%d Acquire calls running, %d waiting): %+v", r.running, len(r.waiting), st)
	}
}
