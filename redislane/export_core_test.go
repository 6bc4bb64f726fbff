package redislane

// Delivered returns how many pub/sub messages the hub of s's client has
// handed to a waiter of this process.
func Delivered(s *Weighted) int64 { return s.c.hub.delivered.Load() }

// HubGoroutines returns how many goroutines the pub/sub hub of s's client
// runs now (receive loops and subscriptions in flight); it reads the hub s
// joined, also after Close.
func HubGoroutines(s *Weighted) int64 { return s.c.hub.goroutines.Load() }
