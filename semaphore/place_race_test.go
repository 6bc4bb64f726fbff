//go:build race

package semaphore_test

// placeRace tells the place tests that the race detector is on: allocation
// counts differ under it.
const placeRace = true
