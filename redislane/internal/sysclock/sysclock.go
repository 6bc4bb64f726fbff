//go:build linux || darwin || freebsd || netbsd || openbsd

// Package sysclock reads the system-wide monotonic clock, which every
// process of a machine shares (unlike the monotonic reading inside a Go
// time.Time), so that the grant and release logs of several processes can
// be merged into one timeline.
package sysclock

import "golang.org/x/sys/unix"

// Now returns the system's monotonic clock in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("sysclock: " + err.Error())
	}
	return ts.Nano()
}
