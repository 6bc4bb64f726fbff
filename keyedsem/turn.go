package keyedsem

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// The orders a key can serve its waiters in (Keyed.order, config.order):
// FIFO (0) pushes at the tail; the others push by a key (see turnKey).
const (
	orderPriorities = 1 << iota
	orderSequence
)

// WithPriorities makes each key serve its waiters by priority with aging:
// a call's [semaphore.Priority], higher first, in arrival order within a
// priority, where a waiter's priority rises by one for every step it has
// waited. Calls without it wait at priority 0.
//
// The bound: on one key, a waiter of priority p is overtaken only by
// waiters of a higher priority q that arrive less than (q-p)*step after
// it; a waiter arriving later than that goes behind it, whatever its
// priority. So, with priorities in [lo, hi], a waiter waits at most for the
// holders of its key and the waiters that arrive within (hi-lo)*step after
// it, on top of the ones already ahead when it came: no waiter is starved.
// Arrival is when the caller, finding its key busy, reads the
// semaphore's clock on its way into the queue (the system clock's
// monotonic reading, or WithClock's).
//
// Heavy requests keep their protection: a waiter at the head of its key's
// queue that does not fit is not overtaken by waiters behind it, only by a
// newcomer that goes ahead of it by the order above (and fits).
// TryAcquire never overtakes a waiter, whatever its priority.
//
// Each key's queue is ordered on its own: priorities never order different
// keys. The queue stays sorted as it ages (every waiter ages at the same
// rate), so a wait costs what a FIFO wait does, plus a walk past the
// waiters that a newcomer overtakes, under the key's lock.
//
// step must be positive; WithPriorities and WithSequenceOrder exclude each
// other ([ErrInvalidConfig]).
func WithPriorities(step time.Duration) Option {
	return func(c *config) { c.order |= orderPriorities; c.aging = step }
}

// WithSequenceOrder makes each key serve the callers waiting for it in
// ascending [semaphore.Sequence], equal sequences in arrival order: give
// each message its sequence (its timestamp, its number in its thread) and
// a key runs message 2 before message 3 even when 3 reached the server
// first. Calls without it wait at sequence 0.
//
// What it cannot fix: it orders only the callers that wait at the same
// time. A message that arrives after its successor has started (the key
// was free, or the successor was already granted) runs after it: nothing
// waits for a sequence that has not arrived, there is no reorder hold.
// A caller that must have the messages strictly in order must hold
// them back itself until the gap is filled. Sequence order
// reorders the queue, it does not hold the key back: a caller that finds
// the key free takes it at once, whatever its sequence.
//
// Heavy requests keep their protection as with [WithPriorities], and
// TryAcquire never overtakes a waiter. WithSequenceOrder and
// WithPriorities exclude each other ([ErrInvalidConfig]).
func WithSequenceOrder() Option { return func(c *config) { c.order |= orderSequence } }

// checkOrder is configure's check of the ordering options.
func checkOrder(c *config) error {
	switch {
	case c.order == orderPriorities|orderSequence:
		return fmt.Errorf("keyedsem: WithPriorities and WithSequenceOrder: a key orders its waiters one way: %w", ErrInvalidConfig)
	case c.barging && c.order != 0:
		return fmt.Errorf("keyedsem: WithBarging with WithPriorities or WithSequenceOrder: one ordering option at most: %w", ErrInvalidConfig)
	case c.order&orderPriorities != 0 && c.aging <= 0:
		return fmt.Errorf("keyedsem: WithPriorities(%v): the step must be positive: %w", c.aging, ErrInvalidConfig)
	}
	return nil
}

// The refusals of a call's options: static, so that refusing costs no
// allocation.
var (
	errNoPriorities = fmt.Errorf("keyedsem: Priority set without WithPriorities: %w", ErrInvalidConfig)
	errNoSequence   = fmt.Errorf("keyedsem: Sequence set without WithSequenceOrder: %w", ErrInvalidConfig)
	errNoGroup      = fmt.Errorf("keyedsem: Group set: a keyed semaphore has no fair share (WithFairShare is package semaphore's): %w", ErrInvalidConfig)
	errPriority     = fmt.Errorf("keyedsem: Priority out of [-semaphore.MaxPriority, semaphore.MaxPriority]: %w", ErrInvalidConfig)
)

// callOf reads a call's options: its weight (1 unless [semaphore.Weight]
// says otherwise) and its place among the key's waiters, or the refusal
// of a field s does not order by (any Group; Priority without
// WithPriorities; Sequence without WithSequenceOrder) or of a priority out
// of range. A lenient call (from lanequeue) drops what s does not order by
// instead.
func (s *Keyed[K]) callOf(opts []semaphore.AcquireOption) (int64, call.Turn, error) {
	s.mustBeMade()
	c, bad := call.Read(opts)
	if bad != call.BadNone {
		return 0, call.Turn{}, errPriority
	}
	n := int64(1)
	if c.WeightSet {
		n = c.Weight
	}
	t := c.Turn
	if c.Lenient {
		if s.order != orderPriorities {
			t.Priority = 0
		}
		if s.order != orderSequence {
			t.Sequence = 0
		}
		t.Group = ""
		return n, t, nil
	}
	switch {
	case t.Group != "":
		return 0, t, errNoGroup
	case t.Priority != 0 && s.order != orderPriorities:
		return 0, t, errNoPriorities
	case t.Sequence != 0 && s.order != orderSequence:
		return 0, t, errNoSequence
	}
	return n, t, nil
}

// turnKey returns the place in key order (waitq.Queue.PushAt) of a waiter
// of Turn t (nil: the zero Turn) on s, which orders by priority or
// sequence. For priorities it is arrival time minus priority times step:
// every waiter's effective priority then rises at the same rate as it
// waits, so the order of the queue is the order of effective priority at
// every later instant, and a waiter of priority p is overtaken only by
// priority q > p arriving less than (q-p)*step after it.
func (s *Keyed[K]) turnKey(t *call.Turn) int64 {
	var tt call.Turn
	if t != nil {
		tt = *t
	}
	if s.order == orderSequence {
		return tt.Sequence
	}
	// A fresh reading: the coarse clock's may be a millisecond old, or more
	// after a stall, which would let a newcomer pass waiters it should not.
	return agedKey(s.freshNow(), tt.Priority, s.aging)
}

// agedKey returns now - p*step, saturated to the int64 range, for now in
// [0, 2^62), |p| <= semaphore.MaxPriority and step > 0: a saturated key
// only ties with waiters that are as far out of reach (a step of hours
// times a priority near the bound).
func agedKey(now int64, p int, step int64) int64 {
	if p == 0 {
		return now
	}
	mag := uint64(p)
	if p < 0 {
		mag = uint64(-p)
	}
	hi, d := bits.Mul64(mag, uint64(step))
	if p > 0 { // now - d, at least math.MinInt64
		if hi != 0 || d > uint64(now)+1<<63 {
			return math.MinInt64
		}
		return int64(uint64(now) - d)
	}
	if hi != 0 || d > uint64(math.MaxInt64-now) { // now + d, at most math.MaxInt64
		return math.MaxInt64
	}
	return now + int64(d)
}
