package lanequeue

import (
	"fmt"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/semaphore"
)

// Observer learns the outcome of work a lane admitted, from [Queue.Do] and
// [Ticket.Finish], before the permits go back: the error and the time held.
// It must be quick and safe for concurrent use.
type Observer interface {
	Observe(err error, held time.Duration)
}

// ObserveLane makes o the lane's one observer (nil removes it). A
// controller of another budget than the lane's own is refused
// ([semaphore.ErrInvalidConfig]), as is an unknown lane.
func (q *Queue[K]) ObserveLane(name string, o Observer) error {
	ref, ok := q.tbl().byName[name]
	if !ok {
		return fmt.Errorf("lanequeue: unknown lane %q: %w", name, semaphore.ErrInvalidConfig)
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
// semaphore of e, when e is this package's keyed, global or fair lane.
func drives[K comparable](e *laneEntry[K], t adaptive.Target) error {
	var sem *semaphore.Weighted
	switch l := e.lane.(type) {
	case *globalLane[K]:
		sem = l.s
	case *fairLane[K]:
		sem = l.s
	case *keyedLane[K], *rateLane[K], *tokenLane[K]:
	default:
		return nil // another package's lane: its budget is not known here
	}
	if sem == nil {
		return fmt.Errorf("lanequeue: ObserveLane(%q): a %s lane has no single budget for a controller to drive (observe the global lane whose semaphore it drives): %w",
			e.name, e.kind, semaphore.ErrInvalidConfig)
	}
	if s, ok := t.(*semaphore.Weighted); !ok || s != sem {
		return fmt.Errorf("lanequeue: ObserveLane(%q): the controller drives another budget than the lane's semaphore (give adaptive.New the semaphore of the lane's NewGlobalLane): %w",
			e.name, semaphore.ErrInvalidConfig)
	}
	return nil
}

// Finish releases the ticket as Release does, first telling each lane's
// [Observer] err and the time held.
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
