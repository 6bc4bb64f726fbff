//go:build !race

package semaphore_test

// placeRace: see place_race_test.go.
const placeRace = false
