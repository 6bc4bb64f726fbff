package model

// Turn is the place in line an acquire asks the models for: the model's
// own copy of what the real packages take per call, so that the models
// depend on no public package. A field the model's order does not use is
// refused with InvalidTurn.
type Turn struct {
	// Priority, with Priorities or KeyedPriorities: higher first, rising
	// by one for every aging step waited; 0 for a plain acquire. It must
	// lie within the order's configured bound.
	Priority int
	// Sequence, with KeyedSequence: ascending.
	Sequence int64
	// Group, with FairShare: the group charged for the request.
	Group string
}

// Counters are the counters of the real primitives' Stats, kept by the
// models with the meanings the real packages give them: the harness
// converts the real ones to this type, so a field added on one side only
// stops its build.
type Counters struct {
	Acquired       uint64 // grants that reached the caller
	Released       uint64 // first releases
	Waited         uint64 // grants that had to wait
	Cancelled      uint64 // acquires ended by their context
	TimedOut       uint64 // acquires ended by the maximum wait
	Rejected       uint64 // acquires refused without waiting
	Failed         uint64 // waiters failed by Close or a shrink
	DoubleReleases uint64 // releases of permits already released
}
