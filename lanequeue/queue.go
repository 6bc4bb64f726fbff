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

// Sentinel errors, for errors.Is. ErrClosed, ErrQueueFull, ErrWaitTooLong,
// ErrInvalidWeight, ErrTooHeavy and ErrInvalidConfig are the values of
// package semaphore, shared by every lanes package, and ErrNaNKey is
// keyedsem's: errors.Is(err, semaphore.ErrClosed) holds for this package's
// errors too, whichever lane failed. The error of a call that failed on a
// lane, a context that ended while the call waited there or the lane's
// refusal, is a [*LaneError] that names the lane and wraps the cause.
var (
	// ErrClosed is returned by every call on a closed queue, and to the
	// callers that Close wakes. The error of a lane closed on its own
	// while the queue is open (a semaphore closed through
	// [Queue.GlobalSemaphore] or [Queue.KeyedSemaphore], a Redis lane
	// closed by its owner) names the lane and matches ErrClosed. It is
	// [semaphore.ErrClosed].
	ErrClosed = semaphore.ErrClosed
	// ErrQueueFull is returned, wrapped with the lane's name, when a lane's
	// wait queue is at its bound ([semaphore.WithMaxWaiters],
	// [keyedsem.WithMaxWaitersPerKey]). It is [semaphore.ErrQueueFull].
	ErrQueueFull = semaphore.ErrQueueFull
	// ErrWaitTooLong is returned, wrapped with the lane's name, when a
	// global lane's [semaphore.WithMaxWait] ran out. It is
	// [semaphore.ErrWaitTooLong].
	ErrWaitTooLong = semaphore.ErrWaitTooLong
	// ErrInvalidWeight is [semaphore.ErrInvalidWeight]: a weight below 1.
	ErrInvalidWeight = semaphore.ErrInvalidWeight
	// ErrTooHeavy is [semaphore.ErrTooHeavy]: a weight above a lane's
	// MaxWeight, which could never be granted.
	ErrTooHeavy = semaphore.ErrTooHeavy
	// ErrInvalidConfig is wrapped by the error of an Add method given a
	// setting out of range: a capacity, a rate, a burst, or a semaphore or
	// keyed semaphore option. It is [semaphore.ErrInvalidConfig].
	ErrInvalidConfig = semaphore.ErrInvalidConfig
	// ErrNaNKey is keyedsem.ErrNaNKey, the same value: AcquireAll,
	// TryAcquireAll and Do refuse a key that is not equal to itself.
	ErrNaNKey = keyedsem.ErrNaNKey
	// ErrTooManyKeys is keyedsem.ErrTooManyKeys, the same value: a keyed
	// lane made with keyedsem.WithHardMaxKeys refuses a new key when its
	// cap is reached and nothing idle can be evicted; AcquireAll returns
	// it wrapped with the lane's name.
	ErrTooManyKeys = keyedsem.ErrTooManyKeys

	// ErrInvalidCapacity is returned by AddGlobalLane for a capacity below
	// 1 or above semaphore.MaxCapacity, and by AddRateLane for a burst
	// below 1; the error's text says which bound. It matches
	// [ErrInvalidConfig] too.
	ErrInvalidCapacity = fmt.Errorf("lanequeue: invalid capacity: %w", ErrInvalidConfig)
	// ErrInvalidRate is returned by AddRateLane for a rate that is not a
	// positive number of tokens per second: 0 (rate.Limit(50/60) is 0, by
	// integer division), negative, NaN or infinite (rate.Inf, the
	// largest float64, means no limit and is accepted). It matches
	// [ErrInvalidConfig] too.
	ErrInvalidRate = fmt.Errorf("lanequeue: rate must be positive (or rate.Inf): %w", ErrInvalidConfig)

	// ErrEmptyName is returned when a lane is added with an empty name.
	ErrEmptyName = errors.New("lanequeue: empty lane name")
	// ErrDuplicateLane is returned when a lane is added under a name the
	// queue already has, or when the lane (or the semaphore, keyed
	// semaphore or limiter it wraps) is already registered under another
	// name, and by [Queue.Lanes] for a name given twice.
	ErrDuplicateLane = errors.New("lanequeue: duplicate lane")
	// ErrUnknownLane is returned by [Queue.Lanes] for a name the queue has
	// no lane for, and by AcquireAll for a [LaneSet] of another queue or a
	// [LaneWeight] for a lane not in the set.
	ErrUnknownLane = errors.New("lanequeue: unknown lane")
	// ErrNoLanes is returned by [Queue.Lanes] for no names, and by
	// AcquireAll for the zero [LaneSet].
	ErrNoLanes = errors.New("lanequeue: no lanes named")
	// ErrReentrant is returned by AcquireAll when its context carries a
	// live ticket for the same key that holds one of the lanes asked for
	// (see [WithTicket]): the call would wait for itself.
	ErrReentrant = errors.New("lanequeue: re-entrant acquire")
	// ErrNoSemaphore is returned by [Queue.GlobalSemaphore] and
	// [Queue.KeyedSemaphore] for a lane that has no semaphore of the kind
	// asked for behind it: a lane of another kind, or a lane from another
	// package; and by [Queue.Join] for a set whose first keyed lane has
	// no keyed semaphore of this package to take a place in (or that has
	// no keyed lane).
	ErrNoSemaphore = errors.New("lanequeue: no semaphore of that kind behind the lane")
)

