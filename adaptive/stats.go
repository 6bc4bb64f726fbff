package adaptive

import "time"

// Reason is why a [Controller] last moved its limit.
type Reason uint8

const (
	// ReasonNone: the limit has not moved since New.
	ReasonNone Reason = iota
	// ReasonGrowth: a round trip with no overload, during which the target
	// was at least half used (and, with WithVegas, the latency showed room),
	// raised the limit.
	ReasonGrowth
	// ReasonOverload: an Overload of work admitted since the last decrease
	// lowered it, at once.
	ReasonOverload
	// ReasonLatency: with WithVegas, a round trip whose latency showed
	// more than beta of the limit queued lowered it.
	ReasonLatency
)

// String returns "none", "growth", "overload" or "latency".
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonGrowth:
		return "growth"
	case ReasonOverload:
		return "overload"
	case ReasonLatency:
		return "latency"
	}
	return "unknown"
}

// Stats is a snapshot of a [Controller].
type Stats struct {
	Limit          int64  // the capacity set on the target now
	Floor, Ceiling int64  // the bounds given to New
	Algorithm      string // "aimd" or "vegas"

	LastReason Reason    // why the limit last moved (ReasonNone: never)
	LastChange time.Time // when, on the controller's clock (zero: never)

	// The moves of the limit by cause; a round trip that leaves the
	// integer limit where it was (at the floor or ceiling, or a fraction
	// away) counts in none.
	Increases         uint64 // ReasonGrowth
	OverloadDecreases uint64 // ReasonOverload
	LatencyDecreases  uint64 // ReasonLatency

	Windows   uint64 // round trips decided (one ends early at its first fresh overload)
	Samples   uint64 // outcomes counted in them (Success and Overload)
	Overloads uint64 // of which Overload (refusals of work admitted at an older, higher limit are not counted)
	// Ignored counts the Ignore outcomes reported, up to now (the round
	// trip under way included). With the default classifier every error
	// that does not wrap ErrOverload is one: if the limit only rises while
	// calls fail, and Ignored grows with Overloads at 0, the refusals are
	// not classified as overloads (see Classify).
	Ignored uint64

	Latency  time.Duration // mean latency of the last round trip's successes
	Baseline time.Duration // WithVegas: the latency taken as the provider's own, without queueing; 0 for AIMD
}

// Stats returns a snapshot of the controller. The counts are those of the
// round trips decided, except Ignored; reports of the round trip under way
// are not in them.
//
// Like Limit, it takes a decision that is due before it reads, and one
// that a report left to it while it held the controller's lock after (so
// it may call the target, and panic with it: see Target).
func (c *Controller) Stats() Stats {
	var st Stats
	c.read(func() {
		st = c.st
		st.Limit = c.capNow
		st.Latency = time.Duration(c.lastRTT)
		st.Baseline = time.Duration(c.baseline)
		st.Ignored = c.ignored.Load()
	})
	return st
}
