package semaphore

import (
	"context"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/hist"
)

// Variants of the fast path's tricks, for the ablation benchmarks (see
// ablation_test.go and docs/internals.md). Each is set up after New and
// costs the production code nothing.

// NewWithInlineTokens returns New(capacity) with only the first k inline
// tokens free (0 <= k <= InlineTokens): grants beyond k take a spare token under mu.
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

// NewNoHandOff returns New(capacity, opts...) whose releases into a queue
// add their permits and token to the state word for the head to claim
// back, as they did before issue 27, instead of handing the token to the
// head (see ReleaseQueued).
func NewNoHandOff(capacity int64, opts ...Option) *Weighted {
	return newHandOff(capacity, false, opts...)
}

// NewHandOff returns New(capacity, opts...) whose releases into a queue
// hand the token to the head whatever the capacity (New does it at
// capacity 1 only).
func NewHandOff(capacity int64, opts ...Option) *Weighted {
	return newHandOff(capacity, true, opts...)
}

func newHandOff(capacity int64, on bool, opts ...Option) *Weighted {
	s := New(capacity, opts...)
	s.handOff = -1
	on = on && s.barge == nil // see handsOffAt
	if on {
		s.handOff = 1
	}
	for i := range s.tokens {
		s.tokens[i].SetHandOff(on)
	}
	return s
}

// HandsOff reports whether every inline token of s hands off its
// releases into a queue (true), none does (false), or they disagree
// (panics).
func HandsOff(s *Weighted) bool {
	on := s.tokens[0].HandsOff()
	for i := range s.tokens {
		if s.tokens[i].HandsOff() != on {
			panic("semaphore: inline tokens disagree on the hand-off")
		}
	}
	return on
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

// AcquirePlainCtx is Acquire without neverEnds: ctx.Err() is called for
// every context, Background and TODO included.
func (s *Weighted) AcquirePlainCtx(ctx context.Context, n int64, _ ...AcquireOption) (Permit, error) {
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
	}
	return s.acquireSlow(ctx, n, &call.Turn{})
}

// NeverEnds is neverEnds, for its test.
func NeverEnds(ctx context.Context) bool { return neverEnds(ctx) }

// InlineTokens is the number of inline tokens, for the tests that hold
// them all.
const InlineTokens = inlineTokens

// AcquireCompareCtx is Acquire with the never-ending contexts recognised
// by comparison with context.Background() and context.TODO().
func (s *Weighted) AcquireCompareCtx(ctx context.Context, n int64, _ ...AcquireOption) (Permit, error) {
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
	}
	return s.acquireSlow(ctx, n, &call.Turn{})
}

// AcquireStampCheck is Acquire without the timed flag: the fast path
// takes timed semaphores too, and tests for the stamp after each grant.
func (s *Weighted) AcquireStampCheck(ctx context.Context, n int64, _ ...AcquireOption) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	st := s.state.Load()
	if !neverEnds(ctx) && ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && timedOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return s.stamp(p), nil
		}
	}
	return s.acquireSlow(ctx, n, &call.Turn{})
}

// AcquireBackoff is Acquire with the backoff it had before issue 23: a
// compare-and-swap lost to another core is retried up to backoffRounds
// times, after a spin of backoffSpins iterations that doubles each round,
// before the slow path. Each reload is followed by a look at ctx, as in
// Acquire.
func (s *Weighted) AcquireBackoff(ctx context.Context, n int64, _ ...AcquireOption) (Permit, error) {
	return s.acquireRetrying(ctx, n, backoffSpins)
}

// AcquireRetryNoSpin is AcquireBackoff with no spin between the tries.
func (s *Weighted) AcquireRetryNoSpin(ctx context.Context, n int64, _ ...AcquireOption) (Permit, error) {
	return s.acquireRetrying(ctx, n, 0)
}

// The removed backoff: 3 rounds, the first of 2048 iterations of spinWait.
const (
	backoffRounds = 3
	backoffSpins  = 2048
)

// acquireRetrying is Acquire that retries a lost compare-and-swap
// backoffRounds times, after spinWait(spins<<i) in round i.
func (s *Weighted) acquireRetrying(ctx context.Context, n int64, spins int) (Permit, error) {
	if ctx == nil {
		panic("semaphore: nil Context")
	}
	st := s.state.Load()
	if !neverEnds(ctx) && ctx.Err() != nil {
		return Permit{}, s.failFast(ctx)
	}
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
		for i := range backoffRounds {
			spinWait(spins << i)
			st := s.state.Load()
			if !fastOK(st, n) || ctxEnded(ctx) {
				break
			}
			if p, ok := s.claimInline(st, n); ok {
				return p, nil
			}
		}
	}
	return s.acquireSlow(ctx, n, &call.Turn{})
}

// spinWait busy-waits for k iterations of an empty loop, without touching
// memory that other cores write. It is not inlined, so that the loop is
// kept.
//
//go:noinline
func spinWait(k int) {
	for j := 0; j < k; j++ {
	}
}

// TimedWaits returns how many waits s's wait histogram recorded, before a
// snapshot scales them to every wait (see hist.Sampler).
func TimedWaits(s *Weighted) uint64 {
	var c [hist.Buckets]uint64
	n, _ := s.tm.Wait.Read(&c)
	return n
}

// NewTimingEvery returns New(capacity, WithHistograms(), opts...) timing
// every wait and every hold, as before the sampling of hist.Sampler: the
// ablation's baseline (BenchmarkTimings).
func NewTimingEvery(capacity int64, opts ...Option) *Weighted {
	s := New(capacity, append([]Option{WithHistograms()}, opts...)...)
	s.tm.Sampler.TimeEvery()
	s.tm.Holds.TimeEvery()
	return s
}

// NewTimingEveryHold is NewTimingEvery with only the holds' sampling off:
// BenchmarkTimings' ablation of the holds' sampling alone.
func NewTimingEveryHold(capacity int64, opts ...Option) *Weighted {
	s := New(capacity, append([]Option{WithHistograms()}, opts...)...)
	s.tm.Holds.TimeEvery()
	return s
}

// TimedHolds returns how many holds s's hold histogram recorded, before a
// snapshot scales them to every release (see hist.Sampler).
func TimedHolds(s *Weighted) uint64 {
	var c [hist.Buckets]uint64
	n, _ := s.tm.Hold.Read(&c)
	return n
}

// AcquireReadByValue is Acquire with options as it read them before
// acquireWith: call.Read's Call returned by value, its Turn copied out
// (BenchmarkAblationOptions' baseline). Its refusals are not counted.
func (s *Weighted) AcquireReadByValue(ctx context.Context, n int64, opts ...AcquireOption) (Permit, error) {
	st := s.state.Load()
	c, bad := call.Read(opts)
	if bad != call.BadNone {
		return Permit{}, errPriority
	}
	t := c.Turn
	if n > 0 && fastOK(st, n) {
		if p, ok := s.claimInline(st, n); ok {
			return p, nil
		}
	}
	return s.acquireSlow(ctx, n, &t)
}

// PreciseArrivals makes s stamp arrivals from the precise clock, as it did
// before the CPU's counter (BenchmarkAblationArrivalClock). Call it before
// s is used.
func PreciseArrivals(s *Weighted) { s.hc.PreciseArrivals() }
