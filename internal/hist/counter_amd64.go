package hist

// ticks reads the CPU's time-stamp counter, unfenced (see arrival.go).
//
//go:noescape
func ticks() int64

// haveTicks says that ticks reads a counter.
const haveTicks = true

// clocksourceFile names the clock the kernel keeps its own time on: "tsc"
// when it has found the counter invariant and in step across CPUs.
const clocksourceFile = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
