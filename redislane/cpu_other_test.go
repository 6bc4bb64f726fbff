//go:build !unix

package redislane_test

// processCPU returns 0: this platform's process CPU time is not read.
func processCPU() int64 { return 0 }
