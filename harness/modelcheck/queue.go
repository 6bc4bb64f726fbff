package modelcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"golang.org/x/time/rate"
	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// queueMachine drives a lanequeue.Queue and model.Queue with the same
// operations and compares them after every step.
type queueMachine struct {
	q     *lanequeue.Queue[string]
	m     *model.Queue
	names []string // every lane name
	keys  []string

	sems   map[string]*semaphore.Weighted
	keyed  map[string]*keyedsem.Keyed[string]
	limits map[string]*rate.Limiter
	lanes  map[string]lanequeue.Lane[string] // every lane, by name

	tickets     map[int]*lanequeue.Ticket[string] // model id -> ticket
	released    []*lanequeue.Ticket[string]
	releasedIDs []int // the model ids of released, in the same order

	pending *queuePending
	fuzz    bool // see skip
}

// queuePending is an AcquireAll running in its own goroutine.
type queuePending struct {
	key    string
	lanes  []string
	cancel context.CancelFunc
	done   chan queueResult
}

type queueResult struct {
	t   *lanequeue.Ticket[string]
	err error
}

func newQueueMachine(t *rapid.T) *queueMachine {
	qm := &queueMachine{
		q:       lanequeue.New[string](),
		keys:    []string{"a", "b", "c"},
		sems:    map[string]*semaphore.Weighted{},
		keyed:   map[string]*keyedsem.Keyed[string]{},
		limits:  map[string]*rate.Limiter{},
		lanes:   map[string]lanequeue.Lane[string]{},
		tickets: map[int]*lanequeue.Ticket[string]{},
	}
	var lanes []model.QueueLane
	// Names chosen so that name order differs from kind order: global
	// "g*" < rate "r*" < keyed "s*".
	for i := range rapid.IntRange(1, 2).Draw(t, "keyedLanes") {
		lanes = append(lanes, model.QueueLane{Name: fmt.Sprintf("s%d", i), Kind: model.QueueKeyed, Capacity: rapid.Int64Range(1, 3).Draw(t, "perKey")})
	}
	for i := range rapid.IntRange(1, 2).Draw(t, "globalLanes") {
		lanes = append(lanes, model.QueueLane{Name: fmt.Sprintf("g%d", i), Kind: model.QueueGlobal, Capacity: rapid.Int64Range(1, 4).Draw(t, "capacity")})
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "rateLanes") {
		lanes = append(lanes, model.QueueLane{Name: fmt.Sprintf("r%d", i), Kind: model.QueueRate, Capacity: rapid.Int64Range(1, 3).Draw(t, "burst")})
	}
	// Register in a random order: the canonical order must not depend on it.
	for _, l := range rapid.Permutation(lanes).Draw(t, "addOrder") {
		var lane lanequeue.Lane[string]
		switch l.Kind {
		case model.QueueKeyed:
			if rapid.Bool().Draw(t, "addKeyedLane") {
				// Only the queue knows the lane's semaphore; the checks
				// read the lane's Stats.
				lane = lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithPerKeyCapacity(l.Capacity), keyedsem.WithIdleTimeout(0)))
				break
			}
			ks := keyedsem.New[string](keyedsem.WithPerKeyCapacity(l.Capacity))
			qm.keyed[l.Name] = ks
			lane = lanequeue.NewKeyedLane(ks)
		case model.QueueGlobal:
			if rapid.Bool().Draw(t, "addLane") {
				lane = lanequeue.NewGlobalLane[string](semaphore.New(l.Capacity))
				break
			}
			s := semaphore.New(l.Capacity)
			qm.sems[l.Name] = s
			lane = lanequeue.NewGlobalLane[string](s)
		case model.QueueRate:
			// A negligible rate: the limiter does not refill during a test.
			if rapid.Bool().Draw(t, "addRateLane") {
				// Only the queue knows the limiter; its tokens are out of
				// the checks' reach (the lane's Stats do not show them),
				// the rest is checked as for the others.
				lane = lanequeue.NewRateLane[string](rate.NewLimiter(rate.Limit(1e-9), int(l.Capacity)))
				break
			}
			lim := rate.NewLimiter(rate.Limit(1e-9), int(l.Capacity))
			qm.limits[l.Name] = lim
			lane = lanequeue.NewRateLane[string](lim)
		}
		if err := qm.q.Add(l.Name, lane); err != nil {
			t.Fatalf("Add(%q): %v", l.Name, err)
		}
		qm.lanes[l.Name] = lane
		qm.names = append(qm.names, l.Name)
	}
	qm.m = model.NewQueue(lanes...)
	var canonical []string
	for _, l := range qm.m.Lanes() {
		canonical = append(canonical, l.Name)
	}
	var got []string
	for _, st := range qm.q.Stats() {
		got = append(got, st.Name)
	}
	if !slices.Equal(got, canonical) {
		t.Fatalf("Stats() names %v, canonical order is %v", got, canonical)
	}
	if _, err := qm.q.Lanes("nope"); !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Lanes(%q) = %v; want an unknown lane (semaphore.ErrInvalidConfig)", "nope", err)
	}
	return qm
}

