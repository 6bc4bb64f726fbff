package testkit

import (
	"context"
	"sync/atomic"
	"testing"
)

// Gate is a context that never ends and that can hold, at a point the test
// knows, the goroutine that looks at it: once shut, the next call of its
// Err reports itself (Held) and blocks until Open. A woken waiter of a
// barging semaphore must look at its context after the release that woke
// it and before it takes the permits (a context that ended before the
// release wins), so a Gate holds it there, between the release and its
// claim, where a test would otherwise race it. Err returns nil always.
//
// One call is held per Shut; a Gate shut again after Open holds the next
// call. Make it with NewGate.
type Gate struct {
	context.Context
	done chan struct{} // never closed: Done is not nil, so Err is looked at
	shut atomic.Bool
	held chan struct{}
	open chan struct{}
}

// NewGate returns an open Gate.
func NewGate() *Gate {
	return &Gate{
		Context: context.Background(),
		done:    make(chan struct{}),
		held:    make(chan struct{}, 1),
		open:    make(chan struct{}, 1),
	}
}

// Done returns a channel that is never closed.
func (g *Gate) Done() <-chan struct{} { return g.done }

// Err returns nil; if the Gate is shut, it first reports the call to Held
// and blocks until Open.
func (g *Gate) Err() error {
	if g.shut.CompareAndSwap(true, false) {
		g.held <- struct{}{}
		<-g.open
	}
	return nil
}

// Shut makes the next call of Err block until Open.
func (g *Gate) Shut() { g.shut.Store(true) }

// Held waits until a call of Err is blocked by the Gate, and fails t,
// naming what, if none is within Deadline.
func (g *Gate) Held(t testing.TB, what string) {
	t.Helper()
	Recv(t, g.held, what)
}

// Open lets the call of Err that the Gate holds (or the next one, if none
// is held yet) return.
func (g *Gate) Open() { g.open <- struct{}{} }
