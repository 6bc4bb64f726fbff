//go:build race

package testkit

// Race reports whether the race detector is on (allocation counts and
// timings differ under it).
const Race = true
