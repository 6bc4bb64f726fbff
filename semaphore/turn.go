package semaphore

import (
	"context"
	"fmt"
)

// This file is the fair-share branch's stand-in for helper pri's Turn and
// AcquireTurn (the brief fixes the type): the lead keeps pri's version and
// its one call of fairKey in the slow path.

// Turn says where a caller joins the line when it must wait. It is a small
// value passed per call; the zero Turn is plain FIFO behaviour. A field
// that the semaphore has no policy for is refused (see
// [Weighted.AcquireTurn]), never ignored.
type Turn struct {
	Priority int    // WithPriorities: higher first, with aging
	Sequence int64  // WithSequenceOrder: ascending
	Group    string // WithFairShare: the fair-share group (a tenant)
}

// AcquireTurn is [Weighted.Acquire] with a place in line: t says where the
// caller waits if it must. With the zero Turn it is Acquire. On a semaphore
// made with [WithFairShare], t.Group is the caller's group (Acquire's is
// ""). A field set for a policy the semaphore was not made with fails at
// once, before anything is taken, with an error wrapping
// [ErrInvalidConfig] that names the missing option (counted in Rejected).
func (s *Weighted) AcquireTurn(ctx context.Context, n int64, t Turn) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	if err := s.checkTurn(t); err != nil {
		s.reject()
		return Permit{}, err
	}
	st := s.state.Load()
	if ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
		if p, ok := s.acquireContended(ctx, n); ok {
			return p, nil
		}
	}
	return s.acquireSlow(ctx, n, t)
}

// checkTurn refuses a Turn field that s has no policy for.
func (s *Weighted) checkTurn(t Turn) error {
	switch {
	case t.Priority != 0:
		return fmt.Errorf("semaphore: Turn.Priority %d needs WithPriorities: %w", t.Priority, ErrInvalidConfig)
	case t.Sequence != 0:
		return fmt.Errorf("semaphore: Turn.Sequence %d needs WithSequenceOrder: %w", t.Sequence, ErrInvalidConfig)
	case t.Group != "" && s.fair == nil:
		return fmt.Errorf("semaphore: Turn.Group %q needs WithFairShare: %w", t.Group, ErrInvalidConfig)
	}
	return nil
}
