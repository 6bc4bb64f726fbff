package model

import "time"

// Order is the order in which a Semaphore model serves its waiters, the
// model of one ordering option of the real semaphore: FIFO (none),
// Priorities (WithPriorities) or FairShare (WithFairShare). The model
// keeps its waiters in arrival order and asks the order whom to serve
// next; an order that places waiters (fair share) does so as they join.
type Order interface {
	// takes reports whether the order honours t's Priority and Group
	// (a field without its option, or a priority out of the order's range,
	// is refused).
	takes(t Turn) bool
	// passes reports whether w, a newcomer whose permits are free, is
	// served at once ahead of the waiters, as from an empty line.
	passes(m *Semaphore, w Waiter) bool
	// join places w as it starts to wait behind m's queue (which may be
	// empty), charging for it what the order charges.
	join(m *Semaphore, w *Waiter)
	// before reports whether waiter a is served before waiter b, which
	// arrived before it.
	before(m *Semaphore, a, b Waiter) bool
	// served follows the grant of waiter w.
	served(m *Semaphore, w Waiter)
	// check returns an error if the order's own invariants fail.
	check(m *Semaphore) error
}

// FIFO is the order of a semaphore made without an ordering option:
// arrival order, Turns with a Priority or a Group refused.
func FIFO() Order { return fifo{} }

type fifo struct{}

func (fifo) takes(t Turn) bool                     { return t.Priority == 0 && t.Group == "" }
func (fifo) passes(*Semaphore, Waiter) bool        { return false }
func (fifo) join(*Semaphore, *Waiter)              {}
func (fifo) before(_ *Semaphore, _, _ Waiter) bool { return false }
func (fifo) served(*Semaphore, Waiter)             {}
func (fifo) check(*Semaphore) error                { return nil }

// Priorities is the order of semaphore.WithPriorities(step): the waiter
// served next is the one of the highest effective priority, its priority
// plus the steps it has waited on the model's clock (Semaphore.Advance),
// the first to arrive among equals. A newcomer ahead of every waiter
// whose permits are free takes them at once. The model computes that in
// plain int64 nanoseconds: priority times step must stay far below 2^61
// (the real semaphore's saturation is not modelled). A priority beyond
// ±maxPriority, the real package's bound, is refused.
func Priorities(step time.Duration, maxPriority int) Order {
	if step <= 0 {
		panic("model: aging step must be positive")
	}
	return priorities{step, maxPriority}
}

type priorities struct {
	step        time.Duration
	maxPriority int
}

func (o priorities) takes(t Turn) bool {
	return t.Group == "" && t.Priority <= o.maxPriority && t.Priority >= -o.maxPriority
}

func (o priorities) passes(m *Semaphore, w Waiter) bool {
	return o.before(m, w, m.queue[m.next()])
}

func (priorities) join(*Semaphore, *Waiter) {}

// effective returns w's effective priority now, in nanoseconds: its
// priority times the step plus how long it has waited.
func (o priorities) effective(m *Semaphore, w Waiter) time.Duration {
	return time.Duration(w.Priority)*o.step + (m.now - w.Arrived)
}

func (o priorities) before(m *Semaphore, a, b Waiter) bool {
	return o.effective(m, a) > o.effective(m, b)
}

func (priorities) served(*Semaphore, Waiter) {}
func (priorities) check(*Semaphore) error    { return nil }
