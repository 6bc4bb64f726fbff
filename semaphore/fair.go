package semaphore

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/internal/waitq"
)

// maxGroupWeight is the largest weight of a WithFairShare group.
const maxGroupWeight = 1000

// WithFairShare orders the line by [Group], sharing the permits granted in
// proportion to weight(group), or equally if weight is nil. weight is
// called once per waiting call, concurrently, without a lock; a result
// outside [1, 1000] fails that call with [ErrInvalidConfig].
func WithFairShare(weight func(group string) int) Option {
	return func(c *config) {
		c.fairSet = true
		c.fairWeight = weight
	}
}

// fairScale is the length of a request of one permit in a group of weight
// 1, in units of virtual time: 720720 is divisible by every weight from 1
// to 16, so that the shares of the usual weights are exact; larger ones
// round a request's length down by less than one part in 720.
const fairScale = 720720

// fairQueue is the state of WithFairShare: start-time fair queuing keys,
// the rank of a waiter's waitq.Place within its band. It is guarded by the
// semaphore's mu.
//
// The virtual time v is the latest key served. Without priorities the
// queue is in ascending key order and its head is the one served, so v is
// the key of the waiter served last and every waiting key is at least v;
// with them, a band served may be behind another's keys, and v keeps the
// latest, so it never decreases while someone waits. A group has a record
// in each band (priority) it waits in, which holds the finish of its last
// request there: its next waiter's key in that band is max(v, finish),
// and the finish moves on by the request's length. A group is charged in
// the band its calls wait in, and only there: the package doc's fair
// share is within a priority, and a group's backlog at a low priority
// must not put its calls at a high one behind the other groups'.
//
// The bands share v: a group that starts waiting in a band after the
// other bands' service moved v on is keyed at v, after the band's waiters
// keyed before (its share starts from there, not from the band's last
// grant). A v of each band's own would key it from that band's last
// grant; it needs the count of each band's waiters to know when a band's
// v can be let go, which the engine does not keep.
// A record whose finish is at most v says nothing (the key would be v
// without it, and v only grows), so it can be dropped at any time: this
// is what keeps the records bounded (sweep), and why a group whose callers
// all left or were served soon has no record. When nobody waits, nothing
// refers to v, and it starts again from zero with no records (restart).
//
// A grant given back (its waiter's context ended first, see waitq.End)
// is taken as if the waiter had left before it: if nobody joined since
// and its key is the one v holds, v goes back to the largest key of the
// other grants (served, unserved); those served after it may have smaller
// keys under priorities, which serve keys out of order. So v never
// decreases as far as any key or sweep has seen it (both come with a
// join). A second grant given back before anyone joins leaves v as it is.
//
// Keys saturate at math.MaxInt64: a line that has someone waiting without
// a break for about 10^13 turns (permits over weight; weeks at millions of
// grants a second) runs out of them, and the callers that join then are
// served in arrival order (equal keys) until nobody waits and v restarts.
//
// Cost: a waiter's place is found under mu by a search from the newest
// waiter over those it overtakes (about one per other group waiting), a
// lookup of its group and a few stores; its grant costs a FIFO grant plus
// one store. Only a group new to the records may allocate (growing them).
type fairQueue struct {
	weight  func(string) int
	v       int64
	top     *permit.Token    // the grant whose key v holds, until someone joins
	second  int64            // the largest key of the other grants since top's (or v before it)
	index   map[fairID]int32 // band and group -> its record in recs
	recs    []fairRecord
	sweepAt int // the record sweep looks at next
}

// fairScan is the number of records up to which fairKey looks for a
// group's record by comparing names rather than through the index.
const fairScan = 8

// fairID names a record: a group's in one band.
type fairID struct {
	band  int32
	group string
}

type fairRecord struct {
	fairID
	finish int64
}

func newFairQueue(weight func(string) int) *fairQueue {
	return &fairQueue{weight: weight, index: make(map[fairID]int32)}
}

// unit returns the length of one permit's request for group: fairScale
// over the group's weight. It calls the weight function, without mu.
func (f *fairQueue) unit(group string) (int64, error) {
	if f.weight == nil {
		return fairScale, nil
	}
	w := f.weight(group)
	if w < 1 || w > maxGroupWeight {
		return 0, fmt.Errorf("semaphore: WithFairShare: weight of group %q is %d, want 1 to %d: %w", group, w, maxGroupWeight, ErrInvalidConfig)
	}
	return fairScale / int64(w), nil
}

