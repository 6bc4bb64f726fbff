package redislane_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/redislane"
)

// A permit's context, made by its first Context call, may be asked for
// while the permit is released, from several goroutines at once: every
// caller gets the same context, and it ends with ErrReleased, whichever
// came first. Per grant and under quota.
func TestPermitContextAskedWhileReleased(t *testing.T) {
	srv := startRedis(t)
	for _, c := range []struct {
		name string
		opts []redislane.Option
	}{
		{"grant", nil},
		{"quota", []redislane.Option{redislane.WithQuota(4)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSem(t, srv.Addr, laneName(t), 8, c.opts...)
			ctx := testCtx(t)
			for range 40 {
				p, err := s.Acquire(ctx, 1)
				require.NoError(t, err)
				var wg sync.WaitGroup
				got := make([]context.Context, 4)
				for i := range got {
					wg.Add(1)
					go func() { defer wg.Done(); got[i] = p.Context() }()
				}
				wg.Add(1)
				go func() { defer wg.Done(); assert.True(t, p.Release()) }()
				wg.Wait()
				for i := range got {
					require.Same(t, got[0], got[i], "two contexts for one permit")
				}
				select {
				case <-got[0].Done():
				case <-ctx.Done():
					t.Fatal("the context of a released permit never ended")
				}
				assert.True(t, errors.Is(context.Cause(got[0]), redislane.ErrReleased), "cause %v", context.Cause(got[0]))
				assert.Same(t, got[0], p.Context())
			}
		})
	}
}
