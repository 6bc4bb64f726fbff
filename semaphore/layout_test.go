package semaphore

import (
	"testing"
	"unsafe"
)

// The state word and each inline token's generation have a cache line of
// their own (see the layout comment on the state word's constants).
func TestHotLineLayout(t *testing.T) {
	var s Weighted
	if off := unsafe.Offsetof(s.gens); off != cacheLine {
		t.Fatalf("gens start at byte %d, want %d: the state word must have its line alone", off, cacheLine)
	}
	if sz := unsafe.Sizeof(s.gens[0]); sz != cacheLine {
		t.Fatalf("a padded generation is %d bytes, want %d", sz, cacheLine)
	}
	if off := unsafe.Offsetof(s.capacity); off < cacheLine*(1+inlineTokens) {
		t.Fatalf("capacity at byte %d shares a generation's line", off)
	}
}
