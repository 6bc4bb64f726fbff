package lanequeue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/coarse"
	"github.com/sessionlane/lanes/internal/nan"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// ErrReentrant refuses an AcquireAll whose context carries a held ticket
// that the call would wait for (see [WithTicket] and the package doc): of
// the same key on one of the lanes named, or of another key on a global
// or fair lane named that has no room for both.
var ErrReentrant = errors.New("lanequeue: re-entrant acquire")

// The refusals of bad settings and of names that name no lane: each wraps
// semaphore.ErrInvalidConfig, the one sentinel of a bad setting, and the
// error made from it names the lane.
var (
	errInvalidCapacity = fmt.Errorf("lanequeue: invalid capacity: %w", semaphore.ErrInvalidConfig)
	errInvalidRate     = fmt.Errorf("lanequeue: rate must be positive (or rate.Inf): %w", semaphore.ErrInvalidConfig)
	errEmptyName       = fmt.Errorf("lanequeue: empty lane name: %w", semaphore.ErrInvalidConfig)
	errNoLanes         = fmt.Errorf("lanequeue: no lanes named: %w", semaphore.ErrInvalidConfig)
)

// Queue is a set of named lanes, made by [New] or [Default]; see the
// package doc. Lanes may be added at any time, to the sets prepared after.
type Queue[K comparable] struct {
	mu sync.Mutex // serialises Add and Close

	// table is the current set of lanes, immutable once published: Add
	// copies it and swaps the pointer under mu, so Lanes and the lookups
	// by name read it with one atomic load, without a lock.
	table atomic.Pointer[laneTable[K]]

	closed atomic.Bool // set by Close, before done is closed
	// leased is set once a Leased lane is added: until then no work
	// context looks at a ticket's lanes (see WorkContext).
	leased atomic.Bool
	done   chan struct{} // closed by Close; ends the waits of rate lanes
	// stopping is closed, under mu, when Drain begins or at Close,
	// whichever comes first (see Stopping).
	stopping chan struct{}

	clock coarse.Clock // the tickets' since
	// cooling is set by the first Cooldown: only then do acquire calls
	// look at their lanes' cooldowns. clk is the clock of cooldowns; nil,
	// as outside this package's tests, is the system clock.
	cooling atomic.Bool
	clk     clock.Clock
	holders holderSet[K]
	watch   watch[K]   // Waiters' arrivals and the hooks (waiters.go, hooks.go)
	drain   drainState // what Drain waits for; see drain.go

	// nanKeys is whether K can hold a value not equal to itself (a float,
	// a complex or an interface, or a struct or array of one), decided
	// once by New: only then do the acquire calls compare the key with
	// itself.
	nanKeys bool
}

// zeroQueue is the panic of a method called on a Queue not made by New.
const zeroQueue = "lanequeue: the zero Queue is not usable: use New or Default"

// tbl returns the current table, and panics with a clear message on the
// zero Queue.
func (q *Queue[K]) tbl() *laneTable[K] {
	t := q.table.Load()
	if t == nil {
		panic(zeroQueue)
	}
	return t
}

// laneTable is one published set of lanes.
type laneTable[K comparable] struct {
	byName  map[string]laneRef[K]
	ordered []*laneEntry[K] // canonical order: by kind, then name
}

// laneRef is a lane and its position in the canonical order of its table.
// Positions of the same lanes differ between tables, but their order never
// does: it is a total order on (kind, name).
type laneRef[K comparable] struct {
	e    *laneEntry[K]
	rank int
}

// laneEntry is one registered lane. Immutable but for fixedMax and obs.
type laneEntry[K comparable] struct {
	name string
	kind Kind
	lane Lane[K]
	rate *rateLane[K] // the lane, when it is this package's rate lane
	// fixedMax is the lane's MaxWeight when it can never change (a keyed
	// lane of this package), or -1: ask capSem, else the lane, each time.
	// SetRate changes a rate lane's; every call reads it afresh (a
	// LaneSet does not keep it).
	fixedMax atomic.Int64
	// capSem is the semaphore of a global or fair lane of this package,
	// whose capacity (one atomic load) is the lane's MaxWeight.
	capSem *semaphore.Weighted
	// The semaphore under the lane when it is this package's keyed or
	// global lane (at most one is set): acquire calls it directly, without
	// the interface call and the adapter's frame.
	keyed  *keyedsem.Keyed[K]
	global *semaphore.Weighted
	obs    atomic.Pointer[Observer] // ObserveLane's; nil: none
	// leased is the lane, if its permits can end before they are released
	// (see Leased); nil for the others, whose tickets' work contexts watch
	// nothing (a check per lane, no allocation).
	leased Leased
	// cool is when the lane's Cooldown ends, in nanoseconds of the
	// queue's clock; 0: never paused.
	cool atomic.Int64
	// coolWaiters and coolRefused are LaneStats' CooldownWaiters and
	// CooldownRefused.
	coolWaiters atomic.Int64
	coolRefused atomic.Uint64
}

