package lanequeue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
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

// Sentinel errors, for errors.Is: package semaphore's and keyedsem's
// values, then this package's own.
var (
	// ErrClosed: the queue, or the lane named, is closed.
	ErrClosed = semaphore.ErrClosed
	// ErrQueueFull: a lane's line is at its bound.
	ErrQueueFull = semaphore.ErrQueueFull
	// ErrWaitTooLong: a global lane's WithMaxWait ran out.
	ErrWaitTooLong = semaphore.ErrWaitTooLong
	// ErrInvalidWeight: a weight below 1.
	ErrInvalidWeight = semaphore.ErrInvalidWeight
	// ErrTooHeavy: a weight above a lane's MaxWeight.
	ErrTooHeavy = semaphore.ErrTooHeavy
	// ErrInvalidConfig is wrapped by the errors of settings out of range.
	ErrInvalidConfig = semaphore.ErrInvalidConfig
	// ErrNaNKey: a key not equal to itself.
	ErrNaNKey = keyedsem.ErrNaNKey
	// ErrTooManyKeys: a keyed lane's hard cap refused a new key.
	ErrTooManyKeys = keyedsem.ErrTooManyKeys

	// ErrDuplicateLane: a name or a budget registered twice, or named twice.
	ErrDuplicateLane = errors.New("lanequeue: duplicate lane")
	// ErrUnknownLane: no such lane, another queue's set, or a LaneWeight off the set.
	ErrUnknownLane = errors.New("lanequeue: unknown lane")
	// ErrNoLanes: no names, or the zero LaneSet.
	ErrNoLanes = errors.New("lanequeue: no lanes named")
	// ErrReentrant: the context's ticket holds the key on one of the lanes.
	ErrReentrant = errors.New("lanequeue: re-entrant acquire")
	// ErrNoSemaphore: the lane has no semaphore of this package of that kind.
	ErrNoSemaphore = errors.New("lanequeue: no semaphore of that kind behind the lane")
)

// The refusals of settings out of range: each wraps ErrInvalidConfig, the
// one sentinel of a bad setting, and says which.
var (
	errInvalidCapacity = fmt.Errorf("lanequeue: invalid capacity: %w", ErrInvalidConfig)
	errInvalidRate     = fmt.Errorf("lanequeue: rate must be positive (or rate.Inf): %w", ErrInvalidConfig)
	errEmptyName       = fmt.Errorf("lanequeue: empty lane name: %w", ErrInvalidConfig)
)

// DefaultGlobalCapacity is a capacity for [Default]'s global lane that most
// hosted model APIs accept from one process.
const DefaultGlobalCapacity = 16

// Names of the lanes of [Default].
const (
	SessionLane = "session"
	GlobalLane  = "global"
)

// Queue is a set of named lanes, made by [New] or [Default]; see the
// package doc. Lanes may be added at any time, to the sets prepared after.
type Queue[K comparable] struct {
	mu sync.Mutex // serialises Add and Close

	// table is the current set of lanes, immutable once published: Add
	// copies it and swaps the pointer under mu, so Lanes and the lookups
	// by name read it with one atomic load, without a lock.
	table atomic.Pointer[laneTable[K]]

	closed atomic.Bool   // set by Close, before done is closed
	done   chan struct{} // closed by Close; ends the waits of rate lanes

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
	// fixedMax is the lane's MaxWeight when it can never change (a lane
	// this package built), or -1: ask the lane each time. It goes from a
	// capacity to -1, once, when GlobalSemaphore hands the lane's
	// semaphore out; every call reads it afresh (a LaneSet does not keep
	// it).
	fixedMax atomic.Int64
	// The semaphore under the lane when it is this package's keyed or
	// global lane (at most one is set): acquire calls it directly, without
	// the interface call and the adapter's frame.
	keyed  *keyedsem.Keyed[K]
	global *semaphore.Weighted
	// own is whether the queue built the lane's semaphore (AddGlobalLane,
	// AddFairLane, AddKeyedLane), so that what it holds is the queue's tickets' and
	// the permits taken through GlobalSemaphore or KeyedSemaphore: Drain
	// reads it from the lane's Stats (see drainState).
	own bool
	obs atomic.Pointer[Observer] // ObserveLane's; nil: none
	// cool is when the lane's Cooldown ends, in nanoseconds of the
	// queue's clock; 0: never paused.
	cool atomic.Int64
}

