package lanequeue_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// BenchmarkWatch is the cost of what the queue can be asked to watch, on
// BenchmarkAcquire's uncontended session+global row: nothing (the
// default), the lanes' histograms (WithHistograms on both), the hooks
// (LogHooks whose bounds no call reaches), and both.
func BenchmarkWatch(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		hist, hooks bool
	}{{"off", false, false}, {"hist", true, false}, {"hooks", false, true}, {"both", true, true}} {
		b.Run("watch="+c.name, func(b *testing.B) {
			q := lanequeue.New[string]()
			defer q.Close()
			var kopts []keyedsem.Option
			var gopts []semaphore.Option
			if c.hist {
				kopts, gopts = append(kopts, keyedsem.WithHistograms()), append(gopts, semaphore.WithHistograms())
			}
			must(b, addKeyed(q, "session", kopts...))
			must(b, addGlobal(q, "global", 64, gopts...))
			if c.hooks {
				q.SetHooks(lanequeue.LogHooks[string](slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, time.Hour))
			}
			lanes, err := q.Lanes("session", "global")
			must(b, err)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				t, err := q.AcquireAll(ctx, benchKeys[i&63], lanes)
				if err != nil {
					b.Fatal(err)
				}
				t.Release()
			}
		})
	}
}
