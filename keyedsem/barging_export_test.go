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
