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

// Up to fourteen permits out at once each hold an inline token, which
// Release gives back to the state word without taking mu; only a grant
// beyond them takes a spare token.
func TestFourteenGrantsHoldInlineTokens(t *testing.T) {
	if inlineTokens != 14 {
		t.Fatalf("%d inline tokens, want 14 (as the package doc says)", inlineTokens)
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

// The timed flag is set by New exactly for a semaphore made
// WithHistograms, and no release, grant, wait or Close clears or sets it:
// the fast path's test of the flags relies on it to keep untimed grants
// from paying for the stamp.
func TestTimedFlagIsSetOnceByNew(t *testing.T) {
	for _, timed := range []bool{false, true} {
		var opts []Option
		if timed {
			opts = append(opts, WithHistograms())
		}
		s := New(3, opts...)
		check := func(when string) {
			t.Helper()
			if got := s.state.Load()&flagTimed != 0; got != timed {
				t.Fatalf("timed=%v: the timed flag is %v %s", timed, got, when)
			}
		}
		check("after New")
		p, err := s.Acquire(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		check("after a grant")
		w, err := s.Join(1) // a place in line: a waiter, with no goroutine
		if err != nil {
			t.Fatal(err)
		}
		check("with a waiter")
		w.Leave()
		p.Release()
		check("after the release")
		if q, ok := s.TryAcquire(1); !ok {
			t.Fatal("TryAcquire refused on an idle semaphore")
		} else {
			q.Release()
		}
		s.SetCapacity(5)
		check("after SetCapacity")
		s.Close()
		check("after Close")
	}
}
