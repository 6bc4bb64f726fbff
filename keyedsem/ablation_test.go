package keyedsem_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
)

// BenchmarkAblationClock runs the coarse clock (what New sets up with the
// real clock) against a system clock read per idle stamp, on the published
// rows: one key acquired and released by one goroutine, and a new key on
// every call; with the default idle timeout and with 0 (which stamps
// nothing). docs/internals.md has the figures and the command.
func BenchmarkAblationClock(b *testing.B) {
	for _, idle := range []struct {
		name string
		opts []keyedsem.Option
	}{{"default", nil}, {"0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}}} {
		for _, row := range []struct {
			name string
			key  func(i int) string
		}{{"uncontended", func(int) string { return benchKeys[0] }}, {"newkey", func(i int) string { return benchKeys[i&(len(benchKeys)-1)] }}} {
			for _, clk := range []string{"coarse", "timenow"} {
				b.Run("row="+row.name+"/idle="+idle.name+"/clock="+clk, func(b *testing.B) {
					s := keyedsem.New[string](idle.opts...)
					defer s.Close()
					if clk == "timenow" {
						keyedsem.UseTimeNow(s)
					}
					ctx := context.Background()
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						p, err := s.Acquire(ctx, row.key(i))
						if err != nil {
							b.Fatal(err)
						}
						p.Release()
					}
				})
			}
		}
	}
}