// bind sets the fields of e that add derives from e.lane.
func (e *laneEntry[K]) bind() {
	e.fixedMax.Store(fixedMaxOf(e.lane))
	switch l := e.lane.(type) {
	case *keyedLane[K]:
		e.keyed = l.s
	case *globalLane[K]:
		e.global = l.s
	}
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
	case *globalLane[K]:
		return l.capacity.Load() // -1 for a semaphore from outside
	case *fairLane[K]:
		return l.capacity.Load()
	case *keyedLane[K]:
		return l.s.PerKeyCapacity() // set by keyedsem.New, never changed
	case *rateLane[K]:
		return l.burst.Load() // -1 for a limiter from outside
	}
	return -1
}

// New returns a queue with no lanes.
func New[K comparable]() *Queue[K] {
	q := &Queue[K]{done: make(chan struct{}), nanKeys: nan.Possible[K]()}
	q.clock.Init(time.Now())
	q.table.Store(&laneTable[K]{byName: map[string]laneRef[K]{}})
	return q
}

// Default returns a queue with [SessionLane], a keyed lane made with
// keyedOpts, and [GlobalLane], of globalCapacity; it panics for bad
// settings.
func Default[K comparable](globalCapacity int64, keyedOpts ...keyedsem.Option) *Queue[K] {
	q := New[K]()
	if err := q.AddGlobalLane(GlobalLane, globalCapacity); err != nil {
		panic(err) // a bad capacity: a fresh queue takes both names
	}
	if err := q.AddKeyedLane(SessionLane, keyedOpts...); err != nil {
		panic(err)
	}
	return q
}

// Add registers l under name; the queue closes it. It returns
// [ErrInvalidConfig] for an empty name, ErrDuplicateLane (also for a budget registered already) or ErrClosed,
// registering nothing. It panics if l is nil or of no Kind.
func (q *Queue[K]) Add(name string, l Lane[K]) error {
	if l == nil {
		panic("lanequeue: nil Lane")
	}
	k := l.Kind()
	if k != Keyed && k != Global && k != Rate {
		panic(fmt.Sprintf("lanequeue: lane %q has unknown kind %d", name, int(k)))
	}
	e := &laneEntry[K]{name: name, kind: k, lane: l}
	if r, ok := l.(*rateLane[K]); ok {
		e.rate = r
	}
	return q.add(e)
}

// AddGlobalLane adds a global lane: a [semaphore.Weighted] of capacity,
// made with opts, shared by every key. It returns [ErrInvalidConfig]
// for a capacity out of range, [semaphore.Validate]'s error or Add's; it never panics for a setting.
func (q *Queue[K]) AddGlobalLane(name string, capacity int64, opts ...semaphore.Option) error {
	if capacity < 1 {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at least 1: %w", name, capacity, errInvalidCapacity)
	}
	if capacity > semaphore.MaxCapacity {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at most %d (semaphore.MaxCapacity): %w", name, capacity, int64(semaphore.MaxCapacity), errInvalidCapacity)
	}
	if err := semaphore.Validate(capacity, opts...); err != nil {
		return fmt.Errorf("lanequeue: lane %q: %w", name, err)
	}
	if err := q.checkName(name); err != nil {
		return err
	}
	l := &globalLane[K]{s: semaphore.New(capacity, opts...)}
	l.capacity.Store(capacity)
	return q.add(&laneEntry[K]{name: name, kind: Global, lane: l, own: true})
}

// AddKeyedLane adds a keyed lane: a [keyedsem.Keyed] made with opts. It
// returns [keyedsem.Validate]'s error or Add's; it never panics for a
// setting.
func (q *Queue[K]) AddKeyedLane(name string, opts ...keyedsem.Option) error {
	if err := keyedsem.Validate(opts...); err != nil {
		return fmt.Errorf("lanequeue: lane %q: %w", name, err)
	}
	if err := q.checkName(name); err != nil {
		return err
	}
	l := &keyedLane[K]{s: keyedsem.New[K](opts...)}
	if err := q.add(&laneEntry[K]{name: name, kind: Keyed, lane: l, own: true}); err != nil {
		l.Close()
		return err
	}
	return nil
}

// AddRateLane adds a rate lane over its own rate.Limiter of limit tokens a
// second and burst (see [NewRateLane]). It returns [ErrInvalidConfig]
// for a limit or burst out of range, or Add's errors.
func (q *Queue[K]) AddRateLane(name string, limit rate.Limit, burst int) error {
	if !(limit > 0) || (math.IsInf(float64(limit), 1) && limit != rate.Inf) {
		return fmt.Errorf("lanequeue: lane %q: limit %v tokens a second: %w", name, float64(limit), errInvalidRate)
	}
	if burst < 1 {
		return fmt.Errorf("lanequeue: lane %q: burst %d: must be at least 1: %w", name, burst, errInvalidCapacity)
	}
	if err := q.checkName(name); err != nil {
		return err
	}
	l := newRateLane[K](rate.NewLimiter(limit, burst), int64(burst))
	return q.add(&laneEntry[K]{name: name, kind: Rate, lane: l, rate: l})
}

