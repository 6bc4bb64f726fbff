package model

import (
	"fmt"
	"slices"
	"time"
)

// Order is the order in which a Semaphore model serves its waiters, the
// model of the real semaphore's ordering options: FIFO (none), Priorities
// (WithPriorities), FairShare (WithFairShare), or PrioritiesFairShare
// (both). The model
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

// Overtakes is the rule of every ordered lane for a newcomer w and a
// waiter x that came before it: across priorities, w goes ahead only if
// its priority is above x's raised by one for every whole step x has
// waited when w comes; within one priority, only if its Key (a fair-share
// start, a sequence number) is lower. A newcomer is placed by walking
// from the newest waiter and stopping at the first it does not overtake.
func Overtakes(w, x Waiter, step time.Duration) bool {
	if w.Priority == x.Priority {
		return w.Key < x.Key
	}
	d := w.Priority - x.Priority
	if d <= 0 {
		return false
	}
	if step <= 0 {
		return true
	}
	return time.Duration(d) > max(w.Arrived-x.Arrived, 0)/step
}

// checkOvertaking checks a queue in service order whose waiters' ids are
// their arrival order: a waiter ahead of one that came before it must
// overtake it. That is what bounds every wait.
func checkOvertaking[W any](queue []W, waiter func(W) Waiter, overtakes func(w, x Waiter) bool) error {
	for i := range queue {
		for j := i + 1; j < len(queue); j++ {
			a, b := waiter(queue[i]), waiter(queue[j])
			if a.ID > b.ID && !overtakes(a, b) {
				return fmt.Errorf("model: waiter %+v is ahead of %+v, which came first and which it does not overtake", a, b)
			}
		}
	}
	return nil
}

// PrioritiesFairShare is the order of semaphore.WithPriorities(step) with
// WithFairShare(weight): bands with aging, start-time fair queuing within
// a band (Overtakes, with the fair-share start as Key), each band charged
// and timed on its own (see FairShare). A band's virtual time moves to the
// key of its waiter served if it is later, and never back while the band
// has waiters. A
// newcomer is charged and placed as it joins, and served then if it comes
// first and fits, as under FairShare alone.
func PrioritiesFairShare(step time.Duration, maxPriority int, weight func(group string) int) Order {
	if step <= 0 {
		panic("model: aging step must be positive")
	}
	return &composed{step: step, maxPriority: maxPriority, fair: FairShare(weight).(*fairShare)}
}

type composed struct {
	step        time.Duration
	maxPriority int
	fair        *fairShare
	line        []int // waiter ids in service order; may hold ids gone since
}

func (o *composed) takes(t Turn) bool {
	return t.Priority <= o.maxPriority && t.Priority >= -o.maxPriority
}

func (*composed) passes(*Semaphore, Waiter) bool { return false }

func (o *composed) join(m *Semaphore, w *Waiter) {
	o.fair.join(m, w)
	waiting := make(map[int]Waiter, len(m.queue))
	for _, x := range m.queue {
		waiting[x.ID] = x
	}
	o.line = slices.DeleteFunc(o.line, func(id int) bool { _, ok := waiting[id]; return !ok })
	at := len(o.line)
	for at > 0 && Overtakes(*w, waiting[o.line[at-1]], o.step) {
		at--
	}
	o.line = slices.Insert(o.line, at, w.ID)
}

func (o *composed) before(_ *Semaphore, a, b Waiter) bool {
	return slices.Index(o.line, a.ID) < slices.Index(o.line, b.ID)
}

func (o *composed) served(_ *Semaphore, w Waiter) {
	b := o.fair.band(w.Priority)
	b.v = max(b.v, w.Key)
}

// check: every waiter is in the line, and the line keeps the rule.
func (o *composed) check(m *Semaphore) error {
	queue := slices.Clone(m.queue)
	for _, w := range queue {
		if !slices.Contains(o.line, w.ID) {
			return fmt.Errorf("model: waiter %+v is not in the line", w)
		}
	}
	slices.SortStableFunc(queue, func(a, b Waiter) int { return slices.Index(o.line, a.ID) - slices.Index(o.line, b.ID) })
	return checkOvertaking(queue, func(w Waiter) Waiter { return w }, func(w, x Waiter) bool { return Overtakes(w, x, o.step) })
}
