//go:build linux

package redistest

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Now agrees with CLOCK_MONOTONIC read by a system call, to within the
// error of its calibration. Deliberate bug it caught: an offset computed
// from the wall clock (time.Now().UnixNano()), seconds away.
func TestNowIsTheSystemMonotonicClock(t *testing.T) {
	for range 100 {
		var a, b unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &a); err != nil {
			t.Fatal(err)
		}
		n := Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
			t.Fatal(err)
		}
		if n < a.Nano()-offsetErr || n > b.Nano()+offsetErr {
			t.Fatalf("Now() = %d, outside [%d, %d] (CLOCK_MONOTONIC before and after) by more than the calibration error %d ns",
				n, a.Nano(), b.Nano(), offsetErr)
		}
	}
}
