package modelcheck

import (
	"github.com/sessionlane/lanes/internal/model"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// The models depend on no public package: they have their own Turn,
// Counters and Stats types, and the harness converts the real values to
// them here. Each conversion goes through a struct of both sides' exact
// fields, so a field added on one side only stops the build.

// optsOf is the model's turn t as the real packages take it: their
// per-call options (a zero field is no option).
func optsOf(t model.Turn) []semaphore.AcquireOption {
	return []semaphore.AcquireOption{semaphore.Priority(t.Priority), semaphore.Sequence(t.Sequence), semaphore.Group(t.Group)}
}

// SemStats is st as model.Semaphore keeps it: every field but Timings,
// which the model does not keep (the runs record none; callers check
// that it is zero).
func SemStats(st semaphore.Stats) model.SemStats {
	r := struct {
		Capacity      int64
		Available     int64
		Held          int64
		Waiters       int
		WaitingWeight int64
		Closed        bool
		semaphore.Counters
		semaphore.Timings
	}(st)
	return model.SemStats(struct {
		Capacity      int64
		Available     int64
		Held          int64
		Waiters       int
		WaitingWeight int64
		Closed        bool
		model.Counters
	}{
		Capacity:      r.Capacity,
		Available:     r.Available,
		Held:          r.Held,
		Waiters:       r.Waiters,
		WaitingWeight: r.WaitingWeight,
		Closed:        r.Closed,
		Counters:      model.Counters(r.Counters),
	})
}

// KeyedStats is st as model.Keyed keeps it: every field but Timings, as
// for SemStats, and HoldsRunOut (the model has no WithReorderHold).
func KeyedStats(st keyedsem.Stats) model.KeyedStats {
	r := struct {
		Keys     int
		Capacity int64
		Held     int64
		Waiters  int
		Closed   bool
		semaphore.Counters
		semaphore.Timings
		Created     uint64
		Evicted     uint64
		HoldsRunOut uint64
	}(st)
	return model.KeyedStats(struct {
		Keys     int
		Capacity int64
		Held     int64
		Waiters  int
		Closed   bool
		model.Counters
		Created uint64
		Evicted uint64
	}{
		Keys:     r.Keys,
		Capacity: r.Capacity,
		Held:     r.Held,
		Waiters:  r.Waiters,
		Closed:   r.Closed,
		Counters: model.Counters(r.Counters),
		Created:  r.Created,
		Evicted:  r.Evicted,
	})
}
