package keyedsem_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkPlace measures a place's life beside BenchmarkUncontended's
// Acquire and Release: Join, Wait and Release of a free key (granted at
// Join), and Join and Leave of a place in line behind a holder.
func BenchmarkPlace(b *testing.B) {
	ctx := context.Background()
	b.Run("granted", func(b *testing.B) {
		s := keyedsem.New[string]()
		defer s.Close()
		b.ReportAllocs()
		for range b.N {
			pl, err := s.Join("thread")
			if err != nil {
				b.Fatal(err)
			}
			p, err := pl.Wait(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
	})
	b.Run("inLine", func(b *testing.B) {
		s := keyedsem.New[string]()
		defer s.Close()
		holder, err := s.Acquire(ctx, "thread")
		if err != nil {
			b.Fatal(err)
		}
		defer holder.Release()
		b.ReportAllocs()
		for range b.N {
			pl, err := s.Join("thread")
			if err != nil {
				b.Fatal(err)
			}
			pl.Leave()
		}
	})
	// Hand-offs on one key: each Wait's turn comes with the release of
	// the place joined before it, by a goroutine that waits meanwhile.
	b.Run("handoff", func(b *testing.B) {
		s := keyedsem.New[string]()
		defer s.Close()
		places := make(chan semaphore.Place, 64)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for pl := range places {
				p, err := pl.Wait(ctx)
				if err != nil {
					panic(err)
				}
				p.Release()
			}
		}()
		b.ReportAllocs()
		for range b.N {
			pl, err := s.Join("thread")
			if err != nil {
				b.Fatal(err)
			}
			places <- pl
		}
		close(places)
		<-done
	})
}
