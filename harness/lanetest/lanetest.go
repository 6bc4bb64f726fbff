// Package lanetest has lanes for the tests of the packages built on
// lanequeue: lanes that behave as other packages' lanes do, without those
// packages. It is for tests only.
package lanetest

import (
	"context"
	"sync"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Leased is a global lane whose permits can end before their release, as
// a fleet lane's do when their lease is lost (lanequeue.Leased): End ends
// the context of every permit it has given one.
type Leased struct {
	lanequeue.Lane[string]
	mu   sync.Mutex
	ends []context.CancelCauseFunc
}

// NewLeased returns a Leased lane over a semaphore of capacity.
func NewLeased(capacity int64) *Leased {
	return &Leased{Lane: lanequeue.NewGlobalLane[string](semaphore.New(capacity))}
}

// PermitContext returns a context that End ends.
func (l *Leased) PermitContext(semaphore.Permit) context.Context {
	ctx, end := context.WithCancelCause(context.Background())
	l.mu.Lock()
	l.ends = append(l.ends, end)
	l.mu.Unlock()
	return ctx
}

// End ends the contexts of the permits out, with cause: their leases lost.
func (l *Leased) End(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, end := range l.ends {
		end(cause)
	}
}
