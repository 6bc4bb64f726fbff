package semaphore_test

// The test suites of tokio's Semaphore, rewritten in this package's API:
// repository tokio-rs/tokio, files tokio/tests/sync_semaphore.rs,
// tokio/tests/sync_semaphore_owned.rs and the batch semaphore's unit tests
// tokio/src/sync/tests/semaphore_batch.rs (read at commit ea91b33ca57f). Each
// test names the original(s) it ports.
//
// The API maps as follows (docs/compat.md has the reasons):
//
//	try_acquire / try_acquire_many(n)   TryAcquire(n)
//	acquire().await / blocking_acquire  Acquire(ctx, n); *_owned: the same (a Permit may move to any goroutine)
//	drop(permit)                        permit.Release()
//	add_permits(n)                      SetCapacity(capacity + n)
//	forget_permits(n)                   SetCapacity(capacity - min(n, available))
//	permit.forget()                     SetCapacity(capacity - w), then permit.Release()
//	available_permits()                 Stats().Available
//	close() / is_closed()               Close() / Stats().Closed
//	MAX_PERMITS                         MaxCapacity
//
// Deliberate differences asserted here: a semaphore of capacity 0, and any
// request above the capacity, fail at once with ErrTooHeavy instead of
// waiting for add_permits; a waiter reserves nothing until its whole request
// is granted (tokio's batch semaphore hands permits to the head waiter bit
// by bit, so available_permits drops to 0 while it waits).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/semaphore"
)

// tkEnqueue starts Acquire(ctx, n) and returns once it waits in the queue.
func tkEnqueue(t *testing.T, ctx context.Context, s *semaphore.Weighted, n int64) <-chan xsResult {
	t.Helper()
	want := s.Stats().Waiters + 1
	ch := xsAcquire(ctx, s, n)
	testkit.Eventually(t, fmt.Sprintf("Acquire(%d) to queue", n), func() bool {
		if len(ch) > 0 {
			r := <-ch
			t.Fatalf("Acquire(%d) returned (%d, %v) instead of waiting", n, r.p.Weight(), r.err)
		}
		return s.Stats().Waiters == want
	})
	return ch
}

// tkTry is TryAcquire that fails the test when it does not grant.
func tkTry(t *testing.T, s *semaphore.Weighted, n int64) semaphore.Permit {
	t.Helper()
	p, ok := s.TryAcquire(n)
	if !ok {
		t.Fatalf("TryAcquire(%d) failed with %+v", n, s.Stats())
	}
	return p
}

// tkAvailable fails the test unless Stats().Available is want.
func tkAvailable(t *testing.T, s *semaphore.Weighted, want int64) {
	t.Helper()
	if got := s.Stats().Available; got != want {
		t.Fatalf("available = %d, want %d (%+v)", got, want, s.Stats())
	}
}

// tkForgetPermits is tokio's forget_permits(n) in our API: it removes up to
// n available permits from the semaphore for good and returns how many it
// removed.
func tkForgetPermits(s *semaphore.Weighted, n int64) int64 {
	st := s.Stats()
	take := min(n, max(st.Available, 0))
	s.SetCapacity(st.Capacity - take)
	return take
}

// tkPanics reports whether f panics.
func tkPanics(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// TestConformanceTokioNoPermits ports no_permits (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs) and poll_acquire_one_zero_permits
// (tokio/src/sync/tests/semaphore_batch.rs). New(0) does not panic. In tokio
// an acquire on zero permits waits until add_permits; ours fails at once
// with ErrTooHeavy (the request is above the capacity, so no release could
// ever grant it) until SetCapacity grows the semaphore.
func TestConformanceTokioNoPermits(t *testing.T) {
	t.Parallel()
	s := semaphore.New(0)
	if _, err := s.Acquire(context.Background(), 1); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Acquire(1) on capacity 0 = %v, want ErrTooHeavy at once", err)
	}
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) on capacity 0 succeeded")
	}
	s.SetCapacity(1) // tokio: s.release(1) / add_permits(1)
	r := xsRecv(t, xsAcquire(context.Background(), s, 1))
	if r.err != nil {
		t.Fatalf("Acquire(1) after SetCapacity(1): %v", r.err)
	}
	r.p.Release()
}

