package keyedsem_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkHotKeyTurn is BenchmarkHotKey (32 goroutines on one key, every
// acquire but the first waits and is handed the permit) with each order
// beside FIFO, in one run: the cost of a policy is the difference between
// its row and fifo's. priorities-zero is plain Acquire on a semaphore with
// priorities (arrival order: the clock read and an insertion at the tail);
// priorities-rare gives one call in eight priority 1 (a user's turn among
// background work); priorities-mixed draws 0, 1, 2 in turn, so that most
// newcomers overtake waiters (a walk under the key's lock); sequence gives
// each goroutine's calls rising sequences, which interleave across
// goroutines as messages of one thread do.
func BenchmarkHotKeyTurn(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
		turn func(i int) semaphore.AcquireOption // nil: Acquire
	}{
		{"fifo", nil, nil},
		{"priorities-zero", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, nil},
		{"priorities-rare", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, rareHigh},
		{"priorities-mixed", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, func(i int) semaphore.AcquireOption { return semaphore.Priority(i % 3) }},
		{"sequence", []keyedsem.Option{keyedsem.WithSequenceOrder()}, func(i int) semaphore.AcquireOption { return semaphore.Sequence(int64(i)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := keyedsem.New[string](c.opts...)
			defer s.Close()
			ctx := context.Background()
			k := benchKeys[0]
			b.SetParallelism(16)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					var p semaphore.Permit
					var err error
					if c.turn == nil {
						p, err = s.Acquire(ctx, k)
					} else {
						p, err = s.Acquire(ctx, k, c.turn(i))
					}
					if err != nil {
						b.Error(err)
						return
					}
					p.Release()
				}
			})
		})
	}
}

// rareHigh gives one call in eight priority 1.
func rareHigh(i int) semaphore.AcquireOption {
	if i%8 == 0 {
		return semaphore.Priority(1)
	}
	return semaphore.AcquireOption{}
}
