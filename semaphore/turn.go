package semaphore

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/waitq"
)

// AcquireOption is a per-call option of every lanes package's acquire
// calls. It allocates nothing; of one kind, the last counts. A lane refuses
// one it cannot honour (a Weight on a Weighted, an order it was not made
// with) with [ErrInvalidConfig]; a lanequeue.Queue drops those instead.
type AcquireOption = call.Option

// Priority(p) waits at priority p, |p| <= 1,000,000 (default 0), on a
// lane made with priorities ([WithPriorities]).
func Priority(p int) AcquireOption { return call.Make(call.KindPriority, "", int64(p)) }

// Group(g) waits in fair-share group g (default "") under [WithFairShare].
func Group(g string) AcquireOption { return call.Make(call.KindGroup, g, 0) }

// Sequence(seq) waits by ascending sequence number among its key's waiters,
// on a keyed lane made keyedsem.WithSequenceOrder. 0 is no option.
func Sequence(seq int64) AcquireOption { return call.Make(call.KindSequence, "", seq) }

// Weight(n) takes n permits (default 1) in keyedsem's and lanequeue's
// calls.
func Weight(n int64) AcquireOption { return call.Make(call.KindWeight, "", n) }

// WithPriorities orders the line by effective priority, a waiter's
// [Priority] plus one per step waited, then by arrival. With priorities in
// [0, 2] and step = 1s, no newcomer passes a waiter of priority 0 once it
// has waited 2s. step must be positive.
func WithPriorities(step time.Duration) Option {
	return func(c *config) {
		c.prioSet = true
		c.agingStep = step
	}
}

// aging is what WithPriorities leaves in a semaphore, immutable after New.
type aging struct {
	step int64 // nanoseconds per priority; 0: no priorities
}

// placeOf returns the place in line of a waiter of turn t arriving now:
// its priority and arrival, under WithPriorities (the rank, under
// WithFairShare, is given under mu: see fairKey). The order they make is
// waitq.Ahead's. The arrival is the clock's arrival reading
// (hist.Clock.Arrival: the CPU's counter where the kernel trusts it, or
// the fake clock's).
func (s *Weighted) placeOf(t *call.Turn) waitq.Place {
	if s.prio.step == 0 {
		return waitq.Place{}
	}
	return waitq.Place{Band: int32(t.Priority), Arrival: max(s.hc.Arrival(), 0)}
}

// errPriority refuses a Priority out of range; static, so that the
// refusal allocates nothing.
var errPriority = fmt.Errorf("semaphore: Priority out of range [-%d, %d]: %w", call.MaxPriority, call.MaxPriority, ErrInvalidConfig)

// turnOf reads a call's options into c, the caller's zero Call, whose
// Turn is then the turn s orders by; or it returns the refusal of an
// option it has no order for (a lenient call, from lanequeue, drops such
// an option instead). c is the caller's, filled in place (call.Fold).
func (s *Weighted) turnOf(opts []AcquireOption, c *call.Call) error {
	if c.Fold(opts) != call.BadNone {
		return errPriority
	}
	t := &c.Turn
	if c.Lenient {
		if s.prio.step == 0 {
			t.Priority = 0
		}
		if s.fair == nil {
			t.Group = ""
		}
		t.Sequence = 0
		return nil
	}
	switch {
	case c.WeightSet:
		return fmt.Errorf("semaphore: Weight(%d): a Weighted's calls take their weight as an argument: %w", c.Weight, ErrInvalidConfig)
	case c.LaneWeight:
		return fmt.Errorf("semaphore: a lane's weight (lanequeue.LaneWeight) on a Weighted, whose calls take their weight as an argument: %w", ErrInvalidConfig)
	case t.Priority != 0 && s.prio.step == 0:
		return fmt.Errorf("semaphore: Priority(%d) on a semaphore without WithPriorities: %w", t.Priority, ErrInvalidConfig)
	case t.Sequence != 0:
		return fmt.Errorf("semaphore: Sequence(%d): a semaphore has no sequence order (keyedsem.WithSequenceOrder orders a key's waiters): %w", t.Sequence, ErrInvalidConfig)
	case t.Group != "" && s.fair == nil:
		return fmt.Errorf("semaphore: Group(%q) on a semaphore without WithFairShare: %w", t.Group, ErrInvalidConfig)
	}
	return nil
}
