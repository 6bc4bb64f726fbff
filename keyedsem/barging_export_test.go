package keyedsem

// BargingStrict reports whether key's entry of s, made WithBarging, is in
// strict hand-off (a waiter has waited the bound); false without an entry.
func BargingStrict[K comparable](s *Keyed[K], key K) bool {
	e, ok := s.m.Load(key)
	if !ok {
		return false
	}
	st := e.state.Load()
	return st&(busyBit|deadBit) == busyBit && st&kStrict != 0
}

// BargingWoken reports whether key's entry of s, made WithBarging, has a
// waiter woken to compete and not done looking; false without an entry.
func BargingWoken[K comparable](s *Keyed[K], key K) bool {
	e, ok := s.m.Load(key)
	if !ok {
		return false
	}
	return e.state.Load()&kWoken != 0
}
