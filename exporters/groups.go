package exporters

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// DefaultTopGroups is how many groups of a lane a [GroupWaits] reports
// under their own names unless [TopGroups] says otherwise.
const DefaultTopGroups = 10

// DefaultGroupIdle is how long a group keeps its own series without a
// wait unless [GroupIdle] says otherwise.
const DefaultGroupIdle = 10 * time.Minute

// OtherGroup is the group under which a [GroupWaits] reports the waits of
// a lane's groups that have no series of their own.
const OtherGroup = "other"

// GroupOption changes what [NewGroupWaits] builds.
type GroupOption func(*groupConfig)

type groupConfig struct {
	top  int
	idle time.Duration
}

// TopGroups sets how many groups of each lane have a series of their own,
// n from 1 (DefaultTopGroups without it). A lane's series are at most n+1:
// those groups and [OtherGroup].
func TopGroups(n int) GroupOption { return func(c *groupConfig) { c.top = n } }

// GroupIdle sets how long a group keeps its own series without a wait, d
// positive (DefaultGroupIdle without it).
func GroupIdle(d time.Duration) GroupOption { return func(c *groupConfig) { c.idle = d } }

// GroupWaits records how long the calls of a [lanequeue.Queue] waited for
// its fair lanes, by fair-share group, in a bounded number of series per
// lane, for the exporters to report (promlanes.WithGroupWaits,
// otellanes.WithGroupWaits). The waits reach it through the queue's hooks
// ([GroupHooks]); the package doc's "Waits by group" says which groups
// get a series of their own. Make it with [NewGroupWaits]; its methods
// are safe for concurrent use.
type GroupWaits struct {
	top  int
	idle time.Duration
	now  func() time.Time // the clock of the idle check (a test's: export_test.go)

	mu    sync.Mutex             // guards lanes and everything in it
	lanes map[string]*laneGroups // by lane name
}

// laneGroups is one lane's waits: the groups with a series of their own,
// at most top of them, and the others summed.
type laneGroups struct {
	grouped bool // a wait named a group other than "": the lane is reported
	own     map[string]*groupSlot
	other   semaphore.Histogram
}

// groupSlot is the series of one group.
type groupSlot struct {
	waits semaphore.Histogram
	last  time.Time // when its latest wait ended
}

// NewGroupWaits returns an empty recorder. A bad setting (TopGroups below
// 1, GroupIdle not positive) panics with an error that wraps
// [semaphore.ErrInvalidConfig], as semaphore.New does.
func NewGroupWaits(opts ...GroupOption) *GroupWaits {
	c := groupConfig{top: DefaultTopGroups, idle: DefaultGroupIdle}
	for _, o := range opts {
		o(&c)
	}
	if c.top < 1 {
		panic(fmt.Errorf("exporters: TopGroups(%d): want 1 or more: %w", c.top, semaphore.ErrInvalidConfig))
	}
	if c.idle <= 0 {
		panic(fmt.Errorf("exporters: GroupIdle(%v): want a positive duration: %w", c.idle, semaphore.ErrInvalidConfig))
	}
	return &GroupWaits{top: c.top, idle: c.idle, now: time.Now, lanes: map[string]*laneGroups{}}
}

