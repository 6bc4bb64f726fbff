package keyedsem_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
)

// A holder of key A never delays key B: B is granted without waiting while
// A is held and has a queue. A watchdog cancels B's acquire if it ever
// queues, so a B that waits fails the test instead of hanging it.
func TestHolderOfOneKeyNeverDelaysAnother(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithMaxKeys(1))
	defer s.Close()
	pa, err := s.Acquire(bg, "A")
	require.NoError(t, err)
	wa := queue(t, s, bg, "A", 1, 1)

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s.Stats().Waiters > 1 {
				cancel()
				return
			}
			runtime.Gosched()
		}
	}()
	pb, err := s.Acquire(ctx, "B")
	close(stop)
	<-watched
	require.NoError(t, err, "B waited for A")
	assert.Equal(t, 2, s.Len(), "busy entries may exceed the soft cap")

	pc, ok := s.TryAcquire("C")
	require.True(t, ok, "TryAcquire of a third key while A is held")
	pc.Release()
	pb.Release()
	pa.Release()
	r := recv(t, wa, "the waiter of A")
	require.NoError(t, r.err)
	r.p.Release()
}