// drawLanes draws a valid list of 1..4 distinct lanes in random order.
func (qm *queueMachine) drawLanes(t *rapid.T) []string {
	n := rapid.IntRange(1, min(4, len(qm.names))).Draw(t, "nLanes")
	return rapid.SliceOfNDistinct(rapid.SampledFrom(qm.names), n, n, rapid.ID[string]).Draw(t, "lanes")
}

// drawWeight draws a weight of 1..3 for most draws, else one from 0 to one
// above the largest capacity (so the invalid and too heavy ones too).
func (qm *queueMachine) drawWeight(t *rapid.T) int64 {
	if rapid.IntRange(0, 3).Draw(t, "anyWeight") != 0 {
		return rapid.Int64Range(1, 3).Draw(t, "weight")
	}
	return rapid.Int64Range(0, 5).Draw(t, "weight")
}

// queueErrOf maps a model outcome to the sentinel AcquireAll must return.
func queueErrOf(e model.QueueErr) error {
	switch e {
	case model.QueueClosed:
		return semaphore.ErrClosed
	case model.QueueNoLanes, model.QueueUnknownLane, model.QueueDuplicateLane:
		return semaphore.ErrInvalidConfig // a bad setting: lanequeue's doc
	case model.QueueInvalidWeight:
		return semaphore.ErrInvalidWeight
	case model.QueueTooHeavy:
		return semaphore.ErrTooHeavy
	}
	return nil
}

func (qm *queueMachine) Try(t *rapid.T) {
	key := rapid.SampledFrom(qm.keys).Draw(t, "key")
	lanes, n := qm.drawLanes(t), qm.drawWeight(t)
	before := qm.snapshot()
	id, want, _ := qm.m.TryAcquire(key, lanes, n)
	tk, ok := qm.tryAcquireAll(key, lanes, semaphore.Weight(n))
	if ok != want {
		t.Fatalf("TryAcquireAll(%q, %v, %d) = %v, model says %v", key, lanes, n, ok, want)
	}
	if ok {
		qm.tickets[id] = tk
		qm.checkTicket(t, tk, key, lanes, n)
	} else if after := qm.snapshot(); after != before {
		t.Fatalf("failed TryAcquireAll left a partial ticket: lanes %v before, %v after", before, after)
	}
}

func (qm *queueMachine) Acquire(t *rapid.T) {
	if qm.pending != nil {
		skip(t, qm.fuzz, "a call is already waiting")
		return
	}
	key := rapid.SampledFrom(qm.keys).Draw(t, "key")
	lanes, n := qm.drawLanes(t), qm.drawWeight(t)
	id, granted, merr := qm.m.Acquire(key, lanes, n)
	ctx, cancel := context.WithCancel(context.Background())
	p := &queuePending{key: key, lanes: lanes, cancel: cancel, done: make(chan queueResult, 1)}
	go func() {
		tk, err := qm.acquireAll(ctx, key, lanes, semaphore.Weight(n))
		p.done <- queueResult{tk, err}
	}()
	switch {
	case merr != model.QueueOK:
		r := qm.result(t, p)
		if !errors.Is(r.err, queueErrOf(merr)) {
			t.Fatalf("AcquireAll(%q, %v, %d) = %v, want %v", key, lanes, n, r.err, queueErrOf(merr))
		}
	case granted:
		r := qm.result(t, p)
		if r.err != nil {
			t.Fatalf("AcquireAll(%q, %v, %d) = %v, model grants at once", key, lanes, n, r.err)
		}
		qm.tickets[id] = r.t
		qm.checkTicket(t, r.t, key, lanes, n)
	default:
		qm.pending = p
		qm.settle(t)
		return
	}
	cancel()
}

func (qm *queueMachine) CancelWaiting(t *rapid.T) {
	p := qm.pending
	if p == nil {
		skip(t, qm.fuzz, "nothing waits")
		return
	}
	p.cancel()
	r := qm.result(t, p)
	qm.pending = nil
	qm.m.Cancel()
	if !errors.Is(r.err, context.Canceled) || r.t != nil {
		t.Fatalf("cancelled AcquireAll(%q, %v) = %v, %v; want context.Canceled", p.key, p.lanes, r.t, r.err)
	}
	// AcquireAll has returned: what it took must be back already.
	qm.compare(t)
}

