package lanequeue

import (
	"fmt"
	"time"
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
// controller to ObserveLane.
func (q *Queue[K]) ObserveLane(name string, o Observer) error {
	ref, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownLane, name)
	}
	if o == nil {
		ref.e.obs.Store(nil)
		return nil
	}
	ref.e.obs.Store(&o)
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