// bind sets the fields of e that add derives from e.lane.
func (e *laneEntry[K]) bind() {
	e.fixedMax.Store(fixedMaxOf(e.lane))
	switch l := e.lane.(type) {
	case *keyedLane[K]:
		e.keyed = l.s
	case *globalLane[K]:
		e.global, e.capSem = l.s, l.s
	case *fairLane[K]:
		e.capSem = l.s
	}
	e.leased, _ = e.lane.(Leased)
}

// maxWeight is the lane's MaxWeight if it is known without asking the
// lane, else -1.
func (e *laneEntry[K]) maxWeight() int64 {
	if s := e.capSem; s != nil {
		return s.Capacity()
	}
	return e.fixedMax.Load()
}

// keyedAcquire takes n of key's permits of s: with no option for the
// common weight of 1, the keyed semaphore's fastest call.
func keyedAcquire[K comparable](ctx context.Context, s *keyedsem.Keyed[K], key K, n int64) (semaphore.Permit, error) {
	if n == 1 {
		return s.Acquire(ctx, key)
	}
	return s.Acquire(ctx, key, semaphore.Weight(n))
}

// keyedTry is keyedAcquire's TryAcquire.
func keyedTry[K comparable](s *keyedsem.Keyed[K], key K, n int64) (semaphore.Permit, bool) {
	if n == 1 {
		return s.TryAcquire(key)
	}
	return s.TryAcquire(key, semaphore.Weight(n))
}

// acquire is e.lane.Acquire.
func (e *laneEntry[K]) acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	if s := e.keyed; s != nil {
		return keyedAcquire(ctx, s, key, n)
	}
	if s := e.global; s != nil {
		return s.Acquire(ctx, n)
	}
	return e.lane.Acquire(ctx, key, n)
}

// tryAcquire is e.lane.TryAcquire.
func (e *laneEntry[K]) tryAcquire(key K, n int64) (semaphore.Permit, bool) {
	if s := e.keyed; s != nil {
		return keyedTry(s, key, n)
	}
	if s := e.global; s != nil {
		return s.TryAcquire(n)
	}
	return e.lane.TryAcquire(key, n)
}

// fixedMaxOf returns what laneEntry.fixedMax should be for l.
func fixedMaxOf[K comparable](l Lane[K]) int64 {
	switch l := l.(type) {
	case *keyedLane[K]:
		return l.capacity
	case *rateLane[K]:
		return l.burst.Load()
	}
	return -1
}

// New returns a queue with no lanes.
func New[K comparable]() *Queue[K] {
	q := &Queue[K]{done: make(chan struct{}), stopping: make(chan struct{}), nanKeys: nan.Possible[K]()}
	q.clock.Init(time.Now())
	q.table.Store(&laneTable[K]{byName: map[string]laneRef[K]{}})
	return q
}

// Default returns a queue with two lanes: "session", a keyed lane made
// with keyedOpts, and "global", of globalCapacity (16 is a capacity that
// most hosted model APIs accept from one process); it panics for bad
// settings, as semaphore.New and keyedsem.New do.
func Default[K comparable](globalCapacity int64, keyedOpts ...keyedsem.Option) *Queue[K] {
	q := New[K]()
	if err := q.Add("global", NewGlobalLane[K](semaphore.New(globalCapacity))); err != nil {
		panic(err)
	}
	if err := q.Add("session", NewKeyedLane(keyedsem.New[K](keyedOpts...))); err != nil {
		panic(err)
	}
	return q
}

// Add registers l, made by [NewKeyedLane], [NewGlobalLane], [NewFairLane],
// [NewRateLane], [NewTokenLane] or another package, under name; the queue
// closes it. It returns an error wrapping semaphore.ErrInvalidConfig for
// an empty name, a name or a budget registered already, or a lane made
// with a setting out of range (see its constructor), and semaphore.ErrClosed after Close,
// registering nothing. It panics if l is nil or of no Kind.
func (q *Queue[K]) Add(name string, l Lane[K]) error {
	if l == nil {
		panic("lanequeue: nil Lane")
	}
	if b, ok := l.(*badLane[K]); ok {
		return fmt.Errorf("lanequeue: lane %q: %w", name, b.err)
	}
	k := l.Kind()
	if k != Keyed && k != Global && k != Rate {
		panic(fmt.Sprintf("lanequeue: lane %q has unknown kind %d", name, int(k)))
	}
	e := &laneEntry[K]{name: name, kind: k, lane: l}
	if r, ok := l.(*rateLane[K]); ok {
		e.rate = r
	}
	if t, ok := l.(*tokenLane[K]); ok {
		t.bind(q.clk, &q.clock)
	}
	return q.add(e)
}

