//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package redistest

import "time"

// Now returns the wall clock in nanoseconds: on this system the merged
// timeline is only as good as the wall clock.
func Now() int64 { return time.Now().UnixNano() }