// DefaultGlobalCapacity is a starting point for the capacity of the
// "global" lane of [Default]: 16 requests in flight at once across all
// keys, a budget most hosted model APIs accept from one process.
const DefaultGlobalCapacity = 16

// Names of the lanes of [Default].
const (
	SessionLane = "session"
	GlobalLane  = "global"
)

// Queue is a set of named lanes that callers acquire together, all or
// nothing, with [Queue.AcquireAll], naming them by a [LaneSet] that
// [Queue.Lanes] prepares.
//
// A Queue must be made with [New] (or [Default]) and must not be copied;
// the methods of the zero Queue panic.
// Lanes may be added at any time, also while other goroutines acquire (a
// set prepared before does not hold them); all methods are safe for
// concurrent use.
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

// Default returns a queue with the usual gateway pair: [SessionLane]
// ("session"), a keyed lane with one caller at a time per key and the
// given keyedsem options, and [GlobalLane] ("global"), a global lane of
// globalCapacity (the work in flight at once across all keys; see
// [DefaultGlobalCapacity]). [Queue.KeyedSemaphore] and
// [Queue.GlobalSemaphore] return their semaphores (to Sweep the session
// lane's idle keys, to resize the global lane). Default has no error
// result: for a capacity or a keyedOpts value out of range it panics, as
// [semaphore.New] and [keyedsem.New] do, with the error
// [Queue.AddGlobalLane] or [Queue.AddKeyedLane] returns, which names the
// lane and matches [ErrInvalidConfig]; call [New] and the Add methods to
// get the error instead.
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

// Add registers l under name. Any [Lane] implementation can be added: a
// lane of this package made with [NewGlobalLane], [NewKeyedLane] or
// [NewRateLane], or one from another package (a Redis lane). The queue
// owns l from then on: [Queue.Close] closes it.
//
// Add returns [ErrEmptyName], [ErrDuplicateLane], or [ErrClosed], and then
// registers nothing and l stays the caller's. One budget registered under
// two names is refused ([ErrDuplicateLane]): a call naming both would wait
// for itself. It panics if l is nil or its Kind is not one of [Keyed],
// [Global], [Rate].
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

