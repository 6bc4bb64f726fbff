package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/harness/modelcheck"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/semaphore"
)

// TestBargingMatchesModel checks random sequences of operations on a
// semaphore made WithBarging against model.Barging (modelcheck.Barging
// drives it): the same grants at once (newcomers ahead of young waiters),
// the same waiters served (in FIFO order once woken or handed off), the
// same refusals, strict mode as soon as a waiter has waited the bound on
// the fake clock, and after every step Stats field by field,
// Available+Held == Capacity, strict mode as the model's and one bound's timer
// per waiter. A failure prints the steps; -rapid.seed replays it.
func TestBargingMatchesModel(t *testing.T) { rapid.Check(t, func(t *rapid.T) { bargingRun(t, false) }) }

// FuzzBargingMatchesModel runs TestBargingMatchesModel's driver on the
// fuzzer's bytes (rapid's draws, eight bytes a draw). It lives beside the
// driver, not in package fuzz, because the driver checks the barging state
// through this package's test hooks; the seeds run with go test.
func FuzzBargingMatchesModel(f *testing.F) {
	for _, seed := range modelcheck.BargeSeeds() {
		f.Add(seed)
	}
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { bargingRun(t, true) }))
}

// bargingRun runs one case; fuzz: the draws come from a fuzz target's bytes.
func bargingRun(t *rapid.T, fuzz bool) {
	capacity := rapid.Int64Range(0, 20).Draw(t, "capacity")
	maxWaiters := rapid.OneOf(rapid.Just(0), rapid.IntRange(1, 5)).Draw(t, "maxWaiters")
	bound := time.Second
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := semaphore.New(capacity, semaphore.WithMaxWaiters(maxWaiters),
		semaphore.WithBarging(bound), semaphore.WithClock(clk))
	modelcheck.Barging(t, modelcheck.BargingConfig{
		SUT:            bargeSem{s},
		Model:          model.NewBarging(capacity, maxWaiters, 0, bound),
		Clock:          clk,
		Bound:          bound,
		New:            fmt.Sprintf("New(%d, maxWaiters=%d, WithBarging(%v))", capacity, maxWaiters, bound),
		Closed:         semaphore.ErrClosed,
		Full:           semaphore.ErrQueueFull,
		SetCapacity:    s.SetCapacity,
		Hang:           20 * time.Second,
		CheckTryWeight: true,
		AdvanceLog:     func(m *model.Barging) string { return fmt.Sprintf("old %d", m.Old()) },
		Fuzz:           fuzz,
	})
}

// bargeSem is a *semaphore.Weighted made WithBarging as modelcheck.Barging
// drives it, checked through the barging test hooks.
type bargeSem struct{ s *semaphore.Weighted }

func (b bargeSem) Acquire(ctx context.Context, n int64) (semaphore.Permit, error) {
	return b.s.Acquire(ctx, n)
}
func (b bargeSem) TryAcquire(n int64) (semaphore.Permit, bool) { return b.s.TryAcquire(n) }
func (b bargeSem) Close()                                      { b.s.Close() }
func (b bargeSem) Stats() any                                  { return b.s.Stats() }
func (b bargeSem) Waiters() int                                { return b.s.Stats().Waiters }

// Settled: a waiter whose bound ran out has set strict, and strict ended
// with the last old waiter, as in the model.
func (b bargeSem) Settled(m *model.Barging) bool { return semaphore.BargingStrict(b.s) == m.Strict() }

// Check: Stats field by field, Available+Held == Capacity, strict mode,
// nobody left woken, and Held is what the driver holds.
func (b bargeSem) Check(m *model.Barging, held int64) error {
	got, want := b.s.Stats(), m.Stats()
	if got.Available+got.Held != got.Capacity {
		return fmt.Errorf("Available %d + Held %d != Capacity %d", got.Available, got.Held, got.Capacity)
	}
	if modelcheck.SemStats(got) != want {
		return fmt.Errorf("Stats differ from the model\n got %+v\nwant %+v", got, want)
	}
	if st := semaphore.BargingStrict(b.s); st != m.Strict() {
		return fmt.Errorf("strict is %v; the model has %d old waiters", st, m.Old())
	}
	if semaphore.BargingWoken(b.s) {
		return fmt.Errorf("a waiter is still woken between steps")
	}
	if got.Held != held {
		return fmt.Errorf("the driver holds %d, Held is %d", held, got.Held)
	}
	return nil
}

func (b bargeSem) Balanced() bool {
	st := b.s.Stats()
	return st.Available == st.Capacity && st.Acquired == st.Released
}
