package testkit

import (
	"context"
	"time"
)

// Expiring is a context whose deadline passes when the test says
// (Expire), so that a call's wait surely began before it: the deadline of
// a timer may pass before the call reaches the lane it should fail on,
// and the call then fails elsewhere (before any lane, with the bare
// context error). Err returns context.DeadlineExceeded once expired.
//
// Deadline reports At, if set, for the code that looks ahead (a rate lane
// refuses at once a call whose token comes after its deadline); the
// context still ends only at Expire. Make it with NewExpiring.
type Expiring struct {
	context.Context           // Background: its values
	At              time.Time // what Deadline reports; the zero time: no deadline
	done            chan struct{}
}

// NewExpiring returns an Expiring context that has not expired.
func NewExpiring() *Expiring {
	return &Expiring{Context: context.Background(), done: make(chan struct{})}
}

// Deadline returns At, and whether it is set.
func (c *Expiring) Deadline() (time.Time, bool) { return c.At, !c.At.IsZero() }

// Done returns a channel closed by Expire.
func (c *Expiring) Done() <-chan struct{} { return c.done }

// Expire ends the context with context.DeadlineExceeded. It must be
// called once.
func (c *Expiring) Expire() { close(c.done) }

// Err returns context.DeadlineExceeded once Expire was called, else nil.
func (c *Expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
