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

// WithoutSunsubscribe makes the hubs ignore the sunsubscribe of a node that
// lost a shard channel's slot, as if it were lost, and shortens the silence
// after which a hub's connection checks its subscription to d, and returns
// the function that puts both back: the backstop alone follows the slot.
// Tests that call it must not run in parallel.
func WithoutSunsubscribe(d time.Duration) (restore func()) {
	oldFollow, oldWait := followSunsubscribe, receiveTimeout
	followSunsubscribe, receiveTimeout = false, d
	return func() { followSunsubscribe, receiveTimeout = oldFollow, oldWait }
}
