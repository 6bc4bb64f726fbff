package semaphore

// BargingOld returns the number of waiters of s, made WithBarging, that
// have counted themselves old (waited the bound), for tests that wait
// until a timer's firing has been seen.
func BargingOld(s *Weighted) int { return int(s.barge.flags.Load() >> oldShift) }

// BargingWoken reports whether a waiter of s, made WithBarging, is woken
// to compete and not done looking.
func BargingWoken(s *Weighted) bool { return s.barge.flags.Load()&bWoken != 0 }