func (qm *queueMachine) Release(t *rapid.T) {
	ids := qm.m.Tickets()
	if len(ids) == 0 {
		skip(t, qm.fuzz, "no ticket out")
		return
	}
	id := rapid.SampledFrom(ids).Draw(t, "ticket")
	tk := qm.tickets[id]
	delete(qm.tickets, id)
	_, granted := qm.m.Release(id)
	if !tk.Release() {
		t.Fatalf("first Release of ticket %d returned false", id)
	}
	qm.released = append(qm.released, tk)
	qm.releasedIDs = append(qm.releasedIDs, id)
	if granted != 0 {
		p := qm.pending
		qm.pending = nil
		r := qm.result(t, p)
		if r.err != nil {
			t.Fatalf("waiting AcquireAll(%q, %v) = %v after a release; model grants it", p.key, p.lanes, r.err)
		}
		p.cancel()
		qm.tickets[granted] = r.t
		return
	}
	qm.settle(t)
}

func (qm *queueMachine) ReleaseAgain(t *rapid.T) {
	if len(qm.released) == 0 {
		skip(t, qm.fuzz, "nothing released")
		return
	}
	i := rapid.IntRange(0, len(qm.released)-1).Draw(t, "released")
	if qm.released[i].Release() {
		t.Fatalf("second Release of ticket %d returned true", qm.releasedIDs[i])
	}
	if first, _ := qm.m.Release(qm.releasedIDs[i]); first {
		t.Fatalf("model: second release of ticket %d is first", qm.releasedIDs[i])
	}
}

