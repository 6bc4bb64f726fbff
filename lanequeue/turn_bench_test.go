package lanequeue_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkAcquireTurn measures AcquireAll and Release of session + global
// on a free thread with turn options, beside BenchmarkAcquire's plain
// AcquireAll: on FIFO lanes, which ignore the options, and on ordered
// lanes (a session lane of sequence order, a global lane of priorities),
// each of which takes the field it orders by and drops the others.
func BenchmarkAcquireTurn(b *testing.B) {
	for _, c := range []struct {
		name   string
		keyed  []keyedsem.Option
		global []semaphore.Option
	}{
		{"lanes=FIFO", nil, nil},
		{"lanes=ordered", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.Option{semaphore.WithPriorities(time.Second)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := lanequeue.New[string]()
			defer q.Close()
			if err := addKeyed(q, "session", c.keyed...); err != nil {
				b.Fatal(err)
			}
			if err := addGlobal(q, "global", 16, c.global...); err != nil {
				b.Fatal(err)
			}
			chat, err := q.Lanes("session", "global")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for range b.N {
				t, err := q.AcquireAll(ctx, "thread", chat, semaphore.Priority(1), semaphore.Sequence(7))
				if err != nil {
					b.Fatal(err)
				}
				t.Release()
			}
		})
	}
}
