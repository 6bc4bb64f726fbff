package keyedsem

// MaxRefs is the most references one key's entry counts.
const MaxRefs = maxRefs

// AddRefs adds d references (d < 0 takes them off) to key's entry, which
// must be in use: a test's stand-in for d holders or waiters, which would
// take billions of goroutines.
func AddRefs[K comparable](s *Keyed[K], key K, d int64) {
	e, ok := s.m.Load(key)
	if !ok || e.state.Load()&(busyBit|deadBit) != busyBit {
		panic("AddRefs: key has no entry in use")
	}
	e.state.Add(uint64(d) << refShift)
}
