package semaphore

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/internal/call"
)

// AcquireOption is a per-call option of the acquire calls of every lanes
// package ([Weighted.Acquire], [Weighted.Join], [Weighted.Do], and those of
// keyedsem and lanequeue): where the caller joins the line if it has to
// wait, and, for calls that take no weight argument, its weight. It is a
// small value, so passing options allocates nothing. The zero
// AcquireOption sets nothing; of options of one kind, the last counts.
//
// A lane orders by what it was built for (see the package doc): a call
// that sets a field a [Weighted] or keyedsem.Keyed has no order for (a
// [Priority] without [WithPriorities], say) is refused with an error
// wrapping [ErrInvalidConfig] that names it, and takes nothing, since a
// caller that sets a priority counts on it. A lanequeue.Queue, which hands
// one call's options to lanes of every kind, passes each lane only what
// it orders by.
type AcquireOption = call.Option

// Priority places the call by priority p on a lane made with priorities
// ([WithPriorities], keyedsem.WithPriorities): higher first, with aging.
// Calls without it have priority 0. p must lie in [-MaxPriority,
// MaxPriority]; Priority(0) is no option.
func Priority(p int) AcquireOption { return call.Make(call.KindPriority, "", int64(p)) }

// Group places the call in fair-share group g (a tenant) on a lane made
// [WithFairShare]. Calls without it are in the group ""; Group("") is no
// option.
func Group(g string) AcquireOption { return call.Make(call.KindGroup, g, 0) }

// Sequence places the call by sequence number seq among the waiters of
// its key on a keyed lane made keyedsem.WithSequenceOrder: ascending. A
// Weighted has no sequence order. Sequence(0) is no option.
func Sequence(seq int64) AcquireOption { return call.Make(call.KindSequence, "", seq) }

// Weight takes n permits in a call that has no weight argument:
// keyedsem.Keyed's calls (n of the key's budget) and lanequeue.Queue's
// (n on every lane). The default is 1; a Weighted's calls take their
// weight as an argument and refuse this option.
func Weight(n int64) AcquireOption { return call.Make(call.KindWeight, "", n) }

// MaxPriority bounds [Priority]: a priority outside [-MaxPriority,
// MaxPriority] is refused with [ErrInvalidConfig].
const MaxPriority = call.MaxPriority

// WithPriorities makes the semaphore serve its waiters by priority with
// aging: the waiter of the highest effective priority first, where a
// waiter's effective priority is its [Priority] plus one for every
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

// errPriority refuses a Priority out of range; static, so that the
// refusal allocates nothing.
var errPriority = fmt.Errorf("semaphore: Priority out of range [-%d, %d]: %w", MaxPriority, MaxPriority, ErrInvalidConfig)

// turnOf reads a call's options into the turn s orders by, or returns the
// refusal of an option it has no order for (a lenient call, from
// lanequeue, drops such an option instead).
func (s *Weighted) turnOf(opts []AcquireOption) (call.Turn, error) {
	c, bad := call.Read(opts)
	if bad != call.BadNone {
		return call.Turn{}, errPriority
	}
	t := c.Turn
	if c.Lenient {
		if s.prio.step == 0 {
			t.Priority = 0
		}
		if s.fair == nil {
			t.Group = ""
		}
		t.Sequence = 0
		return t, nil
	}
	switch {
	case c.WeightSet:
		return t, fmt.Errorf("semaphore: Weight(%d): a Weighted's calls take their weight as an argument: %w", c.Weight, ErrInvalidConfig)
	case t.Priority != 0 && s.prio.step == 0:
		return t, fmt.Errorf("semaphore: Priority(%d) on a semaphore without WithPriorities: %w", t.Priority, ErrInvalidConfig)
	case t.Sequence != 0:
		return t, fmt.Errorf("semaphore: Sequence(%d): a semaphore has no sequence order (keyedsem.WithSequenceOrder orders a key's waiters): %w", t.Sequence, ErrInvalidConfig)
	case t.Group != "" && s.fair == nil:
		return t, fmt.Errorf("semaphore: Group(%q) on a semaphore without WithFairShare: %w", t.Group, ErrInvalidConfig)
	}
	return t, nil
}
