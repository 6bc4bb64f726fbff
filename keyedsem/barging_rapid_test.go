package keyedsem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingKeyMatchesModel checks random sequences of operations on one
// key of a keyed semaphore made WithBarging against model.Barging (a key
// is a semaphore of the per-key capacity; modelcheck.Barging drives it):
// the same grants at once (newcomers ahead of the key's young waiters),
// the same waiters served, the same refusals, strict hand-off as soon as a
// waiter has waited the bound on the fake clock, and after every step the
// counters, Held, Waiters, the key's strict bit and one bound's timer per
// waiter.
func TestBargingKeyMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { keyBargingRun(t, false) })
}

// FuzzBargingKeyMatchesModel runs TestBargingKeyMatchesModel's driver on the
// fuzzer's bytes (rapid's draws, eight bytes a draw). It lives beside the
// driver, not in package fuzz, because the driver checks the barging state
// through this package's test hooks; the seeds run with go test.
func FuzzBargingKeyMatchesModel(f *testing.F) {
	for _, seed := range modelcheck.BargeSeeds() {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { keyBargingRun(t, true) }))
}

// keyBargingRun runs one case; fuzz: the draws come from a fuzz target's bytes.
func keyBargingRun(t *rapid.T, fuzz bool) {
	capacity := rapid.Int64Range(1, 8).Draw(t, "capacity")
	maxWaiters := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "maxWaiters")
	idle := rapid.SampledFrom([]time.Duration{0, time.Hour}).Draw(t, "idle")
	bound := time.Second
	clk := newFake()
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(capacity), keyedsem.WithMaxWaitersPerKey(maxWaiters),
		keyedsem.WithIdleTimeout(idle), keyedsem.WithBarging(bound), keyedsem.WithClock(clk))
	modelcheck.Barging(t, modelcheck.BargingConfig{
		SUT:        bargeKey{s},
		Model:      model.NewBarging(capacity, maxWaiters, 0, bound),
		Clock:      clk,
		Bound:      bound,
		New:        fmt.Sprintf("New(capacity %d, maxWaiters %d, idle %v, WithBarging(%v))", capacity, maxWaiters, idle, bound),
		Closed:     semaphore.ErrClosed,
		Full:       semaphore.ErrQueueFull,
		Hang:       10 * time.Second,
		AdvanceLog: func(m *model.Barging) string { return fmt.Sprintf("strict %v", m.Strict()) },
		Fuzz:       fuzz,
	})
}

const bKey = "k"

// bargeKey is key bKey of a keyed semaphore made WithBarging as
// modelcheck.Barging drives it, checked through BargingStrict.
type bargeKey struct{ s *keyedsem.Keyed[string] }

func (b bargeKey) Acquire(ctx context.Context, n int64) (semaphore.Permit, error) {
	return b.s.Acquire(ctx, bKey, semaphore.Weight(n))
}
func (b bargeKey) TryAcquire(n int64) (semaphore.Permit, bool) {
	return b.s.TryAcquire(bKey, semaphore.Weight(n))
}
func (b bargeKey) Close()       { b.s.Close() }
func (b bargeKey) Stats() any   { return b.s.Stats() }
func (b bargeKey) Waiters() int { return b.s.Stats().Waiters }

// Settled: the key went strict as the model did (after Close the bit is
// not looked at).
func (b bargeKey) Settled(m *model.Barging) bool {
	return m.IsClosed() || keyedsem.BargingStrict(b.s, bKey) == m.Strict()
}

// Check: the counters, Held, Waiters and Closed, and the key's strict bit
// while open, which is set only while somebody waits.
func (b bargeKey) Check(m *model.Barging, _ int64) error {
	got, want := b.s.Stats(), m.Stats()
	if model.Counters(got.Counters) != want.Counters || got.Held != want.Held || got.Waiters != want.Waiters || got.Closed != want.Closed {
		return fmt.Errorf("Stats differ from the model\n got %+v\nwant %+v", got, want)
	}
	if !want.Closed {
		s := keyedsem.BargingStrict(b.s, bKey)
		if s != m.Strict() {
			return fmt.Errorf("the key is strict: %v; the model: %v", s, m.Strict())
		}
		if s && got.Waiters == 0 {
			return fmt.Errorf("the key is strict with nobody waiting") // see keyedsem's line.Emptied
		}
	}
	return nil
}

func (b bargeKey) Balanced() bool {
	st := b.s.Stats()
	return st.Held == 0 && st.Acquired == st.Released
}
