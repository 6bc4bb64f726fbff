package lanequeue_test

import (
	"context"
	"runtime"
	"sync/atomic"
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
// lanes=sequence+fairshare is issue 23's third composed order, fair share
// with sequence order: a session lane of sequence order and a global lane
// of fair share, the call carrying a sequence and a group (two options, as
// the other rows' calls carry two).
func BenchmarkAcquireTurn(b *testing.B) {
	for _, c := range []struct {
		name   string
		keyed  []keyedsem.Option
		global []semaphore.Option
		turn   []semaphore.AcquireOption
	}{
		{"lanes=FIFO", nil, nil, []semaphore.AcquireOption{semaphore.Priority(1), semaphore.Sequence(7)}},
		{"lanes=ordered", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.Option{semaphore.WithPriorities(time.Second)},
			[]semaphore.AcquireOption{semaphore.Priority(1), semaphore.Sequence(7)}},
		{"lanes=sequence+fairshare", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.Option{semaphore.WithFairShare(nil)},
			[]semaphore.AcquireOption{semaphore.Sequence(7), semaphore.Group("tenant-a")}},
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
				t, err := q.AcquireAll(ctx, "thread", chat, c.turn...)
				if err != nil {
					b.Fatal(err)
				}
				t.Release()
			}
		})
	}
}

// BenchmarkAcquireTurnContended is the contended form of
// BenchmarkAcquireTurn: 32 goroutines on 4 threads (8 to a session key)
// take a session lane and a global lane of capacity 2, so that callers
// wait on both. Goroutine i writes to thread i%4 with rising sequences
// and belongs to group (i/4)%4, so that every thread's callers are of
// every group. Every call carries its Sequence and Group; FIFO lanes
// ignore them. lanes=sequence+fairshare, the keyed lane of sequence order
// beside a global lane of fair share, is issue 23's fair share + sequence
// row (at most 1.15x lanes=FIFO); the rows of each order alone show which
// lane pays.
func BenchmarkAcquireTurnContended(b *testing.B) {
	threads := []string{"thread-0", "thread-1", "thread-2", "thread-3"}
	groups := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	for _, c := range []struct {
		name   string
		keyed  []keyedsem.Option
		global []semaphore.Option
	}{
		{"lanes=FIFO", nil, nil},
		{"lanes=sequence", []keyedsem.Option{keyedsem.WithSequenceOrder()}, nil},
		{"lanes=fairshare", nil, []semaphore.Option{semaphore.WithFairShare(nil)}},
		{"lanes=sequence+fairshare", []keyedsem.Option{keyedsem.WithSequenceOrder()}, []semaphore.Option{semaphore.WithFairShare(nil)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := lanequeue.New[string]()
			defer q.Close()
			if err := addKeyed(q, "session", c.keyed...); err != nil {
				b.Fatal(err)
			}
			if err := addGlobal(q, "global", 2, c.global...); err != nil {
				b.Fatal(err)
			}
			chat, err := q.Lanes("session", "global")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism(max(1, 32/procs))
			b.ReportAllocs()
			var id atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := id.Add(1) - 1
				thread, group := threads[i%4], semaphore.Group(groups[(i/4)%4])
				for seq := int64(1); pb.Next(); seq++ {
					t, err := q.AcquireAll(ctx, thread, chat, semaphore.Sequence(seq), group)
					if err != nil {
						b.Error(err)
						return
					}
					t.Release()
				}
			})
		})
	}
}
