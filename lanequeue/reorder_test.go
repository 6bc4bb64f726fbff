package lanequeue_test

import (
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestReorderHoldTryAcquireAll: a try of a keyed lane with the reorder
// hold gives the lane its number, so a held number is refused and the next
// one taken.
func TestReorderHoldTryAcquireAll(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, addKeyed(q, "thread", keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(time.Hour)))
	set, err := q.Lanes("thread")
	must(t, err)
	try := func(seq int64) bool {
		tk, ok := q.TryAcquireAll("k", set, semaphore.Sequence(seq))
		if ok {
			tk.Release()
		}
		return ok
	}
	if !try(1) {
		t.Fatal("message 1 refused on a free key")
	}
	if try(3) {
		t.Fatal("message 3 taken while 2 has not come")
	}
	if !try(2) || !try(3) {
		t.Fatal("messages 2 then 3 refused")
	}
}
