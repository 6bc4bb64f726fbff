// Package stripe picks, for the calling goroutine, one of the stripes of a
// striped structure (counters or locked lists split over cache lines), so
// that goroutines running at once on different cores rarely write to one
// cache line. Any stripe is correct: the pick is only a hint.
package stripe

import "unsafe"

// Hint returns a stripe in [0, 1<<bits) for the calling goroutine, for
// bits from 1 to 63: a hash of an address in its stack. It differs
// between goroutines and stays put while one goroutine runs, until its
// stack moves. It costs a multiply: a round-robin atomic counter (a shared
// line written on every call) and math/rand/v2 measured 1.5-2.2x its time
// in BenchmarkAblationHint and lanequeue's parallel DrainCount +145% and
// +80% (docs/internals.md).
func Hint(bits uint) uint {
	var b byte
	return spread(uintptr(unsafe.Pointer(&b)), bits)
}

// spread maps the stack address sp to [0, 1<<bits). Goroutine stacks are
// at least 2 KiB apart, so sp>>11 tells them apart, and Fibonacci hashing
// (the top bits of the product with 2^64 over the golden ratio) spreads
// neighbouring stacks over the range.
func spread(sp uintptr, bits uint) uint {
	return uint((uint64(sp>>11) * 0x9E3779B97F4A7C15) >> (64 - bits))
}
