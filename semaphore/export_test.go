package semaphore

import (
	"context"
	"sync/atomic"
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

// NewPackedGens returns New(capacity) with the inline tokens' generations
// packed side by side in one array instead of one per cache line.
func NewPackedGens(capacity int64) *Weighted {
	s := New(capacity)
	gens := new([inlineTokens]atomic.Uint64)
	for i := range s.tokens {
		s.tokens[i].Init((*owner)(s), i, &gens[i]) // the state word stays set
	}
	return s
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
	return s.acquireSlow(ctx, n)
}

// AcquirePlainCtx is Acquire with no special case: ctx.Err() always.
func (s *Weighted) AcquirePlainCtx(ctx context.Context, n int64) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
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
	return s.acquireSlow(ctx, n)
}
