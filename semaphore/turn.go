package semaphore

import (
	"context"
	"fmt"
	"time"
)

// Turn says where a caller joins the line when it has to wait: a small
// value passed per call to [Weighted.AcquireTurn]. Each field is read only
// by the semaphore option that orders waiters by it; the zero Turn asks for
// nothing, and on a FIFO semaphore [Weighted.AcquireTurn] with the zero
// Turn is [Weighted.Acquire].
//
// A field set on a semaphore made without its option (a Priority without
// [WithPriorities], say) is refused: the call fails with an error wrapping
// [ErrInvalidConfig] that names the missing option, and takes nothing. It
// is never ignored, since a caller that sets a priority counts on it.
type Turn struct {
	// Priority orders the waiters of a semaphore made WithPriorities:
	// higher first, rising by one for every step of the aging rate that
	// a waiter has waited. Plain Acquire calls have priority 0; negative
	// priorities go behind them. It must lie in [-MaxPriority,
	// MaxPriority].
	Priority int
	// Sequence orders the waiters of a key of a keyedsem.Keyed made
	// keyedsem.WithSequenceOrder: ascending. A semaphore has no sequence
	// order and refuses a Turn with a Sequence.
	Sequence int64
	// Group is the fair-share group (a tenant) of a semaphore made
	// WithFairShare.
	Group string
}

// MaxPriority bounds [Turn].Priority: a priority outside [-MaxPriority,
// MaxPriority] is refused with [ErrInvalidConfig]. A million classes are
// far more than a scheduler tells apart; the bound keeps a waiter's place
// in line within 64 bits whatever the aging step.
const MaxPriority = 1_000_000

// WithPriorities makes the semaphore serve its waiters by priority with
// aging: the waiter of the highest effective priority first, where a
// waiter's effective priority is its [Turn].Priority plus one for every
// step it has waited; among equal effective priorities, the one that
// came first. Plain [Weighted.Acquire] calls wait at priority 0.
//
// The aging bound: a waiter of priority p is overtaken only by waiters of
// a priority q > p that arrive less than (q-p)*step after it. So once it
// has waited (P-p)*step, where P is the highest priority callers use,
// nobody who arrives later gets ahead of it: it is served once the
// waiters then ahead of it are (a set that only shrinks) and its permits
// are free. With priorities in [0, 2] and step = 1s, a waiter of priority
// 0 is never passed by a newcomer after waiting 2s.
//
// Heavy requests keep their protection: a waiter at the head of the line
// that does not fit is not overtaken by those behind it, and TryAcquire
// still takes nothing while anyone waits. A caller that arrives with a
// place ahead of the head (a higher effective priority) takes its
// permits at once if they are free, as it would from an empty line.
//
// Time is read from the semaphore's clock ([WithClock]) once per waiting
// call. Priorities whose aging, |p|*step, would pass 2^61ns (73 years)
// count as that much. step <= 0 is refused. WithPriorities excludes the
// other ordering options. It costs nothing to semaphores made without it.
func WithPriorities(step time.Duration) Option {
	return func(c *config) {
		c.setOrder("WithPriorities")
		c.agingStep = step
	}
}

// setOrder records that the ordering option name was given: a second,
// different one makes configure refuse the pair.
func (c *config) setOrder(name string) {
	if c.order != "" && c.order != name && c.orderClash == "" {
		c.orderClash = c.order + " and " + name
	}
	c.order = name
}

// keyLimit bounds both parts of a waiter's key, arrival time and aging
// offset, to 2^61 in magnitude, so that their difference stays within
// ±2^62 and never overflows.
const keyLimit = 1 << 61

// aging is what WithPriorities leaves in a semaphore, immutable after New.
type aging struct {
	step  int64     // nanoseconds per priority; 0: FIFO, Push instead of PushAt
	limit int64     // the largest |priority| whose offset is within keyLimit
	epoch time.Time // arrival times count from here, on the semaphore's clock
}

func (a *aging) start(step time.Duration, now time.Time) {
	a.step, a.limit, a.epoch = int64(step), keyLimit/int64(step), now
}

