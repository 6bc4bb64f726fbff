package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/semaphore"
)

func TestInvalidWeightIsAnError(t *testing.T) {
	s := semaphore.New(3)
	for _, n := range []int64{0, -1, -1 << 40} {
		p, err := s.Acquire(context.Background(), n)
		require.ErrorIs(t, err, semaphore.ErrInvalidWeight, "n=%d", n)
		require.False(t, p.Weight() != 0)
		_, ok := s.TryAcquire(n)
		require.False(t, ok, "n=%d", n)
		require.ErrorIs(t, s.Do(context.Background(), n, func(context.Context) error { return nil }), semaphore.ErrInvalidWeight)
	}
	st := requireBalanced(t, s)
	require.Equal(t, uint64(6), st.Rejected)
}

func TestTooHeavyIsAnErrorNotAHang(t *testing.T) {
	s := semaphore.New(3)
	h := take(t, s, 1)
	w := enqueue(t, context.Background(), s, 3) // a queue does not change the answer
	for _, n := range []int64{4, semaphore.MaxCapacity} {
		p, err := s.Acquire(context.Background(), n)
		require.ErrorIs(t, err, semaphore.ErrTooHeavy, "n=%d", n)
		require.False(t, p.Weight() != 0)
		_, ok := s.TryAcquire(n)
		require.False(t, ok)
	}
	_, err := semaphore.New(0).Acquire(context.Background(), 1)
	require.ErrorIs(t, err, semaphore.ErrTooHeavy, "capacity 0")

	h.Release()
	r := recv(t, w)
	require.NoError(t, r.err)
	r.p.Release()
	st := requireBalanced(t, s)
	require.Equal(t, uint64(2), st.Rejected)
}

// requirePanicsWithPrefix checks that f panics with a string that starts
// with the package prefix.
func requirePanicsWithPrefix(t *testing.T, f func()) {
	t.Helper()
	var v any
	func() {
		defer func() { v = recover() }()
		f()
	}()
	msg, ok := v.(string)
	if err, isErr := v.(error); isErr { // a bad setting panics with Validate's error
		require.ErrorIs(t, err, semaphore.ErrInvalidConfig)
		msg, ok = err.Error(), true
	}
	require.True(t, ok, "want a panic with a string or an error, got %#v", v)
	require.True(t, strings.HasPrefix(msg, "semaphore: "), "panic %q lacks the package prefix", msg)
}

func TestProgrammingErrorsPanicWithPackagePrefix(t *testing.T) {
	s := semaphore.New(1)
	cases := map[string]func(){
		"New(-1)":              func() { semaphore.New(-1) },
		"New(MaxCapacity+1)":   func() { semaphore.New(semaphore.MaxCapacity + 1) },
		"SetCapacity(-1)":      func() { s.SetCapacity(-1) },
		"SetCapacity(too big)": func() { s.SetCapacity(semaphore.MaxCapacity + 1) },
		//lint:ignore SA1012 a nil context is the point of the test
		"Acquire(nil ctx)": func() { _, _ = s.Acquire(nil, 1) },
		//lint:ignore SA1012 a nil context is the point of the test
		"Do(nil ctx)": func() { _ = s.Do(nil, 1, func(context.Context) error { return nil }) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) { requirePanicsWithPrefix(t, f) })
	}
	//lint:ignore SA1012 a nil context is the point of the test
	require.PanicsWithValue(t, "semaphore: nil Context", func() { _, _ = s.Acquire(nil, 1) })
	st := requireBalanced(t, s)
	require.Equal(t, int64(1), st.Capacity, "a refused SetCapacity changes nothing")
}

func TestNewWithMaxCapacityWorks(t *testing.T) {
	s := semaphore.New(semaphore.MaxCapacity)
	p, err := s.Acquire(context.Background(), semaphore.MaxCapacity)
	require.NoError(t, err)
	require.Zero(t, s.Stats().Available)
	require.True(t, p.Release())
	require.Equal(t, int64(semaphore.MaxCapacity), s.Stats().Available)
}

// A nil Option (one chosen conditionally and left unset) is refused as a
// setting out of range is: Validate returns ErrInvalidConfig and New
// panics with that error, not with a nil dereference.
func TestNilOptionIsInvalidConfig(t *testing.T) {
	err := semaphore.Validate(1, semaphore.WithMaxWaiters(1), nil)
	if !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Validate with a nil option = %v; want ErrInvalidConfig", err)
	}
	defer func() {
		if v, _ := recover().(error); !errors.Is(v, semaphore.ErrInvalidConfig) {
			t.Fatalf("New with a nil option panicked with %v; want ErrInvalidConfig", v)
		}
	}()
	semaphore.New(1, nil)
}

// TestSetCapacityOutOfRangeIsInvalidConfig: SetCapacity refuses a capacity
// New would refuse, in the same way: a panic with an error that wraps
// ErrInvalidConfig (it was a plain string), leaving the semaphore as it was.
func TestSetCapacityOutOfRangeIsInvalidConfig(t *testing.T) {
	for _, n := range []int64{-1, semaphore.MaxCapacity + 1} {
		s := semaphore.New(3)
		func() {
			defer func() {
				if v, _ := recover().(error); !errors.Is(v, semaphore.ErrInvalidConfig) {
					t.Fatalf("SetCapacity(%d) panicked with %v; want an error wrapping ErrInvalidConfig", n, v)
				}
			}()
			s.SetCapacity(n)
		}()
		if c := s.Capacity(); c != 3 {
			t.Fatalf("after a refused SetCapacity(%d), Capacity() = %d; want 3", n, c)
		}
	}
}

// The zero Weighted is not usable (package doc): its calls say so,
// instead of failing with a misleading ErrTooHeavy, even those refused
// before they reach its capacity.
func TestZeroValuePanics(t *testing.T) {
	var s semaphore.Weighted
	bg := context.Background()
	ended, cancel := context.WithCancel(bg)
	cancel()
	for name, f := range map[string]func(){
		"Acquire":    func() { _, _ = s.Acquire(bg, 1) },
		"Acquire(0)": func() { _, _ = s.Acquire(bg, 0) },
		"Acquire(bad option)": func() {
			_, _ = s.Acquire(bg, 1, semaphore.Weight(-1))
		},
		"Acquire(ended)": func() { _, _ = s.Acquire(ended, 1) },
		"TryAcquire":     func() { _, _ = s.TryAcquire(1) },
		"TryAcquire(0)":  func() { _, _ = s.TryAcquire(0) },
		"Do":             func() { _ = s.Do(bg, 1, func(context.Context) error { return nil }) },
		"Join":           func() { _, _ = s.Join(1) },
		"SetCapacity":    func() { s.SetCapacity(2) },
		"Close":          func() { s.Close() },
		"Stats":          func() { _ = s.Stats() },
	} {
		require.PanicsWithValue(t, "semaphore: use New", f, name)
	}
}
