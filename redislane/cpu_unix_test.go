//go:build unix

package redislane_test

import "syscall"

// processCPU returns the CPU time the test process has used (user and
// system), in nanoseconds, or 0 if it cannot tell.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
