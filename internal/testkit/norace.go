//go:build !race

package testkit

// Race reports whether the race detector is on (see race.go).
const Race = false
