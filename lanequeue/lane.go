package lanequeue

import (
	"context"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// Kind is a lane's kind, and its place in the canonical order.
type Kind int

const (
	Keyed  Kind = iota // a budget per key: first
	Global             // a budget shared by every key
	Rate               // how often work starts: nothing is given back
)

// String returns "keyed", "global" or "rate".
func (k Kind) String() string {
	switch k {
	case Keyed:
		return "keyed"
	case Global:
		return "global"
	case Rate:
		return "rate"
	}
	return "unknown"
}

// Lane is one named budget of a [Queue]. This package's lanes and others
// (package redislane's) implement it, for [Queue.Add]; an implementation
// must be safe for concurrent use.
type Lane[K comparable] interface {
	Kind() Kind       // where the lane stands in the canonical order
	MaxWeight() int64 // the most it grants one key; heavier calls are refused first
	// Acquire takes n permits for key, waiting if need be, under package
	// semaphore's contract (a rate lane's permit is the zero Permit).
	Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error)
	TryAcquire(key K, n int64) (semaphore.Permit, bool) // without waiting
	Stats() LaneStats
	Close() // fails waiters and later calls; permits out stay valid
}

// Leased is what a [Lane] implements whose permits can end before they are
// released: a fleet lane's, whose lease in Redis can be lost (package
// redislane's AsLane and AsKeyedLane). PermitContext returns the context
// of a permit the lane granted, which ends when the permit does (its lease
// lost, the lane closed), with the reason as its cause, or nil for a
// permit it knows nothing of. It may be called more than once for a
// permit, from several goroutines at once. The work a
// ticket admits ([Queue.Do]'s fn, [WorkContext]) ends with the first such
// permit of the ticket to end, since the lane may then grant the permit to
// another holder.
type Leased interface {
	PermitContext(p semaphore.Permit) context.Context
}

// LaneStats is a snapshot of one lane.
type LaneStats struct {
	Name     string // the name the lane has in the queue (Queue.Stats sets it)
	Kind     Kind   // Keyed, Global or Rate
	Capacity int64  // capacity of a global lane, per-key capacity of a keyed lane, burst of a rate lane
	Held     int64  // weight held now, over all keys
	Waiters  int    // callers waiting now
	Keys     int    // entries alive (keyed lanes)
	Closed   bool   // the lane is closed (by the queue's Close, or on its own)
	// Fleet: the lane's budget is kept outside the process and shared by
	// a fleet of instances (package redislane's lanes): Capacity is the
	// fleet's, the same whole on every instance, while Held, Waiters and
	// Keys are this instance's own. Exporters report such a capacity
	// once, not once per instance.
	Fleet bool
	// HoldsRunOut: of a keyed lane made keyedsem.WithReorderHold, the
	// callers that went when their hold ran out (keyedsem.Stats.HoldsRunOut).
	HoldsRunOut uint64
	// Used: of a rate lane, what its window counts now, the rate lane's
	// Held: a NewTokenLane lane's tokens charged in the last minute (as
	// settled; a debt takes it past Capacity), a NewRateLane lane's
	// requests its limiter has not refilled (the burst less the
	// limiter's tokens, rounded up; reservations that wait take it past
	// Capacity). Used / Capacity is the lane's usage. 0 for a global or
	// keyed lane, whose use is Held, and for a fleet's rate lane
	// (redislane.AsRateLane), whose count Redis keeps.
	Used int64
	// The lane's pauses ([Queue.Cooldown]). CooldownSet: a pause has been
	// set at least once (the exporters send the figures below from then
	// on). CooldownLeft: how long the pause has left now (0: none).
	// CooldownWaiters: the callers waiting it out now, each holding this
	// lane and the lanes it took before it (they count in those lanes'
	// Held, not in any lane's Waiters). CooldownRefused: the calls that
	// failed because their deadline came before the pause ended: at once,
	// holding nothing (in no lane's Counters), or while they waited it
	// out, having taken this lane (then acquired and released in its
	// Counters).
	CooldownSet     bool
	CooldownLeft    time.Duration
	CooldownWaiters int
	CooldownRefused uint64

	// Counters: the lane's own, as package semaphore defines them; a call
	// counts in every lane it reached. A rate lane gives nothing back.
	semaphore.Counters
	semaphore.Timings // of a global or keyed lane made WithHistograms
}

// badLane is a lane made with settings out of range: [Queue.Add] refuses
// it with err, and used on its own it refuses every call with err. Its
// Stats are of's, the lane it would have been, when there is one (a global
// lane over a semaphore of capacity 0: open, and it may grow), and its
// Close closes of; else it reports a closed lane with no figures.
type badLane[K comparable] struct {
	kind Kind
	err  error
	of   Lane[K]
}

func (l *badLane[K]) Kind() Kind       { return l.kind }
func (l *badLane[K]) MaxWeight() int64 { return 0 }
func (l *badLane[K]) Acquire(context.Context, K, int64) (semaphore.Permit, error) {
	return semaphore.Permit{}, l.err
}
func (l *badLane[K]) TryAcquire(K, int64) (semaphore.Permit, bool) { return semaphore.Permit{}, false }
func (l *badLane[K]) Stats() LaneStats {
	if l.of != nil {
		return l.of.Stats()
	}
	return LaneStats{Kind: l.kind, Closed: true}
}

// Close closes of, the lane it would have been, if there is one: a
// global lane's Close closes its semaphore, refused or not.
func (l *badLane[K]) Close() {
	if l.of != nil {
		l.of.Close()
	}
}
