//go:build race

package keyedsem_test

// raceEnabled tells the tests that the race detector slows every atomic
// operation down by an order of magnitude, so that the longest ones run
// fewer steps.
const raceEnabled = true
