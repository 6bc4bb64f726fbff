package model

// Tokens is a sequential model of lanequeue's token lane (NewTokenLane):
// a budget of Max tokens in any window of Window seconds, counted per
// second. A grant is charged its estimate in the second it is made;
// Settle charges the difference from the actual count: a debt in the
// current second, a refund from the grant's own second while that second
// is in the window, never more than the second holds. Seconds are the
// model's own, moved by Advance.
type Tokens struct {
	Max, Window int64
	now         int64
	count       map[int64]int64 // tokens charged in each second
	filled      int64           // the second of the last Fill
	hasFill     bool            // whether there was one
}

// NewTokens returns the model of a lane of max tokens in any window of
// window seconds, at second 0.
func NewTokens(max, window int64) *Tokens {
	return &Tokens{Max: max, Window: window, count: make(map[int64]int64)}
}

// Advance moves the model's time on by d whole seconds.
func (m *Tokens) Advance(d int64) { m.now += d }

// Now returns the model's second.
func (m *Tokens) Now() int64 { return m.now }

// Used returns the tokens charged in the window that ends with the
// current second.
func (m *Tokens) Used() int64 {
	var u int64
	for s, n := range m.count {
		if s > m.now-m.Window && s <= m.now {
			u += n
		}
	}
	return u
}

// Take charges n tokens now if the window has room for them, and reports
// whether it did.
func (m *Tokens) Take(n int64) bool {
	if m.Max-m.Used() < n {
		return false
	}
	m.count[m.now] += n
	return true
}

// Settle charges delta more tokens for a grant made in second sec (see
// Tokens).
func (m *Tokens) Settle(sec, delta int64) {
	switch {
	case delta > 0:
		m.count[m.now] += delta
	case delta < 0 && sec > m.now-m.Window && (!m.hasFill || sec > m.filled):
		m.count[sec] -= min(-delta, m.count[sec])
	}
}

// Fill charges the window up to Max in the current second (a cooldown:
// the provider's window is full); a refund of a grant made in that second
// or before is then dropped.
func (m *Tokens) Fill() {
	if u := m.Used(); u < m.Max {
		m.count[m.now] += m.Max - u
	}
	m.filled, m.hasFill = m.now, true
}
