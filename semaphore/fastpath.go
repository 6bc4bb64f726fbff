package semaphore

import (
	"context"
	"math/bits"
	"unsafe"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/permit"
)

// Layout of Weighted.state, the word the fast paths work on with one
// compare-and-swap each:
//
//	bits 0..13   free inline tokens (bit i set: tokens[i] is free)
//	bit  14      timed: the semaphore records its timings (WithHistograms);
//	             set by New and never changed
//	bit  15      slow: waiters are queued or the semaphore is closed; every
//	             change of the word then happens under mu
//	bits 16..63  available permits, signed (negative after a shrink)
//
// Inline tokens: a grant takes a free inline token with the same
// compare-and-swap that takes its permits, and Permit.Release gives both
// back with one atomic add, so neither needs mu (while nobody waits: a
// release that sees the slow flag hands its token to the head under mu
// instead, see ReleaseQueued); a grant beyond the inline tokens takes a
// spare token, whose release goes through mu. The
// state word has a cache line of its own, so that the slow path's fields
// and the tokens' generations do not bounce with it. docs/internals.md
// has the figures behind these choices.
//
// The timed flag keeps the hold-time stamp off the untimed fast path: the
// fast path's one test of the flags refuses a timed semaphore, whose
// grants go through acquireTimed (the same claim, then the stamp), so an
// untimed Acquire tests nothing for a feature it does not use.
//
// The layout is permit's, so that Permit.Release returns an inline token
// to the word by itself, with no call into the semaphore.
//
// A compare-and-swap lost to another core sends the caller to the slow
// path, which claims under mu while nobody waits (takeLocked): no retry
// with a backoff, which measured no gain (BenchmarkAblationBackoff,
// docs/internals.md).
const (
	inlineTokens = permit.WordTokens
	tokenMask    = 1<<inlineTokens - 1
	flagTimed    = permit.WordOwn
	flagSlow     = permit.WordSlow
	availShift   = permit.WordShift
)

// cacheLine is the size of a cache line on the machines we target (amd64,
// arm64 servers).
const cacheLine = 64

func avail(st uint64) int64 { return int64(st) >> availShift }

// ctxEnded reports whether ctx has ended.
func ctxEnded(ctx context.Context) bool { return ctx.Err() != nil }

// fastOK reports whether state st lets a caller take n permits (n > 0)
// without the lock and without stamping the grant: nobody waits, the
// semaphore is open and untimed, n permits are available and an inline
// token is free. Both flags are tested at once.
func fastOK(st uint64, n int64) bool {
	return st&(flagSlow|flagTimed) == 0 && avail(st) >= n && st&tokenMask != 0
}

// timedOK is fastOK whether or not the semaphore is timed: the callers
// that take it stamp their grants.
func timedOK(st uint64, n int64) bool { return fastOK(st&^flagTimed, n) }

// acquireTimed is Acquire's fast path on a timed semaphore (fastOK
// refuses those): the same claim, then the stamp. st is the word the
// caller loaded before it looked at ctx, so the claim keeps Acquire's
// ordering without loading the word again (under contention a second
// load is a cache miss per call).
func (s *Weighted) acquireTimed(ctx context.Context, n int64, st uint64, turn *call.Turn) (Permit, error) {
	if n > 0 && timedOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return s.stamp(p), nil
		}
	}
	return s.acquireSlow(ctx, n, turn)
}

// neverEnds reports whether ctx is context.Background() or
// context.TODO(), which never end, so that Acquire can skip their Err
// call and need not keep the state word across it. It compares the first word
// of the interface, the itab for a non-empty interface such as
// context.Context, which is the same for every value of one dynamic type;
// Background and TODO each have a type of their own. A false answer only
// costs the Err call; a false "never ends" for another context would be
// wrong, which TestNeverEndsKnowsOnlyBackgroundAndTODO pins, zero-size
// context types included. BenchmarkAblationCtx measures what it saves.
func neverEnds(ctx context.Context) bool {
	w := ifaceWord(ctx)
	return w == backgroundWord || w == todoWord
}

