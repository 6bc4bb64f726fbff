package redislane

// Delivered returns how many pub/sub messages the hub of s's client has
// handed to a waiter of this process.
func Delivered(s *Weighted) int64 { return s.c.hub.delivered.Load() }
