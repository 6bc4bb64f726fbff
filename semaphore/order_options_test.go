package semaphore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sessionlane/lanes/semaphore"
)

// The ordering options exclude each other: a semaphore cannot serve by
// priority and by group at once, and saying both is refused, not one of
// them silently dropped.
func TestOrderingOptionsExcludeEachOther(t *testing.T) {
	pri, fair := semaphore.WithPriorities(time.Second), semaphore.WithFairShare(nil)
	barge := semaphore.WithBarging(time.Millisecond)
	for _, opts := range [][]semaphore.Option{{pri, fair}, {fair, pri}, {barge, pri}, {pri, barge}, {barge, fair}, {fair, barge}} {
		if err := semaphore.Validate(1, opts...); !errors.Is(err, semaphore.ErrInvalidConfig) {
			t.Fatalf("two ordering options: Validate = %v, want ErrInvalidConfig", err)
		}
	}
	for _, opt := range []semaphore.Option{pri, fair, barge} {
		if err := semaphore.Validate(1, opt, opt); err != nil {
			t.Fatalf("one ordering option given twice: Validate = %v, want nil", err)
		}
	}
}