// TestConformanceTokioTryAcquire ports try_acquire (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs and tokio/tests/sync_semaphore_owned.rs;
// try_acquire_one_unavailable in tokio/src/sync/tests/semaphore_batch.rs):
// a second try fails while the first permit is held, and succeeds once it is
// released (tokio releases on drop at the end of the block).
func TestConformanceTokioTryAcquire(t *testing.T) {
	t.Parallel()
	s := semaphore.New(1)
	p1 := tkTry(t, s, 1)
	tkAvailable(t, s, 0)
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("second TryAcquire(1) succeeded while the first is held")
	}
	p1.Release()
	tkAvailable(t, s, 1)
	tkTry(t, s, 1).Release()
	tkAvailable(t, s, 1)
}

// TestConformanceTokioTryAcquireMany ports try_acquire_many
// (tokio-rs/tokio, tokio/tests/sync_semaphore_owned.rs) and
// try_acquire_many_unavailable (tokio/src/sync/tests/semaphore_batch.rs).
// The batch test's trailing release(1) calls give back parts of a 5-permit
// grant, which our permits cannot do (no split): each grant comes back
// whole.
func TestConformanceTokioTryAcquireMany(t *testing.T) {
	t.Parallel()
	s := semaphore.New(42)
	p1 := tkTry(t, s, 42)
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) succeeded with all 42 permits held")
	}
	p1.Release()
	p3 := tkTry(t, s, 32)
	p4 := tkTry(t, s, 10)
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) succeeded with 32+10 of 42 permits held")
	}
	p3.Release()
	p4.Release()

	b := semaphore.New(5)
	q1 := tkTry(t, b, 1)
	tkAvailable(t, b, 4)
	if _, ok := b.TryAcquire(5); ok {
		t.Fatal("TryAcquire(5) succeeded with 4 available")
	}
	q1.Release()
	tkAvailable(t, b, 5)
	q5 := tkTry(t, b, 5)
	tkAvailable(t, b, 0)
	q5.Release()
	tkAvailable(t, b, 5)
}

// TestConformanceTokioAvailable ports poll_acquire_one_available,
// poll_acquire_many_available, try_acquire_one_available and
// try_acquire_many_available (tokio-rs/tokio,
// tokio/src/sync/tests/semaphore_batch.rs): acquires that need not wait take
// their permits at once and the available count drops by their weight.
func TestConformanceTokioAvailable(t *testing.T) {
	t.Parallel()
	for _, w := range []int64{1, 5} {
		for _, try := range []bool{false, true} {
			s := semaphore.New(100)
			tkAvailable(t, s, 100)
			for i := int64(1); i <= 2; i++ {
				if try {
					tkTry(t, s, w)
				} else if _, err := s.Acquire(context.Background(), w); err != nil {
					t.Fatalf("Acquire(%d): %v", w, err)
				}
				tkAvailable(t, s, 100-i*w)
			}
		}
	}
}

// TestConformanceTokioAcquire ports acquire (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs and tokio/tests/sync_semaphore_owned.rs)
// and poll_acquire_one_unavailable (tokio/src/sync/tests/semaphore_batch.rs):
// a waiter behind a held permit is granted when it is released, and then
// holds it (available stays 0 until it releases too). The owned variant is
// the same in Go: a Permit may be released by any goroutine, so the waiter's
// permit is released here by the test goroutine.
func TestConformanceTokioAcquire(t *testing.T) {
	t.Parallel()
	s := semaphore.New(1)
	p1 := tkTry(t, s, 1)
	ch := tkEnqueue(t, context.Background(), s, 1)
	tkAvailable(t, s, 0)
	p1.Release()
	r := xsRecv(t, ch)
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	tkAvailable(t, s, 0)
	r.p.Release()
	tkAvailable(t, s, 1)
}

