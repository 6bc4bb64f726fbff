package keyedsem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

func TestBadInputFailsAtOnce(t *testing.T) {
	s := keyedsem.New[string](keyedsem.WithPerKeyCapacity(2), keyedsem.WithMaxKeys(1), keyedsem.WithHardMaxKeys())
	for _, c := range []struct {
		name string
		n    int64
		want error
	}{
		{"zero", 0, semaphore.ErrInvalidWeight},
		{"negative", -1, semaphore.ErrInvalidWeight},
		{"above per-key capacity", 3, semaphore.ErrTooHeavy},
	} {
		_, err := s.Acquire(bg, "k", semaphore.Weight(c.n))
		assert.ErrorIs(t, err, c.want, c.name)
		_, ok := s.TryAcquire("k", semaphore.Weight(c.n))
		assert.False(t, ok, c.name)
	}
	p, err := s.Acquire(bg, "held")
	require.NoError(t, err)
	_, err = s.Acquire(bg, "other")
	assert.ErrorIs(t, err, keyedsem.ErrTooManyKeys, "hard cap")
	_, ok := s.TryAcquire("other")
	assert.False(t, ok, "hard cap")

	s.Close()
	_, err = s.Acquire(bg, "held")
	assert.ErrorIs(t, err, semaphore.ErrClosed)
	_, ok = s.TryAcquire("held")
	assert.False(t, ok, "closed")
	assert.True(t, p.Release(), "a release after Close")
	assert.Equal(t, uint64(5), s.Stats().Rejected)
	assert.Same(t, semaphore.ErrClosed, semaphore.ErrClosed, "one sentinel, shared by every package")
}

func TestMisuseAndBadOptionsPanic(t *testing.T) {
	panicsWithPrefix := func(name string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if err, ok := r.(error); ok { // a bad option panics with Validate's error
				assert.ErrorIs(t, err, semaphore.ErrInvalidConfig, name)
				r = err.Error()
			}
			if s, ok := r.(string); !ok || !strings.HasPrefix(s, "keyedsem: ") {
				t.Errorf("%s: panic %v, want a keyedsem: message", name, r)
			}
		}()
		f()
	}
	s := keyedsem.New[string]()
	defer s.Close()
	//lint:ignore SA1012 the nil context is the point
	panicsWithPrefix("nil ctx", func() { s.Acquire(nil, "k") })
	panicsWithPrefix("capacity 0", func() { keyedsem.New[int](keyedsem.WithPerKeyCapacity(0)) })
	panicsWithPrefix("capacity too big", func() { keyedsem.New[int](keyedsem.WithPerKeyCapacity(1 << 28 /* above the largest, 2^28-1 */)) })
	panicsWithPrefix("negative idle", func() { keyedsem.New[int](keyedsem.WithIdleTimeout(-1)) })
	panicsWithPrefix("max keys 0", func() { keyedsem.New[int](keyedsem.WithMaxKeys(0)) })
}

// A nil Option (one chosen conditionally and left unset) is refused as a
// setting out of range is: Validate returns ErrInvalidConfig and New
// panics with that error, not with a nil dereference.
func TestNilOptionIsInvalidConfig(t *testing.T) {
	err := keyedsem.Validate(keyedsem.WithMaxKeys(2), nil)
	if !errors.Is(err, semaphore.ErrInvalidConfig) {
		t.Fatalf("Validate with a nil option = %v; want ErrInvalidConfig", err)
	}
	defer func() {
		if v, _ := recover().(error); !errors.Is(v, semaphore.ErrInvalidConfig) {
			t.Fatalf("New with a nil option panicked with %v; want ErrInvalidConfig", v)
		}
	}()
	keyedsem.New[string](nil)
}
