package keyedsem_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// benchKeys are gateway session keys, built once so that the benchmarks
// measure the semaphore and not fmt.
var benchKeys = func() []string {
	k := make([]string, 1<<18)
	for i := range k {
		k[i] = fmt.Sprintf("gateway:slack:C%d:U%d:thread_%d", 1000+i%7, 2000+i%13, 3000+i)
	}
	return k
}()

// newKeys acquires and releases b.N keys of benchKeys on s, one after the
// other: a key not seen for 2^18 calls each time (with idle timeout 0 a
// new entry, with the defaults one evicted since).
func newKeys(b *testing.B, s *keyedsem.Keyed[string]) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, err := s.Acquire(ctx, benchKeys[i&(len(benchKeys)-1)])
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// Each goroutine works on its own 64 keys, so no two goroutines share a
// key: the figure is the cost of the map and the entry, not of waiting.
func BenchmarkDistinctKeys(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{
		{"kept", nil}, // entries stay for the idle timeout: the steady state
		{"idle0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}}, // an entry made and dropped per acquire
	} {
		b.Run(c.name, func(b *testing.B) {
			s := keyedsem.New[string](c.opts...)
			defer s.Close()
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(16) // 32 goroutines on 2 processors
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				base := int(next.Add(1)-1) * 64
				i := 0
				for pb.Next() {
					k := benchKeys[(base+i&63)&(len(benchKeys)-1)]
					p, err := s.Acquire(ctx, k)
					if err != nil {
						b.Error(err)
						return
					}
					p.Release()
					i++
				}
			})
		})
	}
}

// All goroutines on one key: every acquire but the first waits in FIFO
// order and is handed the permit by the previous holder.
func BenchmarkHotKey(b *testing.B) {
	s := keyedsem.New[string]()
	defer s.Close()
	runHotKey(b, s)
}

// runHotKey runs BenchmarkHotKey's loop on s: 32 goroutines on 2
// processors acquire and release one key.
func runHotKey(b *testing.B, s *keyedsem.Keyed[string]) {
	b.Helper()
	ctx := context.Background()
	k := benchKeys[0]
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := s.Acquire(ctx, k)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}

// A key never seen before on every operation (sub-agents with unique ids).
func BenchmarkNewKey(b *testing.B) {
	type gateKey struct{ Channel, ChannelID, Sender, Thread string }
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{
		{"kept", nil}, // idle entries pile up to the cap, then are evicted in batches
		{"idle0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
	} {
		b.Run(c.name+"/string", func(b *testing.B) {
			s := keyedsem.New[string](c.opts...)
			defer s.Close()
			newKeys(b, s)
		})
		b.Run(c.name+"/struct", func(b *testing.B) {
			s := keyedsem.New[gateKey](c.opts...)
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				k := gateKey{"slack", "C1000", "U2000", benchKeys[i&(len(benchKeys)-1)]}
				p, err := s.Acquire(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
	}
}

// One goroutine, one key, nobody waiting: the lock-free path.
func BenchmarkUncontended(b *testing.B) {
	s := keyedsem.New[string]()
	defer s.Close()
	ctx := context.Background()
	k := benchKeys[0]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, err := s.Acquire(ctx, k)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// Retained heap per key after 100k distinct keys were used once each: with
// a long idle timeout (every entry kept) and with idle timeout 0 (none
// kept). The keys themselves are counted, as a map keyed by them would
// hold them. Also the bytes per peak key left after 100k keys were held
// at once, released, and swept.
func BenchmarkIdleKeyMemory(b *testing.B) {
	const n = 100_000
	keys := make([]string, n)
	build := func() {
		for i := range keys {
			keys[i] = fmt.Sprintf("gateway:slack:C%d:U%d:thread_%d", 1000+i%7, 2000+i%13, 3000+i)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
	}{
		{"kept", []keyedsem.Option{keyedsem.WithMaxKeys(2 * n)}},
		{"idle0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var per float64
			for i := 0; i < b.N; i++ {
				clear(keys)
				before := heap()
				build()
				s := keyedsem.New[string](c.opts...)
				for _, k := range keys {
					p, err := s.Acquire(ctx, k)
					if err != nil {
						b.Fatal(err)
					}
					p.Release()
				}
				clear(keys) // only the semaphore keeps the keys now
				per = float64(heap()-before) / n
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/key")
		})
	}
	b.Run("burst-swept", func(b *testing.B) {
		var per float64
		for i := 0; i < b.N; i++ {
			clear(keys)
			before := heap()
			build()
			s := keyedsem.New[string](keyedsem.WithMaxKeys(2*n), keyedsem.WithIdleTimeout(time.Nanosecond))
			ps := make([]semaphore.Permit, n)
			for j, k := range keys {
				p, err := s.Acquire(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				ps[j] = p
			}
			for _, p := range ps {
				p.Release()
			}
			ps = nil
			clear(keys)
			for s.Sweep() > 0 {
			}
			per = float64(int64(heap())-int64(before)) / n
			runtime.KeepAlive(s)
		}
		b.ReportMetric(per, "B/peak-key")
	})
}