// TestConformanceTokioAcquireMany ports acquire_many (tokio-rs/tokio,
// tokio/tests/sync_semaphore_owned.rs): with 32 of 42 held, a task takes 10
// at once, then waits for 32 until the first holder releases.
func TestConformanceTokioAcquireMany(t *testing.T) {
	t.Parallel()
	s := semaphore.New(42)
	p32 := tkTry(t, s, 32)
	got10 := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		p10, err := s.Acquire(context.Background(), 10)
		if err != nil {
			done <- err
			return
		}
		close(got10)
		p, err := s.Acquire(context.Background(), 32)
		if err == nil {
			p.Release()
		}
		p10.Release() // before done: the test counts the permits back once it has it
		done <- err
	}()
	select {
	case <-got10:
	case err := <-done:
		t.Fatalf("Acquire(10) with 10 available: %v", err)
	}
	testkit.Eventually(t, "Acquire(32) to queue", func() bool { return s.Stats().Waiters == 1 })
	p32.Release()
	if err := xsRecv(t, xsWrap(done)).err; err != nil {
		t.Fatalf("Acquire(32) after the release: %v", err)
	}
	tkAvailable(t, s, 42)
}

// xsWrap turns an error channel into a result channel for xsRecv.
func xsWrap(ch <-chan error) <-chan xsResult {
	out := make(chan xsResult, 1)
	go func() { out <- xsResult{err: <-ch} }()
	return out
}

// TestConformanceTokioAddPermits ports add_permits (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs and sync_semaphore_owned.rs) and
// blocking_acquire_waits_for_permit (sync_semaphore.rs): a waiter is
// granted when permits are added. tokio's waiter waits on a semaphore of 0;
// ours would fail at once with ErrTooHeavy there (see
// TestConformanceTokioNoPermits), so it waits on one whose only permit is
// held, and SetCapacity(capacity+1) plays add_permits(1).
func TestConformanceTokioAddPermits(t *testing.T) {
	t.Parallel()
	s := semaphore.New(1)
	held := tkTry(t, s, 1)
	ch := tkEnqueue(t, context.Background(), s, 1)
	s.SetCapacity(s.Stats().Capacity + 1)
	r := xsRecv(t, ch)
	if r.err != nil {
		t.Fatalf("waiter after add_permits: %v", r.err)
	}
	r.p.Release()
	held.Release()
	tkAvailable(t, s, 2)
}

// TestConformanceTokioAddPermitsOpenAndClosed ports add_permits_open and
// add_permits_closed (tokio-rs/tokio, tokio/tests/sync_semaphore.rs): adding
// permits works the same on an open and a closed semaphore, and does not
// reopen a closed one.
func TestConformanceTokioAddPermitsOpenAndClosed(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		for size := int64(0); size < 4; size++ {
			for add := int64(0); add < 4; add++ {
				s := semaphore.New(size)
				if closed {
					s.Close()
				}
				s.SetCapacity(s.Stats().Capacity + add)
				st := s.Stats()
				if st.Available != size+add || st.Closed != closed {
					t.Fatalf("closed=%v size=%d add=%d: %+v", closed, size, add, st)
				}
			}
		}
	}
}

// TestConformanceTokioForget ports forget (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs and sync_semaphore_owned.rs). A Permit has
// no forget: the same effect is shrinking the capacity by its weight, then
// releasing it (shrinking first, so no other caller can take the freed
// permit in between). The permit never comes back.
func TestConformanceTokioForget(t *testing.T) {
	t.Parallel()
	s := semaphore.New(1)
	p := tkTry(t, s, 1)
	tkAvailable(t, s, 0)
	s.SetCapacity(s.Stats().Capacity - p.Weight()) // p.forget()
	tkAvailable(t, s, -1)
	p.Release()
	tkAvailable(t, s, 0)
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) succeeded after the only permit was forgotten")
	}
}

