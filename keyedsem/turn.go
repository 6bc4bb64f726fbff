package keyedsem

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/waitq"
	"github.com/sessionlane/lanes/semaphore"
)

// The orders a key can serve its waiters in (Keyed.order, config.order):
// FIFO (0) pushes at the tail; the others, alone or together, push by a
// place (see placeOf), so a wait costs a FIFO wait plus a walk, under the
// key's lock, past the waiters a newcomer overtakes.
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
// [semaphore.Sequence], then arrival (with [WithPriorities], within each
// priority band): give each message its number and a
// key runs message 2 before 3 if both wait. It orders only those waiting: a
// caller that finds the key free takes it, whatever its number, and nothing
// waits for a number that has not arrived, unless [WithReorderHold] is given.
func WithSequenceOrder() Option { return func(c *config) { c.order |= orderSequence } }

// WithReorderHold(d), with WithSequenceOrder, without WithPriorities and
// with an idle timeout above 0 (the entry keeps the key's last number),
// holds back a caller whose
// predecessor has not come, for at most d (positive), once the key has
// granted a number (a new or evicted key's first goes): see the package doc.
func WithReorderHold(d time.Duration) Option {
	return func(c *config) { c.hold, c.holdSet = d, true }
}

// checkOrder is configure's check of the ordering options.
func checkOrder(c *config) error {
	switch {
	case c.barging && c.order != 0:
		return fmt.Errorf("keyedsem: WithBarging lets callers pass the line, so it takes no WithPriorities or WithSequenceOrder: %w", semaphore.ErrInvalidConfig)
	case c.holdSet && c.order&orderSequence == 0:
		return fmt.Errorf("keyedsem: WithReorderHold without WithSequenceOrder: %w", semaphore.ErrInvalidConfig)
	case c.holdSet && c.order&orderPriorities != 0:
		// A higher priority lets a later number go first, and the hold
		// would then hold the whole line behind it for numbers that may
		// never come.
		return fmt.Errorf("keyedsem: WithReorderHold with WithPriorities: the hold waits for numbers in order, which priorities let pass: %w", semaphore.ErrInvalidConfig)
	case c.holdSet && c.hold <= 0:
		return fmt.Errorf("keyedsem: WithReorderHold(%v): must be positive: %w", c.hold, semaphore.ErrInvalidConfig)
	case c.holdSet && c.idle == 0:
		// The key's last number lives in its entry, which idle timeout 0
		// drops at every release: the hold would then hold back only
		// callers that came while a predecessor was still in, and let a
		// later number go as soon as the key was free.
		return fmt.Errorf("keyedsem: WithReorderHold with WithIdleTimeout(0): a key's last number is dropped with its entry at each release, so the hold would not hold: %w", semaphore.ErrInvalidConfig)
	case c.order&orderPriorities != 0 && c.aging <= 0:
		return fmt.Errorf("keyedsem: WithPriorities(%v): the step must be positive: %w", c.aging, semaphore.ErrInvalidConfig)
	}
	return nil
}

// The refusals of a call's options: static, so that refusing costs no
// allocation.
var (
	errNoPriorities = fmt.Errorf("keyedsem: Priority set without WithPriorities: %w", semaphore.ErrInvalidConfig)
	errNoSequence   = fmt.Errorf("keyedsem: Sequence set without WithSequenceOrder: %w", semaphore.ErrInvalidConfig)
	errNoGroup      = fmt.Errorf("keyedsem: Group set: a keyed semaphore has no fair share (WithFairShare is package semaphore's): %w", semaphore.ErrInvalidConfig)
	errLaneWeight   = fmt.Errorf("keyedsem: a lane's weight (lanequeue.LaneWeight): a keyed semaphore takes semaphore.Weight: %w", semaphore.ErrInvalidConfig)
	errPriority     = fmt.Errorf("keyedsem: Priority out of [-1000000, 1000000]: %w", semaphore.ErrInvalidConfig)
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
		if s.order&orderPriorities == 0 {
			t.Priority = 0
		}
		if s.order&orderSequence == 0 {
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
	case t.Priority != 0 && s.order&orderPriorities == 0:
		return 0, t, errNoPriorities
	case t.Sequence != 0 && s.order&orderSequence == 0:
		return 0, t, errNoSequence
	}
	return n, t, nil
}

// placeOf returns the place among its key's waiters (waitq.PushOrdered)
// of a waiter of turn t (nil: the zero Turn) on s: its priority and arrival under
// WithPriorities, its number as rank under WithSequenceOrder; both
// compose, a band's waiters in number order (see waitq.Ahead).
func (s *Keyed[K]) placeOf(t *call.Turn) waitq.Place {
	var pl waitq.Place
	if t == nil {
		t = &call.Turn{}
	}
	if s.order&orderPriorities != 0 {
		// The clock's arrival reading (hist.Clock.Arrival), not the coarse
		// clock's, which may be a millisecond old, or more after a stall,
		// and would let a newcomer pass waiters it should not.
		pl.Band, pl.Arrival = int32(t.Priority), max(s.hc.Arrival(), 0)
	}
	if s.order&orderSequence != 0 {
		pl.Rank = t.Sequence
	}
	return pl
}