// add publishes a new table with e in it.
func (q *Queue[K]) add(e *laneEntry[K]) error {
	if e.name == "" {
		return errEmptyName
	}
	e.bind()
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.tbl()
	if q.closed.Load() {
		return semaphore.ErrClosed
	}
	if _, ok := old.byName[e.name]; ok {
		return fmt.Errorf("lanequeue: duplicate lane %q: %w", e.name, semaphore.ErrInvalidConfig)
	}
	if b := budgetOf(e.lane); b != nil {
		for _, x := range old.ordered {
			if budgetOf(x.lane) == b {
				return fmt.Errorf("lanequeue: lane %q is the lane already registered as %q: %w", e.name, x.name, semaphore.ErrInvalidConfig)
			}
		}
	}
	ordered := append(slices.Clip(old.ordered), e)
	slices.SortFunc(ordered, func(a, b *laneEntry[K]) int {
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	t := &laneTable[K]{byName: make(map[string]laneRef[K], len(ordered)), ordered: ordered}
	for i, x := range ordered {
		t.byName[x.name] = laneRef[K]{e: x, rank: i}
	}
	q.table.Store(t)
	if e.leased != nil {
		q.leased.Store(true)
	}
	return nil
}

// SetRate gives a lane of [NewRateLane] a new limit and burst; the bucket
// keeps its tokens (up to the burst), waiters their times. A limit that is
// not positive (rate.Inf is) or a burst below 1 is refused.
func (q *Queue[K]) SetRate(name string, limit rate.Limit, burst int) error {
	r, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("lanequeue: unknown lane %q: %w", name, semaphore.ErrInvalidConfig)
	}
	if r.e.rate == nil {
		return fmt.Errorf("lanequeue: lane %q (a %s lane) is not made by NewRateLane: %w", name, r.e.kind, semaphore.ErrInvalidConfig)
	}
	if err := checkRate(limit, burst); err != nil {
		return fmt.Errorf("lanequeue: lane %q: %w", name, err)
	}
	q.mu.Lock() // orders the update of fixedMax with other SetRate calls
	defer q.mu.Unlock()
	r.e.rate.setRate(limit, burst)
	if r.e.fixedMax.Load() >= 0 {
		r.e.fixedMax.Store(int64(burst))
	}
	return nil
}

// Stats returns a snapshot of every lane, in canonical order, each lane's
// taken on its own.
func (q *Queue[K]) Stats() []LaneStats {
	t := q.tbl()
	out := make([]LaneStats, len(t.ordered))
	var now int64
	read := false // the clock, read once, for the first lane ever paused
	for i, e := range t.ordered {
		st := e.lane.Stats()
		st.Name, st.Kind = e.name, e.kind
		if c := e.cool.Load(); c != 0 { // 0: never paused
			st.CooldownSet = true
			if !read {
				now, read = q.now().UnixNano(), true
			}
			if c > now {
				st.CooldownLeft = time.Duration(c - now)
			}
		}
		st.CooldownWaiters, st.CooldownRefused = int(e.coolWaiters.Load()), e.coolRefused.Load()
		out[i] = st
	}
	return out
}

// Close closes the queue and its lanes: waiters and later calls fail with
// semaphore.ErrClosed. Tickets out, and any an overlapping AcquireAll gets, stay
// valid; but a [Leased] lane may end its permits when it closes (package
// redislane's do), and with them the work of their tickets ([WorkContext]):
// drain the queue first ([Queue.Drain]) to let that work finish.
func (q *Queue[K]) Close() {
	if q.done == nil {
		panic(zeroQueue)
	}
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return
	}
	q.closed.Store(true)
	close(q.done)
	q.stop()
	q.clock.Stop()
	t := q.table.Load()
	q.mu.Unlock()
	for _, e := range t.ordered {
		e.lane.Close()
	}
}

// budgetOf returns what identifies l's budget: the semaphore, keyed
// semaphore or limiter that this package's lanes wrap, or l itself when
// its dynamic type is comparable; nil when there is nothing to compare.
func budgetOf[K comparable](l Lane[K]) any {
	switch l := l.(type) {
	case *globalLane[K]:
		return l.s
	case *fairLane[K]:
		return l.s
	case *keyedLane[K]:
		return l.s
	case *rateLane[K]:
		return l.lim
	}
	if reflect.TypeOf(l).Comparable() {
		return l
	}
	return nil
}
