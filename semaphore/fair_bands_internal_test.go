package semaphore

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sessionlane/lanes/internal/testkit"
)

// spinR waits for cond, yielding, or fails after testkit's deadline.
func spinR(t rapid.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(testkit.Deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// recvR receives from ch, or fails after testkit's deadline.
func recvR[T any](t rapid.TB, ch <-chan T, what string) T {
	t.Helper()
	tm := time.NewTimer(testkit.Deadline)
	defer tm.Stop()
	select {
	case v := <-ch:
		return v
	case <-tm.C:
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// bandsOK checks, under mu, that the fair bands with state are exactly
// those with waiters: each band's count is positive and the counts add
// up to the waiters of the semaphore.
func (s *Weighted) bandsOK() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := 0
	for _, b := range s.fair.bands {
		if b.waiters <= 0 {
			return fmt.Errorf("band %d kept with %d waiters", b.band, b.waiters)
		}
		sum += b.waiters
	}
	if sum != s.waiters {
		return fmt.Errorf("the bands count %d waiters, the semaphore %d", sum, s.waiters)
	}
	return nil
}

// The bands' counts of waiters follow every way a waiter leaves the
// queue: granted by a release or a larger capacity, cancelled, failed by a
// shrink below its weight or by Close. Checked after every step, and at
// the end (no band left once nobody waits).
func TestFairBandsCountTheirWaiters(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New(2, WithFairShare(nil), WithPriorities(time.Hour))
		type result struct {
			p   Permit
			err error
		}
		type waiter struct {
			cancel context.CancelFunc
			done   chan result
		}
		var holders []Permit
		var waiting []waiter
		collect := func() { // the results that came, without waiting
			kept := waiting[:0]
			for _, w := range waiting {
				select {
				case r := <-w.done:
					w.cancel()
					if r.err == nil {
						holders = append(holders, r.p)
					}
				default:
					kept = append(kept, w)
				}
			}
			waiting = kept
		}
		check := func(what string) {
			if err := s.bandsOK(); err != nil {
				rt.Fatalf("after %s: %v", what, err)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				prio := rapid.IntRange(-2, 2).Draw(rt, "priority")
				group := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "group")
				n := rapid.Int64Range(1, 2).Draw(rt, "n")
				ctx, cancel := context.WithCancel(context.Background())
				w := waiter{cancel, make(chan result, 1)}
				before := s.Stats()
				go func() {
					p, err := s.Acquire(ctx, n, Priority(prio), Group(group))
					w.done <- result{p, err}
				}()
				// It queued, or it returned (granted at once, or refused).
				spinR(rt, "the call to queue or return", func() bool {
					return s.Stats().Waiters > before.Waiters || len(w.done) > 0
				})
				waiting = append(waiting, w)
				collect()
				check("acquire")
			},
			"cancel": func(rt *rapid.T) {
				if len(waiting) == 0 {
					rt.Skip("nobody waits")
				}
				i := rapid.IntRange(0, len(waiting)-1).Draw(rt, "which")
				w := waiting[i]
				w.cancel()
				r := recvR(rt, w.done, "the cancelled call")
				if r.err == nil {
					holders = append(holders, r.p) // granted before the cancel
				}
				waiting = append(waiting[:i], waiting[i+1:]...)
				collect()
				check("cancel")
			},
			"release": func(rt *rapid.T) {
				if len(holders) == 0 {
					rt.Skip("nobody holds")
				}
				i := rapid.IntRange(0, len(holders)-1).Draw(rt, "which")
				holders[i].Release()
				holders = append(holders[:i], holders[i+1:]...)
				collect()
				check("release")
			},
			"capacity": func(rt *rapid.T) {
				s.SetCapacity(rapid.Int64Range(1, 3).Draw(rt, "capacity"))
				collect()
				check("capacity")
			},
		})
		s.Close()
		for _, w := range waiting {
			if r := recvR(rt, w.done, "a waiter sent away by Close"); r.err == nil {
				holders = append(holders, r.p)
			}
			w.cancel()
		}
		for _, p := range holders {
			p.Release()
		}
		check("Close")
		if n := len(s.fair.bands); n != 0 {
			rt.Fatalf("%d bands left once nobody waits", n)
		}
	})
}
