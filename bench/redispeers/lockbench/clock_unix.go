//go:build linux || darwin || freebsd || netbsd || openbsd

package lockbench

import "golang.org/x/sys/unix"

// Now returns the system-wide monotonic clock in nanoseconds: unlike the
// monotonic reading inside a time.Time, every process of the machine shares
// it, so the logs of several processes merge into one timeline.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("lockbench: " + err.Error())
	}
	return ts.Nano()
}
