//go:build !race

package lanequeue_test

const raceEnabled = false
