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
// goroutines as messages of one thread do. The composed rows,
// priorities-rare+sequence and priorities-mixed+sequence, are a key with
// WithPriorities and WithSequenceOrder together, each call carrying both
// its priority (as in the row of that name) and a rising sequence: a
// newcomer is placed by its band, then by its number within the band
// (issue 23: at most 1.15x fifo, 0 allocs).
func BenchmarkHotKeyTurn(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
		turn func(i int) semaphore.AcquireOption // nil: Acquire
		seq  bool                                // calls carry Sequence(i+1) beside turn(i)
	}{
		{"fifo", nil, nil, false},
		{"priorities-zero", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, nil, false},
		{"priorities-rare", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, rareHigh, false},
		{"priorities-mixed", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, mixed, false},
		{"sequence", []keyedsem.Option{keyedsem.WithSequenceOrder()}, func(i int) semaphore.AcquireOption { return semaphore.Sequence(int64(i)) }, false},
		{"priorities-rare+sequence", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond), keyedsem.WithSequenceOrder()}, rareHigh, true},
		{"priorities-mixed+sequence", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond), keyedsem.WithSequenceOrder()}, mixed, true},
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
					switch {
					case c.turn == nil:
						p, err = s.Acquire(ctx, k)
					case c.seq:
						p, err = s.Acquire(ctx, k, c.turn(i), semaphore.Sequence(int64(i+1)))
					default:
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

// mixed draws priorities 0, 1, 2 in turn.
func mixed(i int) semaphore.AcquireOption { return semaphore.Priority(i % 3) }

// rareHigh gives one call in eight priority 1.
func rareHigh(i int) semaphore.AcquireOption {
	if i%8 == 0 {
		return semaphore.Priority(1)
	}
	return semaphore.AcquireOption{}
}
