package keyedsem_test

import (
	"context"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Arrivals come from the coarse clock only on the real clock, with a step
// long enough for it (waitq.CoarseArrivals); and there the order holds: a
// higher band that comes later goes first.
func TestCoarseArrivalsOnlyForALongStep(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyedsem.Option
		want bool
	}{
		{"1ms", []keyedsem.Option{keyedsem.WithPriorities(time.Millisecond)}, false},
		{"1s", []keyedsem.Option{keyedsem.WithPriorities(time.Second)}, true},
		{"1s-fake-clock", []keyedsem.Option{keyedsem.WithPriorities(time.Second), keyedsem.WithClock(clock.NewFake(time.Unix(0, 0)))}, false},
	} {
		s := keyedsem.New[string](c.opts...)
		if got := keyedsem.CoarseArrivals(s); got != c.want {
			t.Errorf("%s: CoarseArrivals = %v; want %v", c.name, got, c.want)
		}
		s.Close()
	}

	s := keyedsem.New[string](keyedsem.WithPriorities(time.Hour))
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := s.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	low, err := s.Join("k")
	if err != nil {
		t.Fatal(err)
	}
	high, err := s.Join("k", semaphore.Priority(1))
	if err != nil {
		t.Fatal(err)
	}
	held.Release()
	// high is served first: low's Wait can only return once high's permit
	// is released.
	p, err := high.Wait(ctx)
	if err != nil {
		t.Fatalf("the higher band's wait: %v", err)
	}
	p.Release()
	if p, err = low.Wait(ctx); err != nil {
		t.Fatalf("the lower band's wait: %v", err)
	}
	p.Release()
}
