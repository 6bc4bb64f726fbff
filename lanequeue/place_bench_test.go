package lanequeue_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
)

// BenchmarkPlace measures Join, Wait and Release under session + global
// lanes on a free thread, beside BenchmarkAcquire's AcquireAll: a Place is
// one allocation (its record) more.
func BenchmarkPlace(b *testing.B) {
	q := lanequeue.Default[string](16)
	defer q.Close()
	chat, err := q.Lanes("session", "global")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		pl, err := q.Join("thread", chat)
		if err != nil {
			b.Fatal(err)
		}
		t, err := pl.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.Release()
	}
}