// TestConformanceTokioForgetPermits ports forget_open, forget_closed
// (tokio-rs/tokio, tokio/tests/sync_semaphore.rs) and forget_permits_basic
// (tokio/src/sync/tests/semaphore_batch.rs): forgetting up to n available
// permits removes min(n, available) of them, open or closed.
func TestConformanceTokioForgetPermits(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		for size := int64(0); size < 4; size++ {
			for sub := int64(0); sub < 4; sub++ {
				s := semaphore.New(size)
				if closed {
					s.Close()
				}
				took := tkForgetPermits(s, sub)
				want := max(size-sub, 0)
				st := s.Stats()
				if st.Available != want || took != size-want || st.Closed != closed {
					t.Fatalf("closed=%v %d-%d: took %d, %+v", closed, size, sub, took, st)
				}
			}
		}
	}
	s := semaphore.New(10)
	if got := tkForgetPermits(s, 4); got != 4 {
		t.Fatalf("forget_permits(4) of 10 = %d", got)
	}
	tkAvailable(t, s, 6)
	if got := tkForgetPermits(s, 10); got != 6 {
		t.Fatalf("forget_permits(10) of 6 = %d", got)
	}
	tkAvailable(t, s, 0)
}

// TestConformanceTokioMergeHoldsUntilLastRelease ports merge
// (tokio-rs/tokio, tokio/tests/sync_semaphore.rs and
// sync_semaphore_owned.rs) as far as our API goes: there is no merge, so two
// permits stay two handles, each giving back its own weight; the total comes
// back once both are released. merge_unrelated_permits (a panic when merging
// permits of two semaphores) and split have no counterpart
// (docs/compat.md).
func TestConformanceTokioMergeHoldsUntilLastRelease(t *testing.T) {
	t.Parallel()
	s := semaphore.New(3)
	p1 := tkTry(t, s, 1)
	tkAvailable(t, s, 2)
	p2 := tkTry(t, s, 2)
	tkAvailable(t, s, 0)
	if p1.Weight()+p2.Weight() != 3 {
		t.Fatalf("weights %d + %d, want 3", p1.Weight(), p2.Weight())
	}
	p1.Release()
	tkAvailable(t, s, 1)
	p2.Release()
	tkAvailable(t, s, 3)
}

// TestConformanceTokioStress ports stress_test (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs and sync_semaphore_owned.rs): 1000
// goroutines take and release a permit of a semaphore of 5; afterwards
// exactly 5 permits can be taken.
func TestConformanceTokioStress(t *testing.T) {
	t.Parallel()
	s := semaphore.New(5)
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(context.Background(), 1)
			if err != nil {
				t.Errorf("Acquire: %v", err)
				return
			}
			p.Release()
		}()
	}
	xsWait(t, &wg)
	for i := range 5 {
		if _, ok := s.TryAcquire(1); !ok {
			t.Fatalf("TryAcquire #%d failed: %+v", i+1, s.Stats())
		}
	}
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("a sixth TryAcquire succeeded on a semaphore of 5")
	}
}

// TestConformanceTokioMaxPermits ports add_max_amount_permits,
// add_more_than_max_amount_permits1, add_more_than_max_amount_permits2,
// panic_when_exceeds_maxpermits and no_panic_at_maxpermits (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs), max_permits_doesnt_panic and
// validates_max_permits (tokio/src/sync/tests/semaphore_batch.rs). Our bound
// is MaxCapacity (2^47-1; tokio's MAX_PERMITS is usize::MAX >> 3), and
// capacity is set, not added to, so "adding past the bound" is a
// SetCapacity above MaxCapacity: both New and SetCapacity panic there.
func TestConformanceTokioMaxPermits(t *testing.T) {
	t.Parallel()
	s := semaphore.New(0)
	s.SetCapacity(semaphore.MaxCapacity)
	tkAvailable(t, s, semaphore.MaxCapacity)

	if !tkPanics(func() {
		one := semaphore.New(1)
		one.SetCapacity(one.Stats().Capacity + semaphore.MaxCapacity)
	}) {
		t.Error("adding MaxCapacity to a semaphore of 1 did not panic")
	}
	if !tkPanics(func() {
		almost := semaphore.New(semaphore.MaxCapacity - 1)
		almost.SetCapacity(almost.Stats().Capacity + 1)
		almost.SetCapacity(almost.Stats().Capacity + 1)
	}) {
		t.Error("adding past MaxCapacity did not panic")
	}
	if !tkPanics(func() { semaphore.New(semaphore.MaxCapacity + 1) }) {
		t.Error("New(MaxCapacity+1) did not panic")
	}
	if tkPanics(func() {
		semaphore.New(semaphore.MaxCapacity)
		almost := semaphore.New(semaphore.MaxCapacity - 1)
		almost.SetCapacity(almost.Stats().Capacity + 1)
	}) {
		t.Error("a capacity of exactly MaxCapacity panicked")
	}
}