// fairKey returns the key at which a waiter of n permits of group joins
// the queue in band (unit is from unit), and charges the group for it in
// that band. It must be called with mu held, just before the waiter is
// pushed with that key.
func (s *Weighted) fairKey(band int32, group string, n, unit int64) int64 {
	f := s.fair
	if s.q.Empty() {
		f.restart()
	}
	f.top = nil // this key is taken from v: a grant given back later leaves v as it is
	id := fairID{band, group}
	i, ok := f.find(id)
	if !ok {
		i = int32(len(f.recs))
		f.recs = append(f.recs, fairRecord{fairID: id})
		f.index[id] = i
	}
	r := &f.recs[i]
	key := max(f.v, r.finish)
	length := int64(math.MaxInt64)
	// n*unit, saturated; by a multiplication, not a division (n and unit
	// are positive), since this runs under mu on every fair push.
	if hi, lo := bits.Mul64(uint64(n), uint64(unit)); hi == 0 && lo <= math.MaxInt64 {
		length = int64(lo)
	}
	r.finish = math.MaxInt64
	if key <= math.MaxInt64-length {
		r.finish = key + length
	}
	// The record just written ends after v (or is saturated with it), so
	// the sweep keeps it.
	f.sweep()
	return key
}

// find returns the index of id's record, if it has one. With a few
// records it compares names rather than hashing one: first by where their
// bytes are (a caller that reuses its group's string, as most do, finds
// its record without comparing bytes: a string comparison of two names of
// one length is a call), then by their bytes.
func (f *fairQueue) find(id fairID) (int32, bool) {
	if len(f.recs) > fairScan {
		i, ok := f.index[id]
		return i, ok
	}
	p := unsafe.StringData(id.group)
	for j := range f.recs {
		if r := &f.recs[j]; r.band == id.band && unsafe.StringData(r.group) == p && len(r.group) == len(id.group) {
			return int32(j), true
		}
	}
	for j := range f.recs {
		if f.recs[j].fairID == id {
			return int32(j), true
		}
	}
	return 0, false
}

// pushFairUnlock puts w, counted as a waiter, in line at its group's key,
// and unlocks mu. A waiter whose turn comes before the head's joins ahead
// of it, and the head was one that did not fit: the newcomer may, and is
// then served at once (woken after unlocking, so its wait returns at
// once), as it would be had it come first.
func (s *Weighted) pushFairUnlock(w *waitq.Waiter, group string, unit int64) {
	w.Rank = s.fairKey(w.Band, group, w.N, unit)
	s.q.PushOrdered(w, s.prio.step)
	var wake waitq.Chain
	if s.q.Head() == w {
		s.grantLocked(&wake)
	}
	s.mu.Unlock()
	wake.Wake()
}

// restart forgets every record and sets v back to zero, for a queue
// that is empty: no waiting key refers to them.
func (f *fairQueue) restart() {
	f.v, f.top, f.second = 0, nil, 0
	if len(f.recs) == 0 {
		return
	}
	clear(f.index) // keeps the map's table for the next busy spell
	clear(f.recs)  // lets go of the group strings
	f.recs, f.sweepAt = f.recs[:0], 0
}

// served moves v on to key, the key of a waiter just granted through t,
// if it is later: under WithPriorities too, bands may serve keys out of
// order, and v never goes back. It keeps what unserved needs: which grant
// v holds the key of, and the largest key of the others.
func (f *fairQueue) served(key int64, t *permit.Token) {
	if key >= f.v {
		f.second, f.v, f.top = f.v, key, t
		return
	}
	f.second = max(f.second, key)
}

// unserved takes back the move of v for the grant through t, given back
// before it reached its waiter, if v holds its key and nobody joined
// since: v becomes what it would be had the waiter left first.
func (f *fairQueue) unserved(t *permit.Token) {
	if f.top == t {
		f.v, f.top = f.second, nil
	}
}

// sweep looks at two records, the next ones in turn, and drops those whose
// finish is at most v. Each push adds at most one record and looks at
// two, so a record that has stopped mattering is gone within as many
// pushes as there are records, and the records are never many more than
// the groups that waited within one request's length of v.
func (f *fairQueue) sweep() {
	for range 2 {
		if f.sweepAt >= len(f.recs) {
			f.sweepAt = 0
			if len(f.recs) == 0 {
				return
			}
		}
		i := f.sweepAt
		if f.recs[i].finish > f.v {
			f.sweepAt++
			continue
		}
		// Drop record i: the last one takes its place.
		last := len(f.recs) - 1
		delete(f.index, f.recs[i].fairID)
		if i != last {
			f.recs[i] = f.recs[last]
			f.index[f.recs[i].fairID] = int32(i)
		}
		f.recs[last] = fairRecord{}
		f.recs = f.recs[:last]
	}
}
