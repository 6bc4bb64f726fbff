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

// BenchmarkAblationBacklog runs the soft cap's trims from the backlog of
// the last pass (what New sets up) against a pass over every entry per
// trim (the knob NoBacklog), on the row it is for: a new key on every
// call with the default options (soft cap 4096, idle an hour), so that
// every 1024th new key takes the count over the cap: every key kept
// (KeepFresh), as keys that come back are. docs/internals.md has the
// figures and the command.
func BenchmarkAblationBacklog(b *testing.B) {
	for _, backlog := range []string{"on", "off"} {
		b.Run("row=newkey/backlog="+backlog, func(b *testing.B) {
			s := keyedsem.New[string]()
			defer s.Close()
			keyedsem.KeepFresh(s)
			if backlog == "off" {
				keyedsem.NoBacklog(s)
			}
			newKeys(b, s)
			// The work saved, free of the machine's noise: a pass looks
			// at every entry (4097 here).
			b.ReportMetric(float64(keyedsem.Passes(s))*1e6/float64(b.N), "passes/1e6op")
		})
	}
}

// BenchmarkAblationPair runs entries made with a token of their own (what
// New sets up with idle timeout 0 and capacity 1) against tokens from the
// pool (the knob NoPair), on the row it is for: a new key on every call
// with idle timeout 0. docs/internals.md has the figures and the command.
func BenchmarkAblationPair(b *testing.B) {
	for _, pair := range []string{"on", "off"} {
		b.Run("row=newkey/idle=0/pair="+pair, func(b *testing.B) {
			s := keyedsem.New[string](keyedsem.WithIdleTimeout(0))
			defer s.Close()
			if pair == "off" {
				keyedsem.NoPair(s)
			}
			newKeys(b, s)
		})
	}
}

// BenchmarkAblationFresh runs keys used once dropped as they go idle over
// three quarters of the soft cap (what New sets up with an idle timeout,
// see dropFresh) against every key kept until evicted for a newer one (the
// knob KeepFresh), on the row it is for: a new key on every call with the
// default options (soft cap 4096, idle an hour). docs/internals.md has the
// figures and the command.
func BenchmarkAblationFresh(b *testing.B) {
	for _, fresh := range []string{"drop", "keep"} {
		b.Run("row=newkey/fresh="+fresh, func(b *testing.B) {
			s := keyedsem.New[string]()
			defer s.Close()
			if fresh == "keep" {
				keyedsem.KeepFresh(s)
			}
			newKeys(b, s)
			b.ReportMetric(float64(s.Stats().Evicted)/float64(b.N), "evicted/op")
		})
	}
}

// BenchmarkAblationHandOff runs releases into a key's queue that hand their
// token to the head (what New sets up at per-key capacity 1, see handOff)
// against releases that give the permit back for the head to claim (the
// knob NoHandOff), on the row it is for: one key, 32 goroutines, with the
// default options and with idle timeout 0. docs/internals.md has the
// figures and the command.
func BenchmarkAblationHandOff(b *testing.B) {
	for _, idle := range []struct {
		name string
		opts []keyedsem.Option
	}{{"default", nil}, {"0", []keyedsem.Option{keyedsem.WithIdleTimeout(0)}}} {
		for _, on := range []string{"on", "off"} {
			b.Run("row=hot-g32/idle="+idle.name+"/handoff="+on, func(b *testing.B) {
				s := keyedsem.New[string](idle.opts...)
				defer s.Close()
				if on == "off" {
					keyedsem.NoHandOff(s)
				}
				runHotKey(b, s)
			})
		}
	}
}
