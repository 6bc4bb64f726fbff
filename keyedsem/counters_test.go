package keyedsem_test

import (
	"errors"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// A waiter that Close fails is counted in Failed, not in Rejected (issue
// 13: one meaning per counter, as package semaphore defines them), and a
// grant that waited is counted in Waited.
func TestCountersFailedAndWaited(t *testing.T) {
	s := keyedsem.New[string]()
	held, err := s.Acquire(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	w := queue(t, s, bg, "k", 1, 1)
	held.Release()
	r := recv(t, w, "the waiter")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if c := s.Stats().Counters; c.Waited != 1 || c.Acquired != 2 {
		t.Fatalf("after one grant that waited: Waited %d, Acquired %d; want 1, 2", c.Waited, c.Acquired)
	}
	w = queue(t, s, bg, "k", 1, 1)
	s.Close()
	if r := recv(t, w, "the waiter Close fails"); !errors.Is(r.err, semaphore.ErrClosed) {
		t.Fatalf("the waiter got %v from Close, want ErrClosed", r.err)
	}
	if c := s.Stats().Counters; c.Failed != 1 || c.Rejected != 0 {
		t.Fatalf("after Close failed a waiter: Failed %d, Rejected %d; want 1, 0", c.Failed, c.Rejected)
	}
	r.p.Release()
}
