package lockbench

import "github.com/sessionlane/lanes/redislane/redistest"

// Now returns the system-wide monotonic clock in nanoseconds
// (redistest.Now): every process of the machine shares it, so the logs of
// several processes merge into one timeline.
func Now() int64 { return redistest.Now() }
