package lanequeue

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/semaphore"
)

// Observer learns the outcome of the work that a lane admitted: the error
// the work ended with and how long its ticket was held. An adaptive limit
// controller (adaptive.Controller) is one: it classifies the error and
// moves the lane's capacity. [Queue.ObserveLane] attaches one to a lane;
// [Queue.Do] and [Ticket.Finish] then call it.
//
// Observe is called by the goroutine that finishes the ticket, before any
// of the ticket's permits goes back, with no lock of the queue held; it
// must be safe for concurrent use, and should be quick (it runs on every
// finished ticket of the lane).
type Observer interface {
	Observe(err error, held time.Duration)
}

// ObserveLane makes o the observer of the lane named name: from then on,
// every ticket holding the lane that ends through [Queue.Do] or
// [Ticket.Finish] reports to o (a plain [Ticket.Release] reports nothing:
// it does not know the outcome). A nil o removes the lane's observer. A
// lane has one observer at most; a later call replaces it. It returns an
// error wrapping [ErrUnknownLane] if q has no such lane.
//
// For a global lane driven by an adaptive controller, give the controller
// the lane's semaphore ([Queue.GlobalSemaphore]) as its target and the
// controller to ObserveLane. A controller (an Observer with a Target
// method, as adaptive.Controller) that drives another budget than the
// lane's own semaphore is refused with an error wrapping
// [ErrInvalidConfig]: it would move one lane's capacity from another
// lane's outcomes. The check covers the lanes this package builds (keyed,
// global and rate lanes, whose budgets a controller can or cannot drive);
// a lane added with AddLane is not checked (its budget is its own).
func (q *Queue[K]) ObserveLane(name string, o Observer) error {
	ref, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	if o == nil {
		ref.e.obs.Store(nil)
		return nil
	}
	if d, ok := o.(interface{ Target() adaptive.Target }); ok {
		if err := drives(ref.e, d.Target()); err != nil {
			return err
		}
	}
	ref.e.obs.Store(&o)
	return nil
}

// drives checks that a controller over t may observe the lane e: t is the
// semaphore of e, when this package built e.
func drives[K comparable](e *laneEntry[K], t adaptive.Target) error {
	var sem *semaphore.Weighted
	switch l := e.lane.(type) {
	case *globalLane[K]:
		sem = l.s
	case *fairLane[K]:
		sem = l.s
	default:
		if !e.own && e.rate == nil {
			return nil // a lane of AddLane: its budget is not known here
		}
	}
	if sem == nil {
		return fmt.Errorf("lanequeue: ObserveLane(%q): a %s lane has no single budget for a controller to drive (observe the global lane whose semaphore it drives): %w",
			e.name, e.kind, ErrInvalidConfig)
	}
	if s, ok := t.(*semaphore.Weighted); !ok || s != sem {
		return fmt.Errorf("lanequeue: ObserveLane(%q): the controller drives another budget than the lane's semaphore (give adaptive.New the lane's Queue.GlobalSemaphore): %w",
			e.name, ErrInvalidConfig)
	}
	return nil
}

// Finish releases the ticket as [Ticket.Release] does, and first reports
// the work's outcome: each of the ticket's lanes that has an [Observer]
// ([Queue.ObserveLane]) is told err and how long the ticket was held, to
// about a millisecond (the queue's coarse clock, as [Ticket.Since]). It
// returns true the first time the ticket is released, by Finish or
// Release, and false ever after, reporting nothing then. [Queue.Do] calls
// it with fn's error; call it yourself instead of Release when you hold a
// ticket by hand and the lanes learn from outcomes.
func (t *Ticket[K]) Finish(err error) bool { return t.release(true, err) }

// observers appends the observers of g's lanes to obs.
func (g *grant[K]) observers(obs []Observer) []Observer {
	for _, h := range g.held() {
		if o := h.e.obs.Load(); o != nil {
			obs = append(obs, *o)
		}
	}
	return obs
}
