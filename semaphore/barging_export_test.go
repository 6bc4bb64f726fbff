package semaphore

// BargingStrict reports whether s, made WithBarging, is in strict
// hand-off (a waiter has waited the bound and set strict), for tests that
// wait until a timer's firing has been seen.
func BargingStrict(s *Weighted) bool { return s.barge.flags.Load()&bStrict != 0 }

// BargingWoken reports whether a waiter of s, made WithBarging, is woken
// to compete and not done looking.
func BargingWoken(s *Weighted) bool { return s.barge.flags.Load()&bWoken != 0 }
