package semaphore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sessionlane/lanes/semaphore"
)

// A waiter that Close fails is counted in Failed, not in Rejected (issue
// 13: one meaning per counter); so is one that a shrink fails. Before, the
// semaphore counted such waiters nowhere.
func TestWaitersFailedByCloseOrShrinkCountAsFailed(t *testing.T) {
	s := semaphore.New(2)
	held, err := s.Acquire(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	heavy := enqueue(t, context.Background(), s, 2)
	light := enqueue(t, context.Background(), s, 1)
	s.SetCapacity(1) // too small for the heavy waiter
	if r := recv(t, heavy); !errors.Is(r.err, semaphore.ErrTooHeavy) {
		t.Fatalf("the heavy waiter got %v after the shrink, want ErrTooHeavy", r.err)
	}
	if c := s.Stats().Counters; c.Failed != 1 || c.Rejected != 0 {
		t.Fatalf("after a shrink failed one waiter: Failed %d, Rejected %d; want 1, 0", c.Failed, c.Rejected)
	}
	s.Close()
	if r := recv(t, light); !errors.Is(r.err, semaphore.ErrClosed) {
		t.Fatalf("the waiter got %v from Close, want ErrClosed", r.err)
	}
	if c := s.Stats().Counters; c.Failed != 2 || c.Rejected != 0 || c.Waited != 0 {
		t.Fatalf("after Close failed one more: Failed %d, Rejected %d, Waited %d; want 2, 0, 0", c.Failed, c.Rejected, c.Waited)
	}
	held.Release()
}