// TestConformanceTokioBlockingAcquire ports blocking_acquire,
// blocking_acquire_many, blocking_acquire_owned and
// blocking_acquire_many_owned (tokio-rs/tokio,
// tokio/tests/sync_semaphore.rs). Go has one Acquire for both worlds; the
// *_in_async_context panics have no counterpart.
func TestConformanceTokioBlockingAcquire(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ capacity, n int64 }{{1, 1}, {5, 3}} {
		s := semaphore.New(c.capacity)
		p, err := s.Acquire(context.Background(), c.n)
		if err != nil {
			t.Fatalf("Acquire(%d) of %d: %v", c.n, c.capacity, err)
		}
		tkAvailable(t, s, c.capacity-c.n)
		p.Release()
		tkAvailable(t, s, c.capacity)
	}
}

// TestConformanceTokioAcquireClosed ports blocking_acquire_closed
// (tokio-rs/tokio, tokio/tests/sync_semaphore.rs) and
// close_semaphore_prevents_acquire (tokio/src/sync/tests/semaphore_batch.rs):
// after Close every acquire fails (ErrClosed) and takes nothing. A request
// above the capacity of a closed semaphore fails too (tokio: closed; ours:
// ErrClosed or ErrTooHeavy, both refusals that take nothing).
func TestConformanceTokioAcquireClosed(t *testing.T) {
	t.Parallel()
	s := semaphore.New(5)
	s.Close()
	tkAvailable(t, s, 5)
	for range 2 {
		if _, err := s.Acquire(context.Background(), 1); !errors.Is(err, semaphore.ErrClosed) {
			t.Fatalf("Acquire(1) after Close = %v, want ErrClosed", err)
		}
		tkAvailable(t, s, 5)
	}
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) after Close succeeded")
	}

	one := semaphore.New(1)
	one.Close()
	_, err := one.Acquire(context.Background(), 2)
	if !errors.Is(err, semaphore.ErrClosed) && !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Acquire(2) on a closed semaphore of 1 = %v, want ErrClosed or ErrTooHeavy", err)
	}
	tkAvailable(t, one, 1)
}

