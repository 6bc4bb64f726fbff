package lanequeue

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
)

// Hooks are callbacks, set by [Queue.SetHooks], that run on the call's
// goroutine after the event, outside the queue's locks: they must be quick.
// A nil func is not called; durations are to about a millisecond.
type Hooks[K comparable] struct {
	// SlowWait: OnSlowWait gets each wait for one lane that lasted longer
	// (0: every wait), when it ends; a lane that granted at once is no wait.
	// A wait for a lane's cooldown ([Queue.Cooldown]) is a wait for it.
	SlowWait   time.Duration
	OnSlowWait func(Event[K])
	// LongHold: OnLongHold gets each ticket held longer, at its release.
	LongHold   time.Duration
	OnLongHold func(Event[K])
	OnReject   func(Event[K]) // what counts in a lane's Rejected or Failed
}

// Event is one event reported to [Hooks]; the hook that gets it says
// which kind of event it is.
type Event[K comparable] struct {
	Lane     string        // the lane (a refusal that no lane counts, a closed queue's, is not reported)
	Kind     Kind          // the lane's kind
	Key      K             // the key of the call
	Weight   int64         // the permits asked of (or held on) the lane
	Since    time.Time     // when the wait or hold began
	Duration time.Duration // how long it lasted (0 for a refusal)
	Err      error         // how the wait ended (nil: granted), or the refusal
	// Group is the fair-share group the call waited in, for a wait or a
	// refusal on a global lane: the call's [semaphore.Group], else, on a
	// lane made by [NewFairLane], its key's tenant; "" (the default
	// group) for a call that named none, and on keyed and rate lanes and
	// for a long hold. A lane made without WithFairShare names the
	// call's group here too, though it does not order by it.
	Group string
	// Cooldown marks a wait for the lane's cooldown ([Queue.Cooldown]),
	// not for its permits: a call that waited for both is reported twice,
	// once each, and only the wait for the permits counts in the lane's
	// Waited.
	Cooldown bool
}

// SetHooks replaces the queue's hooks (the zero Hooks removes them); a call
// in flight keeps those it found. Without hooks, a wait or release pays one
// pointer test.
func (q *Queue[K]) SetHooks(h Hooks[K]) {
	if h.OnSlowWait == nil && h.OnLongHold == nil && h.OnReject == nil {
		q.watch.hooks.Store(nil)
		return
	}
	q.watch.hooks.Store(&h)
}

// LogHooks returns hooks that log to l (nil: slog.Default()) the waits and
// holds longer than the bounds, at Warn, and the refusals, at Info.
func LogHooks[K comparable](l *slog.Logger, slowWait, longHold time.Duration) Hooks[K] {
	if l == nil {
		l = slog.Default()
	}
	log := func(lvl slog.Level, msg, dur string) func(Event[K]) {
		return func(e Event[K]) {
			attrs := []slog.Attr{
				slog.String("lane", e.Lane), slog.String("kind", e.Kind.String()),
				slog.Any("key", e.Key), slog.Int64("weight", e.Weight),
			}
			if dur != "" {
				attrs = append(attrs, slog.Time("since", e.Since), slog.Duration(dur, e.Duration))
			}
			if e.Err != nil {
				attrs = append(attrs, slog.String("err", e.Err.Error()))
			}
			l.LogAttrs(context.Background(), lvl, msg, attrs...)
		}
	}
	return Hooks[K]{
		SlowWait: slowWait, OnSlowWait: log(slog.LevelWarn, "lanequeue: slow wait", "waited"),
		LongHold: longHold, OnLongHold: log(slog.LevelWarn, "lanequeue: long hold", "held"),
		OnReject: log(slog.LevelInfo, "lanequeue: rejected", ""),
	}
}

// waited reports the end of the wait of g for its lane i (the rate lanes,
// for i at g.plain), which began at since (the reading of waitFor), or
// that did not wait (since noWait: a refusal at once, rate tokens there at
// once): a slow wait, and a refusal. Each wait is timed from its own
// start, and a lane that did not wait is no slow wait. group is the
// call's group on the lane (laneEntry.groupOf; "" for the rate lanes).
func (q *Queue[K]) waited(h *Hooks[K], key K, g *grant[K], i int, err error, since int64, group string) {
	q.reportWait(h, Event[K]{Key: key, Err: err, Group: group}, g, i, since)
}

// waitedCool is waited for a wait for lane i's cooldown (Event.Cooldown).
func (q *Queue[K]) waitedCool(h *Hooks[K], key K, g *grant[K], i int, err error, since int64, group string) {
	q.reportWait(h, Event[K]{Key: key, Err: err, Group: group, Cooldown: true}, g, i, since)
}

// reportWait is waited's and waitedCool's: e, on lane i of g.
func (q *Queue[K]) reportWait(h *Hooks[K], e Event[K], g *grant[K], i int, since int64) {
	hs := g.held()
	err := e.Err
	if i < len(hs) && i < g.plain {
		e.Lane, e.Kind, e.Weight = hs[i].e.name, hs[i].e.kind, hs[i].n
	} else if i < len(hs) { // the rate tail
		e.Lane, e.Kind, e.Weight = hs[i].e.name, Rate, hs[i].n
	}
	refusal := refused(err)
	if h.OnSlowWait != nil && since != noWait && !refusal {
		now := q.stamp()
		e.Since, e.Duration = q.timeOf(since), time.Duration(now-since)
		if e.Duration > h.SlowWait || h.SlowWait == 0 {
			h.OnSlowWait(e)
		}
	}
	if h.OnReject != nil && refusal {
		e.Since, e.Duration = time.Time{}, 0
		h.OnReject(e)
	}
}

// refused reports whether err is a lane's refusal (see Hooks.OnReject).
func refused(err error) bool {
	return errors.Is(err, semaphore.ErrQueueFull) || errors.Is(err, keyedsem.ErrTooManyKeys) || errors.Is(err, semaphore.ErrClosed) || errors.Is(err, semaphore.ErrTooHeavy)
}

// heldLanes is what a release needs of a record to report a long hold,
// copied under the record's lock.
type heldLanes[K comparable] struct {
	h     *Hooks[K]
	key   K
	since int64
	d     time.Duration
	lanes []held[K]
}

// longHold returns a copy of what the report of r's hold needs if the
// hooks want long holds and r's is one, else nil. The caller holds
// r.home.mu and is releasing r. The copy is allocated: a long hold is
// rare, and a release that reports none copies nothing.
func (q *Queue[K]) longHold(h *Hooks[K], r *record[K]) *heldLanes[K] {
	if h.OnLongHold == nil {
		return nil
	}
	d := time.Duration(q.stamp() - r.since)
	if d <= h.LongHold {
		return nil
	}
	return &heldLanes[K]{h: h, key: r.key, since: r.since, d: d, lanes: slices.Clone(r.g.held())}
}

// report calls OnLongHold for each keyed and global lane of hl. It is
// called after unlocking.
func (q *Queue[K]) report(hl *heldLanes[K]) {
	for i := range hl.lanes {
		l := &hl.lanes[i]
		if l.e.kind == Rate {
			continue
		}
		hl.h.OnLongHold(Event[K]{Lane: l.e.name, Kind: l.e.kind, Key: hl.key, Weight: l.n, Since: q.timeOf(hl.since), Duration: hl.d})
	}
}
