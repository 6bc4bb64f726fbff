package semaphore

import (
	"context"
	"sync/atomic"
	"unsafe"
)

// Variants of the fast path's tricks, for the ablation benchmarks (see
// ablation_test.go and docs/internals.md). Each is set up after New and
// costs the production code nothing.

// NewWithInlineTokens returns New(capacity) with only the first k inline
// tokens free (0 <= k <= 15): grants beyond k take a spare token under mu.
func NewWithInlineTokens(capacity int64, k int) *Weighted {
	s := New(capacity)
	s.state.Store(uint64(capacity)<<availShift | (1<<k - 1))
	return s
}

// paddedGen is a generation on a cache line of its own.
type paddedGen struct {
	atomic.Uint64
	_ [cacheLine - 8]byte
}

// NewPaddedGens returns New(capacity) with each inline token's generation
// on a cache line of its own instead of packed side by side. (Stats then
// miscounts releases: it reads the packed ones.)
func NewPaddedGens(capacity int64) *Weighted {
	s := New(capacity)
	gens := new([inlineTokens]paddedGen)
	for i := range s.tokens {
		s.tokens[i].Init((*owner)(s), i, &gens[i].Uint64) // the state word stays set
	}
	return s
}

// neverDone is what internal/fastctx.NeverDone was before the ablations
// took it out of every package (docs/internals.md): it compares the first
// word of the interface, for context.Context (a non-empty interface) the
// itab, with Background's and TODO's.
func neverDone(ctx context.Context) bool {
	w := ctxWord(ctx)
	return w == backgroundWord || w == todoWord
}

var backgroundWord, todoWord = ctxWord(context.Background()), ctxWord(context.TODO())

func ctxWord(ctx context.Context) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&ctx))[0]
}

// AcquireNeverDoneCtx is Acquire with the never-ending contexts recognised
// by neverDone, which skips their Err.
func (s *Weighted) AcquireNeverDoneCtx(ctx context.Context, n int64) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	st := s.state.Load()
	if !neverDone(ctx) && ctx.Err() != nil {
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
	return s.acquireSlow(ctx, n, Turn{})
}

// AcquireCompareCtx is Acquire with the never-ending contexts recognised
// by comparison with context.Background() and context.TODO().
func (s *Weighted) AcquireCompareCtx(ctx context.Context, n int64) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	st := s.state.Load()
	if ctx != context.Background() && ctx != context.TODO() && ctx.Err() != nil {
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
	return s.acquireSlow(ctx, n, Turn{})
}
