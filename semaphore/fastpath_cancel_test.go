package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// staleCtx is a cancellable context whose Err, on the call that armed it,
// reads its answer and then stops until let go, and returns the answer it
// read: what a goroutine sees when it is descheduled just after looking at
// its context. The test cancels and releases while it is stopped there.
type staleCtx struct {
	context.Context
	armed   atomic.Bool
	reached chan struct{}
	letGo   chan struct{}
}

func (c *staleCtx) Err() error {
	err := c.Context.Err()
	if c.armed.CompareAndSwap(true, false) {
		close(c.reached)
		<-c.letGo
	}
	return err
}

// A context that ends before the permits come free wins on the fast path
// too, not only in the queue: Acquire looks at its context, is descheduled,
// and meanwhile the context is cancelled and then the permits are released.
// Acquire must not take the permits that came free after the cancellation
// (issue 11, defect 1; found by trying the package as a new user: 62 of
// 60,000 rounds took the permit under -race before the fix).
//
// With one permit more than the inline tokens, and all but one held
// throughout, the released permit is the last, whose grant needs a spare
// token: Acquire then goes to the
// slow path, which claims under the lock, and must look at ctx there too.
//
// A semaphore made WithHistograms takes its own fast path (acquireTimed),
// which must look at ctx after its load as well.
func TestCancelBeforeReleaseWinsOnTheFastPathRace(t *testing.T) {
	t.Run("inline", func(t *testing.T) { cancelBeforeReleaseFast(t, 1) })
	t.Run("locked", func(t *testing.T) { cancelBeforeReleaseFast(t, semaphore.InlineTokens+1) })
	t.Run("inline timed", func(t *testing.T) { cancelBeforeReleaseFast(t, 1, semaphore.WithHistograms()) })
	t.Run("locked timed", func(t *testing.T) {
		cancelBeforeReleaseFast(t, semaphore.InlineTokens+1, semaphore.WithHistograms())
	})
}

func cancelBeforeReleaseFast(t *testing.T, capacity int64, opts ...semaphore.Option) {
	for round := 0; round < 1000; round++ {
		s := semaphore.New(capacity, opts...)
		for i := int64(1); i < capacity; i++ {
			if _, err := s.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
		}
		held, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		parent, cancel := context.WithCancel(context.Background())
		ctx := &staleCtx{Context: parent, reached: make(chan struct{}), letGo: make(chan struct{})}
		ctx.armed.Store(true)
		res := make(chan error, 1)
		go func() {
			p, err := s.Acquire(ctx, 1)
			if err == nil {
				p.Release()
			}
			res <- err
		}()
		select {
		case <-ctx.reached:
		case <-time.After(time.Minute):
			t.Fatal("Acquire never looked at its context")
		}
		cancel()
		held.Release()
		close(ctx.letGo)
		select {
		case err = <-res:
		case <-time.After(time.Minute):
			t.Fatal("Acquire did not return")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Acquire = %v after its context was cancelled before the release; want context.Canceled", round, err)
		}
		st := s.Stats()
		if st.Held != capacity-1 || st.Available != 1 || st.Acquired != uint64(capacity) || st.Cancelled != 1 {
			t.Fatalf("round %d: %+v; want the released permit free, %d grants (the holders'), 1 cancelled", round, st, capacity)
		}
	}
}

// Acquire skips ctx.Err for the contexts that never end; it must
// recognise exactly Background and TODO, not another context of a
// zero-size type (whose values share one address), not one derived from
// Background, and not a nil-valued Context of another type.
func TestNeverEndsKnowsOnlyBackgroundAndTODO(t *testing.T) {
	if !semaphore.NeverEnds(context.Background()) || !semaphore.NeverEnds(context.TODO()) {
		t.Fatal("Background or TODO not recognised")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{
		"zero-size, ended":    endedZeroCtx{},
		"WithCancel":          ended,
		"WithoutCancel":       context.WithoutCancel(context.Background()),
		"WithValue":           context.WithValue(context.Background(), ctxKey{}, 1),
		"nil *pointer to ctx": (*endedPtrCtx)(nil),
	} {
		if semaphore.NeverEnds(ctx) {
			t.Errorf("%s taken for a context that never ends", name)
		}
	}
	// And Acquire acts on it: an ended zero-size context is refused.
	s := semaphore.New(1)
	if _, err := s.Acquire(endedZeroCtx{}, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended zero-size context: %v, want context.Canceled", err)
	}
}

type ctxKey struct{}

// endedZeroCtx is a context of a zero-size type that has always ended.
type endedZeroCtx struct{}

func (endedZeroCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (endedZeroCtx) Done() <-chan struct{}       { return closedChan }
func (endedZeroCtx) Err() error                  { return context.Canceled }
func (endedZeroCtx) Value(any) any               { return nil }

// endedPtrCtx is a pointer context whose methods work on nil.
type endedPtrCtx struct{}

func (*endedPtrCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*endedPtrCtx) Done() <-chan struct{}       { return closedChan }
func (*endedPtrCtx) Err() error                  { return context.Canceled }
func (*endedPtrCtx) Value(any) any               { return nil }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
