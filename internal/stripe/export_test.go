package stripe

// Spread is spread, for its test.
func Spread(sp uintptr, bits uint) uint { return spread(sp, bits) }
