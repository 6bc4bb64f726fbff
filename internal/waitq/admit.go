package waitq

import (
	"context"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// Gate is an owner's answers to admission's questions about a caller,
// decided under the owner's lock before [Admit] looks at the state word,
// whereas the word changes without the lock. So they are data, read in
// Admit's loop, which calls the owner (through its type parameter) only
// once the caller's permits are free (docs/internals.md has the cost of
// the other way). No answer changes while the lock is held, but for a
// keyed semaphore's closed flag, which Close sets before it takes each
// key's lock to fail its waiters: a caller that read it clear is failed
// there once queued.
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
	// in the state word st, comes before every waiter (nobody waits, it
	// goes ahead of the head, or it may barge) and the owner's own rules
	// let it take them (a keyed semaphore's reorder hold).
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
// barging waiter that was woken and lost (Barger.Reclaim). Its answer,
// first that applies: Refused with g.Refuse; CtxEnded if the context has
// ended; Taken if the permits are free and the caller comes first
// (g.Head or Taker.First), with the token Take made; Refused with g.Full;
// else Queued, the word marked. It must be called with the owner's lock
// held, which it leaves held: the owner counts the outcome, pushes a
// queued waiter, and unlocks.
//
// The mark is set by a compare-and-swap from the very word found too
// short of permits (or the caller not first): see the package doc for why
// no waiter then misses permits. The context is looked at after each load
// of the word, so permits given back after it ended never go to it: if the
// load saw the release, it sees the ending too (atomics are sequentially
// consistent); and an ended context comes before the queue's refusal.
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
