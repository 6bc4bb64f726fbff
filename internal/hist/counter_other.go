//go:build !amd64

package hist

// ticks reads no counter here: arrivals are Precise readings.
func ticks() int64 { return 0 }

const haveTicks = false

const clocksourceFile = ""
