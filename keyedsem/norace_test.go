//go:build !race

package keyedsem_test

// raceEnabled: see race_test.go.
const raceEnabled = false
