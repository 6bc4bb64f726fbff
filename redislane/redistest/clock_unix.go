//go:build darwin || freebsd || netbsd || openbsd

package redistest

import "golang.org/x/sys/unix"

// Now returns the system-wide monotonic clock in nanoseconds: unlike the
// monotonic reading inside a time.Time, every process of the machine shares
// it, so that the grant and release logs of several processes merge into
// one timeline.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("redistest: " + err.Error())
	}
	return ts.Nano()
}