func (qm *queueMachine) AcquireCancelled(t *rapid.T) {
	key := rapid.SampledFrom(qm.keys).Draw(t, "key")
	lanes := qm.drawLanes(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := qm.snapshot()
	tk, err := qm.acquireAll(ctx, key, lanes)
	_, merr := qm.m.Resolve(lanes, 1)
	want := queueErrOf(merr)
	if want == nil {
		want = context.Canceled
	}
	if !errors.Is(err, want) || tk != nil {
		t.Fatalf("AcquireAll with a done context = %v, %v; want %v", tk, err, want)
	}
	if after := qm.snapshot(); after != before {
		t.Fatalf("AcquireAll with a done context took something: %v before, %v after", before, after)
	}
}

func (qm *queueMachine) BadInput(t *rapid.T) {
	key := rapid.SampledFrom(qm.keys).Draw(t, "key")
	var lanes []string
	n := int64(1)
	switch rapid.IntRange(0, 4).Draw(t, "bad") {
	case 0: // empty list
	case 1:
		lanes = append(qm.drawLanes(t), "nope")
	case 2:
		lanes = qm.drawLanes(t)
		lanes = append(lanes, lanes[0])
	case 3:
		lanes, n = qm.drawLanes(t), rapid.Int64Range(4, 10).Draw(t, "heavy")
	case 4:
		lanes, n = qm.drawLanes(t), rapid.Int64Range(-2, 0).Draw(t, "light")
	}
	_, merr := qm.m.Resolve(lanes, n)
	if merr == model.QueueOK {
		skip(t, qm.fuzz, "the input drawn is valid") // a heavy weight that fits every lane drawn
		return
	}
	before := qm.snapshot()
	tk, err := qm.acquireAll(context.Background(), key, lanes, semaphore.Weight(n))
	if !errors.Is(err, queueErrOf(merr)) || tk != nil {
		t.Fatalf("AcquireAll(%q, %v, %d) = %v, %v; want %v", key, lanes, n, tk, err, queueErrOf(merr))
	}
	if err := qm.check(lanes, semaphore.Weight(n)); !errors.Is(err, queueErrOf(merr)) {
		t.Fatalf("Check(%v, %d) = %v; want %v", lanes, n, err, queueErrOf(merr))
	}
	if _, ok := qm.tryAcquireAll(key, lanes, semaphore.Weight(n)); ok {
		t.Fatalf("TryAcquireAll(%v, %d) succeeded on bad input", lanes, n)
	}
	if after := qm.snapshot(); after != before {
		t.Fatalf("bad input took something: %v before, %v after", before, after)
	}
}

func (qm *queueMachine) Close(t *rapid.T) {
	if rapid.IntRange(0, 14).Draw(t, "closeDice") != 0 {
		skip(t, qm.fuzz, "not this time")
		return
	}
	qm.closeAll(t)
}

// Check runs after every step.
func (qm *queueMachine) Check(t *rapid.T) {
	if err := qm.m.Check(); err != nil {
		t.Fatalf("model: %v", err)
	}
	qm.compare(t)
}

// laneState is every lane's held weight (rate lanes: tokens left, x1000).
type laneState [8]int64

func (qm *queueMachine) snapshot() laneState {
	var st laneState
	for i, name := range qm.names {
		switch {
		case qm.sems[name] != nil:
			st[i] = qm.sems[name].Stats().Held
		case qm.keyed[name] != nil:
			st[i] = qm.keyed[name].Stats().Held
		case qm.limits[name] != nil:
			st[i] = int64(math.Round(qm.limits[name].Tokens() * 1000))
		default: // a lane whose semaphore or limiter only the queue knows (a rate lane: Held 0)
			st[i] = qm.lanes[name].Stats().Held
		}
	}
	return st
}

func (qm *queueMachine) modelState() laneState {
	var st laneState
	for i, name := range qm.names {
		if qm.limits[name] != nil {
			st[i] = qm.m.Tokens(name) * 1000
		} else {
			st[i] = qm.m.Held(name)
		}
	}
	return st
}

// waitingOnModelLane reports whether the real lane the model's pending
// request waits on shows a waiter.
func (qm *queueMachine) waitingOnModelLane() bool {
	name, _, ok := qm.m.WaitingOn()
	if !ok {
		return true
	}
	switch {
	case qm.sems[name] != nil:
		return qm.sems[name].Stats().Waiters > 0
	case qm.keyed[name] != nil:
		return qm.keyed[name].Stats().Waiters > 0
	}
	return qm.lanes[name].Stats().Waiters > 0
}

// settle waits until the waiting call has reached the state the model
// says (holding the lanes before the one it waits on, and waiting there).
func (qm *queueMachine) settle(t *rapid.T) {
	if qm.pending == nil {
		return
	}
	spin("waiting AcquireAll to reach the model's state", func() bool {
		select {
		case r := <-qm.pending.done:
			t.Fatalf("AcquireAll(%q, %v) returned %v, %v; model says it waits", qm.pending.key, qm.pending.lanes, r.t, r.err)
		default:
		}
		return qm.snapshot() == qm.modelState() && qm.waitingOnModelLane()
	}, t.Fatalf)
}

func (qm *queueMachine) result(t *rapid.T, p *queuePending) queueResult {
	select {
	case r := <-p.done:
		return r
	case <-time.After(hang()):
		gaveUp.Store(true)
		t.Fatalf("hang: AcquireAll(%q, %v) did not return", p.key, p.lanes)
		return queueResult{}
	}
}

// compare checks every lane against the model, the lanes' own invariants,
// and Holders against the model's tickets.
func (qm *queueMachine) compare(t *rapid.T) {
	if got, want := qm.snapshot(), qm.modelState(); got != want {
		t.Fatalf("lanes %v: held/tokens %v, model %v", qm.names, got[:len(qm.names)], want[:len(qm.names)])
	}
	for name, s := range qm.sems {
		st := s.Stats()
		if st.Available+st.Held != st.Capacity || st.Held < 0 || st.Held > st.Capacity {
			t.Fatalf("global lane %q: %+v breaks Available+Held == Capacity, 0 <= Held <= Capacity", name, st)
		}
	}
	waitLane, _, waiting := qm.m.WaitingOn()
	for _, ls := range qm.q.Stats() {
		if ls.Held < 0 || (ls.Kind == lanequeue.Global && ls.Held > ls.Capacity) {
			t.Fatalf("lane %+v: held outside [0, capacity]", ls)
		}
		want := 0
		if waiting && ls.Name == waitLane {
			want = 1
		}
		if ls.Kind != lanequeue.Rate && ls.Waiters != want {
			t.Fatalf("lane %q has %d waiters, model %d", ls.Name, ls.Waiters, want)
		}
	}
	if p := qm.pending; p != nil {
		select {
		case r := <-p.done:
			t.Fatalf("AcquireAll(%q, %v) returned %v, %v while the model keeps it waiting", p.key, p.lanes, r.t, r.err)
		default:
		}
	}
	var got []model.QueueHolder
	for _, h := range qm.q.Holders() {
		got = append(got, model.QueueHolder{Lane: h.Lane, Key: h.Key, Weight: h.Weight})
	}
	model.SortQueueHolders(got)
	if want := qm.m.Holders(); !slices.Equal(got, want) {
		t.Fatalf("Holders() = %v, model %v", got, want)
	}
}

// checkTicket checks a new ticket; what it holds (key, lanes, weights)
// is checked against the model by compare, through Queue.Holders.
func (qm *queueMachine) checkTicket(t *rapid.T, tk *lanequeue.Ticket[string], key string, lanes []string, n int64) {
	if tk == nil {
		t.Fatalf("AcquireAll(%q, %v, weight %d) granted a nil ticket", key, lanes, n)
	}
}

func (qm *queueMachine) cleanup() {
	if p := qm.pending; p != nil {
		p.cancel()
		<-p.done
	}
	for _, tk := range qm.tickets {
		tk.Release()
	}
	qm.q.Close()
}

// Queue checks random mixes of lanes (keyed, global, rate; made by the
// caller or by the queue's Add* methods, registered in random order), keys,
// weights, try and blocking calls (one caller at a time blocked part-way
// through AcquireAll), cancellations, releases and second releases, bad
// input (empty, unknown and duplicate names, weights out of range), and
// Close against model.Queue. After every step each lane's held weight
// (tokens for rate lanes) equals the model's, so a failed AcquireAll or
// TryAcquireAll never leaves a partial ticket behind; each lane has the
// waiter the model says; each semaphore keeps Available+Held == Capacity;
// and Holders lists exactly the model's tickets.
//
// Queue is the driver for rapid.Check; QueueFuzz is the same for
// rapid.MakeFuzz (see skip).
func Queue(t *rapid.T) { queueDriver(t, false) }

// QueueFuzz is Queue for a fuzz target: an operation that cannot run in the
// current state does nothing instead of asking rapid for another.
func QueueFuzz(t *rapid.T) { queueDriver(t, true) }

func queueDriver(t *rapid.T, fuzz bool) {
	qm := newQueueMachine(t)
	qm.fuzz = fuzz
	drive(t, fuzz, qm.cleanup, func() { qm.finish(t) }, rapid.StateMachineActions(qm))
}

// closeAll closes the queue and the model, and checks that a waiting
// AcquireAll fails with ErrClosed.
func (qm *queueMachine) closeAll(t *rapid.T) {
	qm.q.Close()
	qm.m.Close()
	if p := qm.pending; p != nil {
		qm.pending = nil
		r := qm.result(t, p)
		p.cancel()
		if !errors.Is(r.err, semaphore.ErrClosed) || r.t != nil {
			t.Fatalf("waiting AcquireAll after Close = %v, %v; want ErrClosed", r.t, r.err)
		}
	}
}

// finish closes the queue, releases every ticket in id order, and checks
// that every lane is empty.
func (qm *queueMachine) finish(t *rapid.T) {
	qm.closeAll(t)
	for _, id := range slices.Sorted(maps.Keys(qm.tickets)) {
		if !qm.tickets[id].Release() {
			t.Fatalf("final Release of ticket %d returned false", id)
		}
		qm.m.Release(id)
		delete(qm.tickets, id)
	}
	qm.Check(t)
	for _, s := range qm.q.Stats() {
		if s.Kind != lanequeue.Rate && (s.Held != 0 || s.Waiters != 0) {
			t.Fatalf("after releasing everything, lane %q: %+v", s.Name, s)
		}
	}
	if h := qm.q.Holders(); len(h) != 0 {
		t.Fatalf("after releasing everything, Holders() = %v", h)
	}
}

// The driver draws lists of names, valid or not, and lanequeue's calls take
// a set prepared by Queue.Lanes. acquireAll, tryAcquireAll and check
// prepare the set for each call, so that an error of Lanes (an unknown or
// repeated name, an empty list, a closed queue) is the call's error, as the
// model expects.

func (qm *queueMachine) acquireAll(ctx context.Context, key string, names []string, opts ...semaphore.AcquireOption) (*lanequeue.Ticket[string], error) {
	ls, err := qm.q.Lanes(names...)
	if err != nil {
		return nil, err
	}
	return qm.q.AcquireAll(ctx, key, ls, opts...)
}

func (qm *queueMachine) tryAcquireAll(key string, names []string, opts ...semaphore.AcquireOption) (*lanequeue.Ticket[string], bool) {
	ls, err := qm.q.Lanes(names...)
	if err != nil {
		return nil, false
	}
	return qm.q.TryAcquireAll(key, ls, opts...)
}

func (qm *queueMachine) check(names []string, opts ...semaphore.AcquireOption) error {
	ls, err := qm.q.Lanes(names...)
	if err != nil {
		return err
	}
	return qm.q.Check(ls, opts...)
}
