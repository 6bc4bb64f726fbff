package testkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// The helpers of the place tests ("a place in line now, the wait later"),
// which each package that has places (semaphore, keyedsem, lanequeue)
// runs against its own Place type.

// Await calls wait (a Place's Wait, say) with a context that ends after
// Deadline, and fails t, naming what, if it returns an error.
func Await[T any](t testing.TB, what string, wait func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	v, err := wait(ctx)
	if err != nil {
		t.Fatalf("%s: Wait: %v", what, err)
	}
	return v
}

// ServedInJoinOrder checks that n places, joined 1..n before the call,
// are served in the order joined although their Waits are called n..1,
// each on a goroutine of its own once the one before it has queued
// (waiting, the number of callers in line, has grown by one). A place
// that took its turn at Wait rather than at Join would be served n..2
// after 1. wait(ctx, i) waits for place i; what it returns is released
// at once.
func ServedInJoinOrder[R interface{ Release() bool }](t testing.TB, n int, waiting func() int, wait func(ctx context.Context, i int) (R, error)) {
	t.Helper()
	var mu sync.Mutex
	var served []int
	var wg sync.WaitGroup
	for i := n; i >= 1; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), Deadline)
			defer cancel()
			r, err := wait(ctx, i)
			if err != nil {
				t.Errorf("place %d: %v", i, err)
				return
			}
			mu.Lock()
			served = append(served, i)
			mu.Unlock()
			r.Release()
		}()
		if i > 1 {
			// Every place but the first waits: once n-i+1 callers are in
			// line, this Wait (were it the one to queue) has queued.
			Eventually(t, "the Waits to queue", func() bool { return waiting() >= n-i+1 })
		}
	}
	WaitAll(t, &wg, "the places to be served")
	if !slices.IsSorted(served) || len(served) != n {
		t.Fatalf("served %v; want 1..%d in the order joined", served, n)
	}
}

// RacePlace ends a place in one of the ways a racing caller may, by mode
// (0 to 3): 0 gives it up (leave) without waiting; 1 waits with a context
// that another goroutine cancels meanwhile, and gives it up after a
// failed Wait (which must do nothing); 2 waits while another goroutine
// gives it up (one of the two wins); 3 waits. It returns what the Wait
// returned and true; false if the place ended without a permit as the
// mode allows (left, the context's error, used: the package's
// ErrPlaceUsed); or an error for any other outcome.
func RacePlace[T any](mode int, wait func(context.Context) (T, error), leave func(), used error) (T, bool, error) {
	var zero T
	ctx := context.Background()
	switch mode {
	case 0:
		leave()
		return zero, false, nil
	case 1:
		c, cancel := context.WithCancel(ctx)
		defer cancel()
		go cancel()
		ctx = c
	case 2:
		go leave()
	}
	v, err := wait(ctx)
	if err != nil && mode == 1 {
		leave() // after a failed Wait: nothing
	}
	switch {
	case err == nil:
		return v, true, nil
	case mode == 1 && errors.Is(err, context.Canceled), mode == 2 && errors.Is(err, used):
		return zero, false, nil
	}
	return zero, false, fmt.Errorf("racing place, mode %d: Wait: %w", mode, err)
}
