package fastctx_test

import (
	"context"
	"testing"

	"github.com/sessionlane/lanes/internal/fastctx"
)

type valueKey struct{}

func TestNeverDone(t *testing.T) {
	if !fastctx.NeverDone(context.Background()) || !fastctx.NeverDone(context.TODO()) {
		t.Fatal("Background and TODO must be recognised")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []context.Context{ctx, context.WithValue(context.Background(), valueKey{}, 1), context.WithoutCancel(ctx)} {
		if fastctx.NeverDone(c) {
			t.Fatalf("%T wrongly taken for a context that never ends", c)
		}
	}
}
