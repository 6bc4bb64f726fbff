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
// A line ordered by priority stays sorted as its waiters age (they all
// age at the same rate), so a wait costs a FIFO wait plus a walk, under
// the key's lock, past the waiters a newcomer overtakes.
const (
	orderPriorities = 1 << iota
	orderSequence
)

// WithPriorities orders each key's line by [semaphore.Priority] with aging,
// as [semaphore.WithPriorities] does: with priorities in [lo, hi], a waiter
// waits at most for its key's holders, those ahead when it came (found its
// key busy) and those that arrive within (hi-lo)*step after it. step must
// be positive.
func WithPriorities(step time.Duration) Option {
	return func(c *config) { c.order |= orderPriorities; c.aging = step }
}

// WithSequenceOrder orders each key's line by ascending
// [semaphore.Sequence], then arrival: give each message its number and a
// key runs message 2 before 3 if both wait. It orders only those waiting: a
// caller that finds the key free takes it, whatever its number, and nothing
// waits for a number that has not arrived, unless [WithReorderHold] is given.
func WithSequenceOrder() Option { return func(c *config) { c.order |= orderSequence } }

// WithReorderHold(d), with WithSequenceOrder, holds back a caller whose
// predecessor has not come, for at most d (positive), once the key has
// granted a number (a new or evicted key's first goes): see the package doc.
func WithReorderHold(d time.Duration) Option {
	return func(c *config) { c.hold, c.holdSet = d, true }
}

// checkOrder is configure's check of the ordering options.
func checkOrder(c *config) error {
	switch {
	case c.order == orderPriorities|orderSequence:
		return fmt.Errorf("keyedsem: WithPriorities and WithSequenceOrder: a key orders its waiters one way: %w", ErrInvalidConfig)
	case c.barging && c.order != 0:
		return fmt.Errorf("keyedsem: WithBarging with WithPriorities or WithSequenceOrder: one ordering option at most: %w", ErrInvalidConfig)
	case c.holdSet && c.order != orderSequence:
		return fmt.Errorf("keyedsem: WithReorderHold without WithSequenceOrder: %w", ErrInvalidConfig)
	case c.holdSet && c.hold <= 0:
		return fmt.Errorf("keyedsem: WithReorderHold(%v): must be positive: %w", c.hold, ErrInvalidConfig)
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
	errLaneWeight   = fmt.Errorf("keyedsem: a lane's weight (lanequeue.LaneWeight): a keyed semaphore takes semaphore.Weight: %w", ErrInvalidConfig)
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
	case c.LaneWeight:
		return 0, t, errLaneWeight
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
