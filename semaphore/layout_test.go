package semaphore

import (
	"context"
	"testing"
	"unsafe"
)

// The state word has a cache line of its own (see the layout comment on
// the state word's constants); the generations follow it, packed.
func TestHotLineLayout(t *testing.T) {
	var s Weighted
	if off := unsafe.Offsetof(s.gens); off != cacheLine {
		t.Fatalf("gens start at byte %d, want %d: the state word must have its line alone", off, cacheLine)
	}
	if sz := unsafe.Sizeof(s.gens); sz != 8*inlineTokens {
		t.Fatalf("the generations take %d bytes, want %d (packed)", sz, 8*inlineTokens)
	}
}

// Up to fifteen permits out at once each hold an inline token, which
// Release gives back to the state word without taking mu; only a grant
// beyond them takes a spare token.
func TestFifteenGrantsHoldInlineTokens(t *testing.T) {
	if inlineTokens != 15 {
		t.Fatalf("%d inline tokens, want 15 (as the package doc says)", inlineTokens)
	}
	s := New(inlineTokens + 1)
	spares := func() int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.spareOut
	}
	var out []Permit
	for i := range inlineTokens + 1 {
		p, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		want := int64(0)
		if i >= inlineTokens {
			want = 1
		}
		if got := spares(); got != want {
			t.Fatalf("with %d permits out, %d spare tokens out; want %d", i+1, got, want)
		}
	}
	for _, p := range out {
		if !p.Release() {
			t.Fatal("a first Release returned false")
		}
	}
	if st := s.Stats(); spares() != 0 || st.Available != inlineTokens+1 || st.Released != inlineTokens+1 {
		t.Fatalf("after releasing all: %d spares out, available %d, released %d", spares(), st.Available, st.Released)
	}
}

// MaxCapacity is written as a number, for go doc; it must be the largest
// count the state word holds above its flags and tokens.
func TestMaxCapacityIsTheStateWordsBound(t *testing.T) {
	if want := int64(1)<<(63-availShift) - 1; MaxCapacity != want {
		t.Fatalf("MaxCapacity is %d; the state word holds up to %d", int64(MaxCapacity), want)
	}
	s := New(MaxCapacity)
	if st := s.Stats(); st.Available != MaxCapacity {
		t.Fatalf("a semaphore of MaxCapacity has %d available", st.Available)
	}
}
