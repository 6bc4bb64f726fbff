package lanehttp

// KeyBytes is the size of k that Config.MaxKeyBytes bounds.
func KeyBytes[K comparable](k K) int { return keyMeasure[K]()(k) }

// SetAlwaysStamp makes the Transports made after it read their clock for
// every Attempt's Now (the ablation of leaving it zero).
func SetAlwaysStamp(on bool) { alwaysStamp = on }
