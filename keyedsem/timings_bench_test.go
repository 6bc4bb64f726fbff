package keyedsem_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
)

// BenchmarkTimings is the cost of WithHistograms on BenchmarkUncontended's
// loop: one goroutine acquiring and releasing one key, off and on.
func BenchmarkTimings(b *testing.B) {
	for _, h := range []string{"off", "on"} {
		b.Run("case=uncontended/hist="+h, func(b *testing.B) {
			var opts []keyedsem.Option
			if h == "on" {
				opts = append(opts, keyedsem.WithHistograms())
			}
			s := keyedsem.New[string](opts...)
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, err := s.Acquire(ctx, "k")
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
	}
}
