package semaphore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// Priorities and fair share compose; barging, which lets callers pass the
// line, takes neither, and saying both is refused, not one of them
// silently dropped.
func TestOrderingOptionsCompose(t *testing.T) {
	pri, fair := semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil)
	barge := semaphore.WithBarging(time.Millisecond)
	for _, opts := range [][]semaphore.Option{{barge, pri}, {pri, barge}, {barge, fair}, {fair, barge}, {pri, fair, barge}} {
		if err := semaphore.Validate(1, opts...); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Fatalf("barging with an order: Validate = %v, want ErrInvalidConfig", err)
		}
	}
	for _, opts := range [][]semaphore.Option{{pri, fair}, {fair, pri}, {pri, pri}, {fair, fair}, {barge, barge}} {
		if err := semaphore.Validate(1, opts...); err != nil {
			t.Fatalf("options that compose: Validate = %v, want nil", err)
		}
	}
}