// checkName tells at once about a name that add would refuse, so that the
// Add methods do not build a lane for nothing. add checks again under mu.
func (q *Queue[K]) checkName(name string) error {
	if name == "" {
		return errEmptyName
	}
	if q.closed.Load() {
		return ErrClosed
	}
	if _, ok := q.tbl().byName[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateLane, name)
	}
	return nil
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
		return ErrClosed
	}
	if _, ok := old.byName[e.name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateLane, e.name)
	}
	if b := budgetOf(e.lane); b != nil {
		for _, x := range old.ordered {
			if budgetOf(x.lane) == b {
				return fmt.Errorf("%w: %q is the lane already registered as %q", ErrDuplicateLane, e.name, x.name)
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
	return nil
}

// Lane returns the lane registered under name.
func (q *Queue[K]) Lane(name string) (Lane[K], bool) {
	r, ok := q.tbl().byName[name]
	if !ok {
		return nil, false
	}
	return r.e.lane, true
}

// GlobalSemaphore returns the [semaphore.Weighted] behind a global lane of
// this package ([ErrNoSemaphore] otherwise), to resize it, read its Stats
// or take it directly; the queue honours a new capacity at once.
func (q *Queue[K]) GlobalSemaphore(name string) (*semaphore.Weighted, error) {
	r, ok := q.tbl().byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	l, ok := r.e.lane.(*globalLane[K])
	if f, fair := r.e.lane.(*fairLane[K]); fair {
		l, ok = f.globalLane, true
	}
	if !ok {
		return nil, fmt.Errorf("%w: lane %q (a %s lane) has no semaphore.Weighted", ErrNoSemaphore, name, r.e.kind)
	}
	if l.capacity.Load() >= 0 {
		q.unfix(r.e, l)
	}
	return l.s, nil
}

// unfix makes the global lane l, registered as e, read its capacity from
// its semaphore from now on: every call reads e.fixedMax afresh.
func (q *Queue[K]) unfix(e *laneEntry[K], l *globalLane[K]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l.capacity.Store(-1)
	e.fixedMax.Store(-1)
}

// KeyedSemaphore returns the [keyedsem.Keyed] behind a keyed lane of this
// package ([ErrNoSemaphore] otherwise), to Sweep it or read its Stats.
func (q *Queue[K]) KeyedSemaphore(name string) (*keyedsem.Keyed[K], error) {
	r, ok := q.tbl().byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	l, ok := r.e.lane.(*keyedLane[K])
	if !ok {
		return nil, fmt.Errorf("%w: lane %q (a %s lane) has no keyedsem.Keyed", ErrNoSemaphore, name, r.e.kind)
	}
	return l.s, nil
}

// SetRate gives a rate lane of this package a new limit and burst; the
// bucket keeps its tokens (up to the burst), waiters their times.
func (q *Queue[K]) SetRate(name string, limit rate.Limit, burst int) error {
	r, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	if r.e.rate == nil {
		return fmt.Errorf("%w: lane %q (a %s lane) is not a rate lane of this package", ErrNoSemaphore, name, r.e.kind)
	}
	if !(limit > 0) || (math.IsInf(float64(limit), 1) && limit != rate.Inf) {
		return fmt.Errorf("lanequeue: lane %q: limit %v tokens a second: %w", name, float64(limit), errInvalidRate)
	}
	if burst < 1 {
		return fmt.Errorf("lanequeue: lane %q: burst %d: must be at least 1: %w", name, burst, errInvalidCapacity)
	}
	q.mu.Lock() // orders the update of fixedMax with other SetRate calls
	defer q.mu.Unlock()
	r.e.rate.setRate(limit, burst)
	if r.e.fixedMax.Load() >= 0 {
		r.e.fixedMax.Store(int64(burst))
	}
	return nil
}

// Names returns the lanes' names in canonical order.
func (q *Queue[K]) Names() []string {
	t := q.tbl()
	out := make([]string, len(t.ordered))
	for i, e := range t.ordered {
		out[i] = e.name
	}
	return out
}

// Stats returns a snapshot of every lane, in canonical order, each lane's
// taken on its own.
func (q *Queue[K]) Stats() []LaneStats {
	t := q.tbl()
	out := make([]LaneStats, len(t.ordered))
	for i, e := range t.ordered {
		st := e.lane.Stats()
		st.Name, st.Kind = e.name, e.kind
		out[i] = st
	}
	return out
}

// Close closes the queue and its lanes: waiters and later calls fail with
// ErrClosed. Tickets out, and any an overlapping AcquireAll gets, stay
// valid.
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
