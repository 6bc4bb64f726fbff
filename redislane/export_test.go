package redislane

import "time"

// SetConfirmWait sets how long the first waiter of a channel waits for
// Redis to confirm the subscription, and returns the function that puts the
// old value back. Tests that call it must not run in parallel.
func SetConfirmWait(d time.Duration) (restore func()) {
	old := confirmWait
	confirmWait = d
	return func() { confirmWait = old }
}