// turnKey returns the place in line of a waiter of priority p arriving now:
// its arrival minus its priority times the step. A waiter's effective
// priority at time T is (T - key)/step, so ascending keys are descending
// effective priorities at every instant, and the queue stays in order
// without being sorted again as waiters age.
//
// Both parts are within ±keyLimit: an arrival past it (73 years after New)
// counts as keyLimit, and so does an offset |p|*step past it, which keeps
// the keys in priority order.
func (s *Weighted) turnKey(p int) int64 {
	a := min(max(int64(s.clock.Now().Sub(s.prio.epoch)), 0), keyLimit)
	var off int64
	switch q := int64(p); {
	case q > s.prio.limit:
		off = keyLimit
	case q < -s.prio.limit:
		off = -keyLimit
	default:
		off = q * s.prio.step
	}
	return a - off
}

// checkTurn returns the refusal of a Turn that asks for an order s does
// not have, nil if s can honour t.
func (s *Weighted) checkTurn(t Turn) error {
	switch {
	case t.Priority != 0 && s.prio.step == 0:
		return fmt.Errorf("semaphore: Turn.Priority %d on a semaphore without WithPriorities: %w", t.Priority, ErrInvalidConfig)
	case t.Priority > MaxPriority || t.Priority < -MaxPriority:
		return fmt.Errorf("semaphore: Turn.Priority %d out of range [-%d, %d]: %w", t.Priority, MaxPriority, MaxPriority, ErrInvalidConfig)
	case t.Sequence != 0:
		return fmt.Errorf("semaphore: Turn.Sequence %d: a semaphore has no sequence order (keyedsem.WithSequenceOrder orders a key's waiters): %w", t.Sequence, ErrInvalidConfig)
	case t.Group != "" && s.fair == nil:
		return fmt.Errorf("semaphore: Turn.Group %q on a semaphore without WithFairShare: %w", t.Group, ErrInvalidConfig)
	}
	return nil
}

// Honoured returns t with only the fields that s orders its waiters by
// and the others zero: Priority if s was made [WithPriorities], Group if
// [WithFairShare], never Sequence (a Weighted has no sequence order). It
// tells a caller that hands one Turn to many semaphores, each built with
// its own option (the lanes of a lanequeue.Queue), what each will take:
// [Weighted.AcquireTurn] and [Weighted.JoinTurn] refuse no field of what
// it returns, only a Priority out of range, which it leaves as it is. It
// reads settings fixed at New: no lock, no allocation.
func (s *Weighted) Honoured(t Turn) Turn {
	if s.prio.step == 0 {
		t.Priority = 0
	}
	if s.fair == nil {
		t.Group = ""
	}
	t.Sequence = 0
	return t
}

// AcquireTurn is [Weighted.Acquire] with a place in line: if the caller
// has to wait, t says where it joins the line, under the semaphore's
// ordering option ([WithPriorities], [WithFairShare]); on a FIFO semaphore the zero Turn
// is Acquire. It returns what Acquire returns, with the same ownership
// and cancellation, and one more refusal, checked first: a Turn field
// the semaphore has no option for, or a Priority out of range, fails at
// once with an error wrapping [ErrInvalidConfig], takes nothing, and
// counts in [Stats].Rejected.
//
// Cancellation: as for Acquire. A waiter that leaves gives up its place;
// if it was at the head, the next ones are served if they fit.
//
// AcquireTurn panics if ctx is nil.
func (s *Weighted) AcquireTurn(ctx context.Context, n int64, t Turn) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	if t != (Turn{}) {
		if err := s.checkTurn(t); err != nil {
			s.reject()
			return Permit{}, err
		}
	}
	// The fast path is Acquire's (see there): with nobody waiting there
	// is no line to take a place in.
	st := s.state.Load()
	if !neverEnds(ctx) && ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
	}
	if st&flagTimed != 0 {
		return s.acquireTimed(ctx, n, st, t)
	}
	return s.acquireSlow(ctx, n, t)
}

// DoTurn is [Weighted.Do] with a place in line: it acquires through
// [Weighted.AcquireTurn], runs fn, and releases when fn returns, also if
// fn panics. It returns the acquire error, or fn's error.
func (s *Weighted) DoTurn(ctx context.Context, n int64, t Turn, fn func(context.Context) error) error {
	p, err := s.AcquireTurn(ctx, n, t)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}
