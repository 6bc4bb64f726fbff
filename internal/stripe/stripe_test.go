package stripe_test

import (
	"sync"
	"testing"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/sessionlane/lanes/internal/stripe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every hint is a stripe: below 1<<bits, from any goroutine.
func TestHintIsAStripe(t *testing.T) {
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bits := uint(1); bits <= 8; bits++ {
				if h := stripe.Hint(bits); h >= 1<<bits {
					t.Errorf("Hint(%d) = %d, not below %d", bits, h, 1<<bits)
				}
			}
		}()
	}
	wg.Wait()
}

// Neighbouring stacks spread: any 1<<bits stacks next to one another
// (2 KiB apart, the smallest stack) use at least half of the 1<<bits
// stripes, wherever in memory they are. (By the three-distance theorem
// Fibonacci hashing does better: at least 5 of 8, 27 of 32.)
func TestNeighbouringStacksSpread(t *testing.T) {
	var local byte
	bases := []uintptr{0, 1 << 11, 0x0c000000, 0xc0123800, uintptr(unsafe.Pointer(&local)) &^ (1<<11 - 1)}
	for bits := uint(1); bits <= 8; bits++ {
		n := 1 << bits
		for _, base := range bases {
			for off := range 64 {
				used := make(map[uint]bool)
				for k := range n {
					sp := base + uintptr(off+k)<<11
					h := stripe.Spread(sp, bits)
					if h >= uint(n) {
						t.Fatalf("Spread(%#x, %d) = %d, not below %d", sp, bits, h, n)
					}
					used[h] = true
				}
				if 2*len(used) < n {
					t.Fatalf("%d stacks from %#x use %d of %d stripes", n, base+uintptr(off)<<11, len(used), n)
				}
			}
		}
	}
}

// An address within one stack keeps its stripe: the frames of one
// goroutine's calls, less than 2 KiB apart on one aligned block, share it.
func TestOneStackOneStripe(t *testing.T) {
	const base = uintptr(0xc0124000)
	for bits := uint(1); bits <= 8; bits++ {
		want := stripe.Spread(base, bits)
		for d := uintptr(0); d < 1<<11; d += 8 {
			if got := stripe.Spread(base+d, bits); got != want {
				t.Fatalf("Spread(%#x, %d) = %d, Spread(%#x, %d) = %d: one 2 KiB block, two stripes", base+d, bits, got, base, bits, want)
			}
		}
	}
}
