package clock

import (
	"context"
	"time"
)

// Sleep waits d on the real clock, unless ctx ends or stop is closed first
// (a nil stop never is). It reports whether it waited the whole d. It is
// the one back-off and think-time wait of redislane and cmd/lanesim.
func Sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-stop:
	}
	return false
}