var backgroundWord, todoWord = ifaceWord(context.Background()), ifaceWord(context.TODO())

// ifaceWord returns the first word of ctx's interface value.
func ifaceWord(ctx context.Context) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&ctx))[0]
}

// claimInline takes n permits and the lowest free inline token from state
// st, which must have n permits available and an inline token free, by
// one compare-and-swap. It returns false if the word changed meanwhile.
// The grant is not stamped: callers that may run on a timed semaphore
// call stamp.
func (s *Weighted) claimInline(st uint64, n int64) (Permit, bool) {
	slot, ok := s.takeSlot(st, n)
	if !ok {
		return Permit{}, false
	}
	t := &s.tokens[slot]
	return Permit(permit.Make(t, t.Gen(), n)), true
}

// stamp stamps the start of p's hold on its token, when the semaphore
// records its timings. The callers of claimInline that a timed
// semaphore can reach call it (fastOK's callers cannot): in claimInline
// the test alone would take it over the inliner's budget, and
// the uncontended path would pay a call.
func (s *Weighted) stamp(p Permit) Permit {
	if s.tm != nil {
		s.stampOn(permit.TokenOf(permit.Permit(p)))
	}
	return p
}

// stampOn is stamp's work, out of line: it stamps the grant being made
// through t if the hold sampler picks it (one grant in hist.SampleEvery
// through each token, after the lane's first ones, by the token's
// generation), and marks it untimed otherwise, so that its release
// records nothing.
//
//go:noinline
func (s *Weighted) stampOn(t *permit.Token) {
	if s.tm.Holds.Timed(&s.hc, uint32(t.Gen())) {
		t.SetSince(s.hc.Stamp())
	} else {
		t.SetUntimed()
	}
}

// takeSlot takes n permits and the lowest free inline token (st must have
// one) from state st by one compare-and-swap, and returns the token's
// slot. It returns false if the word changed meanwhile.
func (s *Weighted) takeSlot(st uint64, n int64) (int, bool) {
	slot := bits.TrailingZeros64(st)
	return slot, s.state.CompareAndSwap(st, st-uint64(n)<<availShift-1<<slot)
}

// takeLocked takes n permits if nobody waits and they are available. It
// must be called with mu held.
func (s *Weighted) takeLocked(n int64) (Permit, bool) {
	if s.closed || !s.q.Empty() || n > s.capacity.Load() {
		return Permit{}, false
	}
	for {
		st := s.state.Load()
		if avail(st) < n {
			return Permit{}, false
		}
		if t, ok := s.claimLocked(st, n); ok {
			return Permit(permit.Make(t, t.Gen(), n)), true
		}
	}
}

// claimLocked takes n permits and a token from state st by one
// compare-and-swap, taking a spare token when no inline one is free. It
// returns false if the state changed meanwhile. It must be called with mu
// held and with avail(st) >= n.
func (s *Weighted) claimLocked(st uint64, n int64) (*permit.Token, bool) {
	if st&tokenMask != 0 {
		slot, ok := s.takeSlot(st, n)
		if !ok {
			return nil, false
		}
		t := &s.tokens[slot]
		if s.tm != nil {
			s.stampOn(t)
		}
		return t, true
	}
	if !s.state.CompareAndSwap(st, st-uint64(n)<<availShift) {
		return nil, false
	}
	var t *permit.Token
	if k := len(s.spare); k > 0 {
		t = s.spare[k-1]
		s.spare[k-1] = nil
		s.spare = s.spare[:k-1]
	} else {
		t = permit.NewToken((*owner)(s), -1)
		s.observe(t)
	}
	s.spareOut++
	if s.tm != nil {
		s.stampOn(t)
	}
	return t, true
}