// GroupHooks returns h with w's recording added: every wait for a global
// lane of the queue that ends in a grant (a wait for its permits, not for
// its cooldown) is recorded in w, by its
// [lanequeue.Event] Group, and h's OnSlowWait still gets the waits longer
// than h.SlowWait, as it would without w. Give the result to
// [lanequeue.Queue.SetHooks]:
//
//	groups := exporters.NewGroupWaits()
//	q.SetHooks(exporters.GroupHooks(groups, lanequeue.LogHooks[string](nil, time.Second, time.Minute)))
//	prometheus.MustRegister(promlanes.New(q, promlanes.WithGroupWaits(groups)))
//
// (the zero Hooks for no hooks of your own). The cost is on the waits
// only: a grant at once reaches no hook. It panics if w is nil.
func GroupHooks[K comparable](w *GroupWaits, h lanequeue.Hooks[K]) lanequeue.Hooks[K] {
	if w == nil {
		panic("exporters: nil GroupWaits")
	}
	next, bound := h.OnSlowWait, h.SlowWait
	h.SlowWait = 0 // every wait, for w
	h.OnSlowWait = func(e lanequeue.Event[K]) {
		// A wait for a cooldown is not a grant's wait (Event.Cooldown):
		// the call's wait for the permits, if any, is reported apart.
		if e.Err == nil && e.Kind == lanequeue.Global && !e.Cooldown {
			w.record(e.Lane, e.Group, e.Since.Add(e.Duration), e.Duration)
		}
		if next != nil && (bound == 0 || e.Duration > bound) {
			next(e)
		}
	}
	return h
}

// record counts a wait of d, ended at end, of group on lane.
func (w *GroupWaits) record(lane, group string, end time.Time, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.lanes[lane]
	if l == nil {
		l = &laneGroups{own: map[string]*groupSlot{}}
		w.lanes[lane] = l
	}
	if group != "" {
		l.grouped = true
	}
	s := l.own[group]
	if s == nil && len(l.own) < w.top && group != OtherGroup {
		s = &groupSlot{}
		l.own[group] = s
	}
	if s == nil {
		observe(&l.other, d)
		return
	}
	observe(&s.waits, d)
	if end.After(s.last) {
		s.last = end
	}
}

// observe adds d to h, in the bucket of semaphore.HistogramBounds it falls
// in (each bound inclusive).
func observe(h *semaphore.Histogram, d time.Duration) {
	d = max(d, 0)
	i := sort.Search(len(groupBounds), func(i int) bool { return d <= groupBounds[i] })
	h.Counts[i]++
	h.Count++
	h.Sum += d
}

var groupBounds = semaphore.HistogramBounds()

// LaneGroups is one lane's waits by group, as the exporters report them.
type LaneGroups struct {
	Lane string
	// Groups are the groups with a series of their own, by name, then
	// the others summed under [OtherGroup], always last (and always
	// there, maybe empty): their counts add up to every wait recorded
	// for the lane.
	Groups []GroupWait
}

// GroupWait is the waits of one group of a lane: a [semaphore.Histogram]
// in the buckets of [semaphore.HistogramBounds], of the calls that queued
// and were granted, each to about a millisecond (the queue's hooks'
// clock).
type GroupWait struct {
	Group string
	Waits semaphore.Histogram
}

// Lanes returns the lanes whose waits named a group, by name. Each call
// first takes their series from the groups that have not waited for the
// idle time (GroupIdle), their counts added to [OtherGroup]'s, so that
// the figures still add up and no counter goes down.
func (w *GroupWaits) Lanes() []LaneGroups {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]LaneGroups, 0, len(w.lanes))
	for name, l := range w.lanes {
		for g, s := range l.own {
			if now.Sub(s.last) > w.idle {
				merge(&l.other, &s.waits)
				delete(l.own, g)
			}
		}
		if !l.grouped {
			continue
		}
		lg := LaneGroups{Lane: name, Groups: make([]GroupWait, 0, len(l.own)+1)}
		for g, s := range l.own {
			lg.Groups = append(lg.Groups, GroupWait{Group: g, Waits: s.waits})
		}
		slices.SortFunc(lg.Groups, func(a, b GroupWait) int { return strings.Compare(a.Group, b.Group) })
		lg.Groups = append(lg.Groups, GroupWait{Group: OtherGroup, Waits: l.other})
		out = append(out, lg)
	}
	slices.SortFunc(out, func(a, b LaneGroups) int { return strings.Compare(a.Lane, b.Lane) })
	return out
}

// merge adds the waits of from to h.
func merge(h, from *semaphore.Histogram) {
	for i, c := range from.Counts {
		h.Counts[i] += c
	}
	h.Count += from.Count
	h.Sum += from.Sum
}
