package lanehttp

// KeyBytes is the size of k that Config.MaxKeyBytes bounds.
func KeyBytes[K comparable](k K) int { return keyMeasure[K]()(k) }