// TestConformanceTokioCloseNotifiesWaiters ports close_semaphore_notifies_permit1
// and close_semaphore_notifies_permit2 (tokio-rs/tokio,
// tokio/src/sync/tests/semaphore_batch.rs): Close wakes every waiter with an
// error; permits held stay out and their releases still count; acquires
// after Close fail. permit1 waits on a semaphore of 0 in tokio, which ours
// refuses at once (ErrTooHeavy), so both waiters here wait behind held
// permits.
func TestConformanceTokioCloseNotifiesWaiters(t *testing.T) {
	t.Parallel()
	s := semaphore.New(2)
	h1 := tkTry(t, s, 1)
	h2 := tkTry(t, s, 1)
	w3 := tkEnqueue(t, context.Background(), s, 1)
	w4 := tkEnqueue(t, context.Background(), s, 1)
	s.Close()
	for i, ch := range []<-chan xsResult{w3, w4} {
		if r := xsRecv(t, ch); !errors.Is(r.err, semaphore.ErrClosed) {
			t.Fatalf("waiter %d after Close: %v, want ErrClosed", i+3, r.err)
		}
	}
	tkAvailable(t, s, 0)
	h1.Release()
	tkAvailable(t, s, 1)
	if _, err := s.Acquire(context.Background(), 1); !errors.Is(err, semaphore.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	h2.Release()
	tkAvailable(t, s, 2)
}

// TestConformanceTokioWaiterReservesNothing ports
// poll_acquire_many_unavailable (tokio-rs/tokio,
// tokio/src/sync/tests/semaphore_batch.rs). tokio assigns permits to the
// head waiter as they come free, so available_permits reads 0 while
// acquire(5) waits with 4 free. Ours differs: a waiter takes nothing until
// its whole request fits, so the 4 stay available (and still cannot be
// taken: TryAcquire does not overtake the waiter). The order of service is
// the same: acquire(5) first, then acquire(3) once 3 are free.
func TestConformanceTokioWaiterReservesNothing(t *testing.T) {
	t.Parallel()
	s := semaphore.New(5)
	p1 := tkTry(t, s, 1)
	tkAvailable(t, s, 4)
	w5 := tkEnqueue(t, context.Background(), s, 5)
	tkAvailable(t, s, 4) // tokio: 0
	if _, ok := s.TryAcquire(1); ok {
		t.Fatal("TryAcquire(1) overtook the waiting Acquire(5)")
	}
	w3 := tkEnqueue(t, context.Background(), s, 3)

	p1.Release()
	r5 := xsRecv(t, w5)
	if r5.err != nil {
		t.Fatalf("Acquire(5): %v", r5.err)
	}
	tkAvailable(t, s, 0)
	if st := s.Stats(); st.Waiters != 1 {
		t.Fatalf("Acquire(3) should still wait: %+v", st)
	}
	// tokio releases the 5 one, then two at a time; ours releases the whole
	// grant, after which acquire(3) is served and 2 remain.
	r5.p.Release()
	r3 := xsRecv(t, w3)
	if r3.err != nil {
		t.Fatalf("Acquire(3): %v", r3.err)
	}
	tkAvailable(t, s, 2)
	r3.p.Release()
	tkAvailable(t, s, 5)
}

// TestConformanceTokioCancelAcquireReleasesPermits ports
// cancel_acquire_releases_permits (tokio-rs/tokio,
// tokio/src/sync/tests/semaphore_batch.rs): a waiter that gives up (tokio:
// the future is dropped; ours: its context is cancelled) leaves everything
// as it was. tokio reads 0 available while acquire(8) waits, ours 6 (see
// TestConformanceTokioWaiterReservesNothing).
func TestConformanceTokioCancelAcquireReleasesPermits(t *testing.T) {
	t.Parallel()
	s := semaphore.New(10)
	tkTry(t, s, 4)
	tkAvailable(t, s, 6)
	ctx, cancel := context.WithCancel(context.Background())
	ch := tkEnqueue(t, ctx, s, 8)
	tkAvailable(t, s, 6) // tokio: 0
	cancel()
	if r := xsRecv(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Acquire(8) = %v, want context.Canceled", r.err)
	}
	tkAvailable(t, s, 6)
	tkTry(t, s, 6)
}

// TestConformanceTokioUpdatePermitsManyTimes ports update_permits_many_times
// (tokio-rs/tokio, tokio/src/sync/tests/semaphore_batch.rs). tokio's
// acquire(7) on a semaphore of 5 waits until release(5) makes it 10; ours
// fails at once with ErrTooHeavy, and succeeds once SetCapacity(10) has
// grown the semaphore. Then forgetting the 3 left over empties it.
func TestConformanceTokioUpdatePermitsManyTimes(t *testing.T) {
	t.Parallel()
	s := semaphore.New(5)
	if _, err := s.Acquire(context.Background(), 7); !errors.Is(err, semaphore.ErrTooHeavy) {
		t.Fatalf("Acquire(7) on capacity 5 = %v, want ErrTooHeavy at once", err)
	}
	s.SetCapacity(s.Stats().Capacity + 5)
	p, err := s.Acquire(context.Background(), 7)
	if err != nil {
		t.Fatalf("Acquire(7) on capacity 10: %v", err)
	}
	tkAvailable(t, s, 3)
	if got := tkForgetPermits(s, 3); got != 3 {
		t.Fatalf("forget_permits(3) = %d", got)
	}
	tkAvailable(t, s, 0)
	p.Release()
	tkAvailable(t, s, 7)
}
