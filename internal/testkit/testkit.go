// Package testkit is the test plumbing shared by the external tests of the
// lanes packages: waits that fail with a message instead of hanging, a
// goroutine launcher, and the goroutine-leak check of every TestMain. It is
// imported by _test files only.
package testkit

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Deadline bounds every wait of this package's helpers: a scenario that
// hangs fails with a message instead of running into the test binary's
// timeout. It is a bound, never a sleep: a passing test never waits it out.
const Deadline = 10 * time.Second

// Main runs the tests of m and fails them if any goroutine a test started
// (a waiter, a holder, a worker) is still running when they end.
func Main(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, opts...)
}

// Eventually polls cond until it holds, and fails t after Deadline. It
// yields first, then backs off, so a long wait does not burn a core that the
// goroutines it waits for need. It must be called from the test's goroutine.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, Deadline, what, cond)
}

// EventuallyWithin is Eventually with the bound d.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		if i < 100 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// AllQueuedOrReturned reports whether every one of n callers is either
// waiting (waiters, read from the semaphore's Stats) or has returned (the
// count its goroutines add to once their call is back). It reads returned
// first: a caller leaves the line before it returns, so one that returns
// between the two reads is then missed (the poll comes round again) rather
// than counted twice (which would let the test go on with callers that
// have not yet queued).
func AllQueuedOrReturned(n uint64, waiters func() int, returned *atomic.Uint64) bool {
	r := returned.Load()
	return r+uint64(waiters()) == n
}

// Recv returns the next value of ch (the zero value once ch is closed),
// and fails t if none comes within Deadline.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return Within(t, Deadline, what, ch)
}

// Within is Recv with the bound d.
func Within[T any](t testing.TB, d time.Duration, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("gave up after %v waiting for %s", d, what)
	}
	var zero T
	return zero
}

// WaitAll waits for wg, and fails t if it is not done within Deadline.
func WaitAll(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	Recv(t, done, what)
}

// Storm runs each of fns on a goroutine of its own, all let go at once
// (so that they race each other as closely as the scheduler allows), and
// waits for them within Deadline.
func Storm(t testing.TB, what string, fns ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, f := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	WaitAll(t, &wg, what)
}

// Rounds is how many rounds a racy test that loops runs: 1000, or 100
// under -short.
func Rounds() int {
	if testing.Short() {
		return 100
	}
	return 1000
}

// SkipUnlessAllocsCount skips t where allocation counts are not those of
// a plain build: under the race detector and under -cover.
func SkipUnlessAllocsCount(t testing.TB) {
	t.Helper()
	if Race || testing.CoverMode() != "" {
		t.Skip("allocation counts differ under -race and -cover")
	}
}

// NoAllocs fails t, naming what, if f allocates (on average over 1000
// runs). Call SkipUnlessAllocsCount first.
func NoAllocs(t testing.TB, what string, f func()) {
	t.Helper()
	if a := testing.AllocsPerRun(1000, f); a != 0 {
		t.Fatalf("%s: %.1f allocs; want 0", what, a)
	}
}

// CancelEvery calls every k-th of cancels, from the first.
func CancelEvery[F ~func()](cancels []F, k int) {
	for i := 0; i < len(cancels); i += k {
		cancels[i]()
	}
}

// Go runs f in a new goroutine and returns a channel that receives its
// result; the channel has room for it, so the goroutine ends even if no
// one receives.
func Go[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

// SampledWaits checks a lane's figures after waits waits on the system
// clock, whose durations are timed one in N after the first ones
// (hist.Sampler): every wait counted (waited), the histogram's count
// equal to the grants (acquired) and to the sum of its buckets, a positive
// sum, and a sample timed (timed: more than none, fewer than all).
func SampledWaits(t testing.TB, waits, waited, acquired, count uint64, counts []uint64, sum time.Duration, timed uint64) {
	t.Helper()
	if waited != waits || count != acquired {
		t.Fatalf("waited %d, WaitTime.Count %d, Acquired %d; want %d waits, Count = Acquired", waited, count, acquired, waits)
	}
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total != count || sum <= 0 {
		t.Fatalf("buckets add up to %d, Count %d, Sum %v", total, count, sum)
	}
	if timed >= waits || timed == 0 {
		t.Fatalf("%d of %d waits timed; want a sample", timed, waits)
	}
}

// SampledHolds checks the hold-time snapshot of a lane that released
// `releases` grants on the system clock, of which timed were timed (one in
// N after the first ones, see hist.Sampler): one hold per release, the
// count exact, the buckets adding up to it, and a sample, not every hold,
// timed.
func SampledHolds(t testing.TB, releases, released, count uint64, counts []uint64, timed uint64) {
	t.Helper()
	if released != releases || count != released {
		t.Fatalf("released %d, HoldTime.Count %d; want %d releases, Count = Released", released, count, releases)
	}
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total != count {
		t.Fatalf("buckets add up to %d, Count %d", total, count)
	}
	if timed >= releases || timed == 0 {
		t.Fatalf("%d of %d holds timed; want a sample", timed, releases)
	}
}
