//go:build !race

package main

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