// AddGlobalLane adds a [Global] lane of the given capacity: a
// [semaphore.Weighted] made with opts, shared by every key, FIFO.
// A weight of n takes n of its capacity.
//
// [Queue.GlobalSemaphore] returns the semaphore, to resize the lane.
//
// AddGlobalLane returns [ErrInvalidCapacity] for a capacity below 1 (or
// above semaphore.MaxCapacity), the error of [semaphore.Validate] for an
// option out of range (both match [ErrInvalidConfig]), and the errors of
// [Queue.Add]; it never panics for a bad setting.
func (q *Queue[K]) AddGlobalLane(name string, capacity int64, opts ...semaphore.Option) error {
	if capacity < 1 {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at least 1: %w", name, capacity, ErrInvalidCapacity)
	}
	if capacity > semaphore.MaxCapacity {
		return fmt.Errorf("lanequeue: lane %q: capacity %d: must be at most %d (semaphore.MaxCapacity): %w", name, capacity, int64(semaphore.MaxCapacity), ErrInvalidCapacity)
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

// AddKeyedLane adds a [Keyed] lane: a [keyedsem.Keyed] made
// with opts, one budget per key (by default one caller at a time per key,
// served in arrival order; see [keyedsem.WithPerKeyCapacity]).
// [Queue.KeyedSemaphore] returns the keyed semaphore, to Sweep its idle
// keys.
//
// AddKeyedLane returns the error of [keyedsem.Validate] for an option out
// of range (a per-key capacity outside [1, keyedsem.MaxPerKeyCapacity], a
// negative idle timeout, janitor interval or waiter bound, max keys below
// 1), which matches [ErrInvalidConfig], and the errors of [Queue.Add]; it
// never panics for a bad setting.
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

// AddRateLane adds a [Rate] lane: a [rate.Limiter] of limit tokens per
// second and the given burst. A weight of n spends n tokens; nothing is
// given back on release. See [NewRateLane] for how it waits and what a
// failed call gives back; the limiter is the lane's alone, so the lane
// never grants more than its bucket allows.
//
// Concurrency and rate are different budgets: a model API may allow 10
// requests in flight (a global lane) and 50 requests a minute (a rate
// lane); name both in AcquireAll.
//
// AddRateLane returns [ErrInvalidRate] for a rate that is not positive
// (0, negative or NaN: such a lane would grant its burst and then nothing,
// ever) or infinite other than rate.Inf (which means no limit),
// [ErrInvalidCapacity] for a burst below 1, and the errors of [Queue.Add].
func (q *Queue[K]) AddRateLane(name string, limit rate.Limit, burst int) error {
	if !(limit > 0) || (math.IsInf(float64(limit), 1) && limit != rate.Inf) {
		return fmt.Errorf("lanequeue: lane %q: limit %v tokens a second: %w", name, float64(limit), ErrInvalidRate)
	}
	if burst < 1 {
		return fmt.Errorf("lanequeue: lane %q: burst %d: must be at least 1: %w", name, burst, ErrInvalidCapacity)
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
		return ErrEmptyName
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
		return ErrEmptyName
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

// GlobalSemaphore returns the [semaphore.Weighted] behind the global lane
// registered as name: the one [Queue.AddGlobalLane] or [Queue.AddFairLane]
// made (or [Default] for [GlobalLane]), or the one given to
// [NewGlobalLane] or [NewFairLane]. Through it a caller
// can resize the lane with SetCapacity, read its own [semaphore.Stats], or
// acquire it directly, beside the queue (such permits are not listed by
// [Queue.Holders]).
//
// The queue honours a new capacity at once, also for the sets prepared
// before: a weight above the new capacity fails at once with
// [ErrTooHeavy] and one within it waits as usual. A lane of
// [NewGlobalLane] reads its capacity from its semaphore on every
// AcquireAll whose set holds it (one atomic load), from the start, since
// whoever made the semaphore may resize it. A lane of [Queue.AddGlobalLane],
// whose semaphore nobody else can reach, keeps its capacity in the queue
// until the first call of GlobalSemaphore hands the semaphore out, and
// from then on reads it from the semaphore as well. A call that resolved its
// lanes while the capacity changed may see the old capacity or the new;
// a weight the semaphore no longer fits is then refused by the semaphore
// (the error wraps semaphore.ErrTooHeavy), after the lanes before it were
// taken and given back.
//
// It returns an error wrapping [ErrUnknownLane] if the queue has no lane
// of that name, or [ErrNoSemaphore] if the lane is not a global lane of
// this package (a keyed or rate lane, or a lane from another package).
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

// KeyedSemaphore returns the [keyedsem.Keyed] behind the keyed
// lane registered as name: the one [Queue.AddKeyedLane] made (or
// [Default] for [SessionLane]), or the one given to [NewKeyedLane].
// Through it a caller can Sweep the lane's idle keys at once (not needed
// for the idle timeout to hold: normal use of the lane expires them, and
// [keyedsem.WithJanitor], passed to AddKeyedLane or Default, does while
// the lane is unused; see [keyedsem.WithIdleTimeout]), read its own
// [keyedsem.Stats] or Len, or acquire it directly, beside the queue (such
// permits are not listed by [Queue.Holders]). The per-key capacity is set when the keyed semaphore
// is made and never changes.
//
// It returns an error wrapping [ErrUnknownLane] if the queue has no lane
// of that name, or [ErrNoSemaphore] if the lane is not a keyed lane of
// this package (a global or rate lane, or a lane from another package).
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

// SetRate changes the rate lane registered as name to limit tokens a
// second and the given burst, from now on: the lane of [Queue.AddRateLane],
// whose limiter nobody else can reach, or of [NewRateLane]. The tokens in
// the bucket stay (up to the new burst); callers waiting for tokens keep
// the times they were given, and later calls wait at the new rate. A
// weight above the new burst fails at once with [ErrTooHeavy].
//
// SetRate returns [ErrInvalidRate] and [ErrInvalidCapacity] as
// AddRateLane does, an error wrapping [ErrUnknownLane] if the queue has no
// lane of that name, and [ErrNoSemaphore] if the lane is not a rate lane
// of this package.
func (q *Queue[K]) SetRate(name string, limit rate.Limit, burst int) error {
	r, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	if r.e.rate == nil {
		return fmt.Errorf("%w: lane %q (a %s lane) is not a rate lane of this package", ErrNoSemaphore, name, r.e.kind)
	}
	if !(limit > 0) || (math.IsInf(float64(limit), 1) && limit != rate.Inf) {
		return fmt.Errorf("lanequeue: lane %q: limit %v tokens a second: %w", name, float64(limit), ErrInvalidRate)
	}
	if burst < 1 {
		return fmt.Errorf("lanequeue: lane %q: burst %d: must be at least 1: %w", name, burst, ErrInvalidCapacity)
	}
	q.mu.Lock() // orders the update of fixedMax with other SetRate calls
	defer q.mu.Unlock()
	r.e.rate.setRate(limit, burst)
	if r.e.fixedMax.Load() >= 0 {
		r.e.fixedMax.Store(int64(burst))
	}
	return nil
}

// Names returns the names of the lanes in canonical order: keyed lanes,
// then global, then rate, each group by name.
func (q *Queue[K]) Names() []string {
	t := q.tbl()
	out := make([]string, len(t.ordered))
	for i, e := range t.ordered {
		out[i] = e.name
	}
	return out
}

// Stats returns a snapshot of every lane, in canonical order, with Name
// and Kind filled in. Each lane's snapshot is taken on its own: under
// concurrent use, the lanes' figures are not from one instant.
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

// Close closes the queue and every lane in it: waiters are woken with an
// error (AcquireAll then returns [ErrClosed]) and later calls fail with
// ErrClosed (TryAcquireAll returns false). Tickets already out stay valid
// and must still be released, and so must a ticket that an AcquireAll in
// progress during Close still obtains (one whose permits were all free);
// calls begun after Close returns fail. Close is idempotent.
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
