package waitq

import (
	"context"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// Gate is an owner's answers to admission's questions about a caller,
// decided under the owner's lock before [Admit] looks at the state word.
// None of them changes while the lock is held (the bounds' counts and the
// closed flag change only under it), whereas the word changes without
// it; so they are data, read in Admit's loop, which calls the owner
// (through its type parameter) only once the caller's permits are free.
// (An admission that asked the owner every question cost the contended
// FIFO rows 9-23%: docs/internals.md.)
type Gate struct {
	// Refuse refuses the call whatever the permits (closed, heavier than
	// the capacity), or is nil.
	Refuse error
	// Full refuses the caller as a waiter (the queue's bounds), or is nil.
	Full error
	// Head reports that the caller comes before every waiter whatever
	// they are (a barging waiter that was the head); else the owner's
	// First decides.
	Head bool
	// Place is the caller's place in line, for First.
	Place Place
	// Mask and Shift are the layout of the permits in the word: available
	// = int64(st&Mask) >> Shift.
	Mask  uint64
	Shift uint
	// Set and Clear are the mark that sends releases through the lock:
	// the word becomes (st|Set)&^Clear.
	Set, Clear uint64
}

// Taker is what Admit asks of an owner once a caller's permits are free.
// Its methods are called with the owner's lock held.
type Taker interface {
	// First reports whether a caller at place pl, whose permits are free
	// in the state word st, comes before every waiter: nobody waits, it
	// goes ahead of the head, or it may barge.
	First(st uint64, pl Place) bool
	// Take takes n permits from the state word st for the caller, by one
	// compare-and-swap from st, with a token if the owner makes it under
	// the lock (else nil); it reports false, taking nothing, if the word
	// moved.
	Take(st uint64, n int64) (*permit.Token, bool)
}

// Admission is what [Admit] decided.
type Admission uint8

const (
	// Queued: the caller waits; the owner pushes its waiter, counts it
	// and unlocks.
	Queued Admission = iota
	// Taken: the permits (and the token, if the owner's Take made one) are
	// the caller's.
	Taken
	// Refused: the gate's Refuse or Full, returned as the error.
	Refused
	// CtxEnded: the caller's context ended; the error is its Err.
	CtxEnded
)

// Admit is the admission of every caller that may wait for n permits
// (n > 0) of an owner whose state word is word: of a newcomer, and of a
// barging waiter that was woken and lost (Barger.Reclaim). It gives the
// permits at once if they are free and the caller comes first (Taken:
// Gate.Head or Taker.First),
// refuses the caller (Refused, CtxEnded), or marks the word and tells the
// owner to queue it (Queued), as g says. It must be called with the
// owner's lock held, which it leaves held: the owner counts the outcome,
// pushes a queued waiter, and unlocks.
//
// Why no waiter misses permits, and an ended context wins: the mark is
// set by a compare-and-swap from the very word that was found too short
// of permits (or the caller not first), so a release that gave permits
// back since makes it fail and the caller looks again (see the package
// doc). The context is looked at after each load of the word, so permits
// that a release gave back after the context ended never go to it: if
// the load saw the release, it sees the ending too (atomics are
// sequentially consistent).
func Admit[T Taker](ctx context.Context, t T, word *atomic.Uint64, n int64, g *Gate) (*permit.Token, Admission, error) {
	if g.Refuse != nil {
		return nil, Refused, g.Refuse
	}
	for {
		st := word.Load()
		if err := ctx.Err(); err != nil {
			return nil, CtxEnded, err
		}
		if int64(st&g.Mask)>>g.Shift >= n && (g.Head || t.First(st, g.Place)) {
			if tok, ok := t.Take(st, n); ok {
				return tok, Taken, nil
			}
			continue
		}
		if g.Full != nil {
			return nil, Refused, g.Full
		}
		nst := (st | g.Set) &^ g.Clear
		if nst == st || word.CompareAndSwap(st, nst) {
			return nil, Queued, nil
		}
	}
}
