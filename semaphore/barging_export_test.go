package semaphore

import "context"

// BargingOld returns the number of waiters of s, made WithBarging, that
// have counted themselves old (waited the bound), for tests that wait
// until a timer's firing has been seen.
func BargingOld(s *Weighted) int { return int(s.barge.flags.Load() >> oldShift) }

// BargingWoken reports whether a waiter of s, made WithBarging, is woken
// to compete and not done looking.
func BargingWoken(s *Weighted) bool { return s.barge.flags.Load()&bWoken != 0 }

// AcquireViaSlow is Acquire without its straight dispatch to barging: a
// barging semaphore's contended acquires go through acquireSlow, whose
// first line sends them on (BenchmarkAblationBargeDispatch).
func (s *Weighted) AcquireViaSlow(ctx context.Context, n int64) (Permit, error) {
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
	return s.acquireSlow(ctx, n, Turn{})
}

// SetBargeRounds sets how many times s, made WithBarging, looks at the
// state word before a caller queues or a woken waiter rejoins (bargeRounds
// by default; 0: once, no spinning), for BenchmarkAblationBargeSpin.
func SetBargeRounds(s *Weighted, k int) { s.barge.rounds = k }
