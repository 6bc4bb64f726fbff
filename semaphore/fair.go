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
// Each band (a priority; 0 for every call without WithPriorities) is a
// fair queue of its own, a fairBand, with its virtual time and its
// groups' records: a group is charged in the band its calls wait in, and
// only there (the package doc: fair share is within a priority), so that
// a tenant's backlog at a low priority does not put its calls at a high
// one behind the other tenants'. A band has state only while it has
// waiters (fairBand.waiters, kept by fairKey and the engine's Dequeued):
// the last to leave lets it go, and the next to join starts it from zero.
//
// A band's virtual time v is the latest key served in it. Without
// priorities the queue is in ascending key order and its head is the one
// served, so v is the key of the waiter served last and every waiting key
// is at least v; with them, aging may serve a band's keys out of order
// (see waitq.Ahead), and v keeps the latest, so it never decreases while
// the band has waiters. A group's record holds the finish of its last
// request in the band: its next waiter's key is max(v, finish), and the
// finish moves on by the request's length. A record whose finish is at
// most v says nothing (the key would be v without it, and v only grows),
// so it can be dropped at any time: this is what keeps the records
// bounded (sweep), and why a group whose callers all left or were served
// soon has no record.
//
// A grant given back (its waiter's context ended first, see waitq.End)
// is taken as if the waiter had left before it: if nobody joined its band
// since and its key is the one v holds, v goes back to the largest key of
// the band's other grants (served, unserved); those served after it may
// have smaller keys under priorities, which serve keys out of order. So v
// never decreases as far as any key or sweep has seen it (both come with
// a join). A second grant given back before anyone joins leaves v as it
// is, and a band let go meanwhile has no v to move.
//
// Keys saturate at math.MaxInt64: a band that has someone waiting without
// a break for about 10^13 turns (permits over weight; weeks at millions of
// grants a second) runs out of them, and the callers that join then are
// served in arrival order (equal keys) until the band empties.
//
// Cost: a waiter's place is found under mu by a search from the newest
// waiter over those it overtakes (about one per other group waiting), a
// lookup of its band and of its group and a few stores; its grant, and
// its leaving, a lookup of its band and a few stores. Only a band or a
// group new to the records may allocate (growing them).
type fairQueue struct {
	weight func(string) int
	bands  []*fairBand         // the bands that have waiters, in no order
	byBand map[int32]*fairBand // the bands' index, made once there were more than fairScan
	spare  []*fairBand         // states of bands let go, for reuse
}

// fairBand is one band's fair queue.
type fairBand struct {
	band    int32
	waiters int // its waiters in the queue
	v       int64
	top     *permit.Token // the grant whose key v holds, until someone joins the band
	second  int64         // the largest key of the band's other grants since top's (or v before it)
	recs    []fairRecord
	index   map[string]int32 // group -> its record in recs, while indexed
	indexed bool             // the records passed fairScan since the band started
	sweepAt int              // the record sweep looks at next
}

// fairScan is the number of records of a band up to which fairKey looks
// for a group's record by comparing names rather than through an index,
// and of bands up to which fairQueue looks for a band by a scan.
const fairScan = 8

type fairRecord struct {
	group  string
	finish int64
}

func newFairQueue(weight func(string) int) *fairQueue {
	return &fairQueue{weight: weight}
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
// band (unit is from unit), and charges the group in that band; it counts
// the waiter in the band. It must be called with mu held, just before the
// waiter is pushed with that key.
func (s *Weighted) fairKey(band int32, group string, n, unit int64) int64 {
	b := s.fair.bandOf(band)
	b.waiters++
	b.top = nil // this key is taken from v: a grant given back later leaves v as it is
	i, ok := b.find(group)
	if !ok {
		i = b.add(group)
	}
	r := &b.recs[i]
	key := max(b.v, r.finish)
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
	b.sweep()
	return key
}

// bandOf returns band's state, made (or taken from the spares) if the
// band has none.
func (f *fairQueue) bandOf(band int32) *fairBand {
	if b := f.lookup(band); b != nil {
		return b
	}
	var b *fairBand
	if n := len(f.spare); n > 0 {
		b, f.spare = f.spare[n-1], f.spare[:n-1]
	} else {
		b = new(fairBand)
	}
	b.band = band
	f.bands = append(f.bands, b)
	if f.byBand != nil {
		f.byBand[band] = b
	} else if len(f.bands) > fairScan {
		f.byBand = make(map[int32]*fairBand, 2*fairScan)
		for _, x := range f.bands {
			f.byBand[x.band] = x
		}
	}
	return b
}

// lookup returns band's state, nil if the band has no waiters.
func (f *fairQueue) lookup(band int32) *fairBand {
	if f.byBand != nil {
		return f.byBand[band]
	}
	for _, b := range f.bands {
		if b.band == band {
			return b
		}
	}
	return nil
}

// left takes a waiter of band out of the band's count (the engine's
// Dequeued: served, or left without its grant); the last lets the band go.
func (f *fairQueue) left(band int32) {
	b := f.lookup(band)
	if b == nil {
		return
	}
	if b.waiters--; b.waiters > 0 {
		return
	}
	for i, x := range f.bands {
		if x == b {
			last := len(f.bands) - 1
			f.bands[i], f.bands[last] = f.bands[last], nil
			f.bands = f.bands[:last]
			break
		}
	}
	if f.byBand != nil {
		delete(f.byBand, band)
	}
	b.reset()
	f.spare = append(f.spare, b)
}

// reset forgets a band's records (letting go of the group strings) and
// sets its v back to zero, keeping its buffers for the next band.
func (b *fairBand) reset() {
	b.waiters, b.v, b.top, b.second = 0, 0, nil, 0
	clear(b.recs)
	b.recs, b.sweepAt = b.recs[:0], 0
	if b.index != nil {
		clear(b.index)
	}
	b.indexed = false
}

// add appends group's record and returns its index, indexing the records
// once they pass fairScan.
func (b *fairBand) add(group string) int32 {
	i := int32(len(b.recs))
	b.recs = append(b.recs, fairRecord{group: group})
	switch {
	case b.indexed:
		b.index[group] = i
	case len(b.recs) > fairScan:
		if b.index == nil {
			b.index = make(map[string]int32, 2*fairScan)
		}
		for j, r := range b.recs {
			b.index[r.group] = int32(j)
		}
		b.indexed = true
	}
	return i
}

// find returns the index of group's record, if it has one. With a few
// records (no index yet) it compares names rather than hashing one: first
// by where their bytes are (a caller that reuses its group's string, as
// most do, finds its record without comparing bytes: a string comparison
// of two names of one length is a call), then by their bytes.
func (b *fairBand) find(group string) (int32, bool) {
	if b.indexed {
		i, ok := b.index[group]
		return i, ok
	}
	p := unsafe.StringData(group)
	for j := range b.recs {
		if g := b.recs[j].group; unsafe.StringData(g) == p && len(g) == len(group) {
			return int32(j), true
		}
	}
	for j := range b.recs {
		if b.recs[j].group == group {
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

// served moves band's v on to key, the key of a waiter of band just
// granted through t, if it is later: under WithPriorities, aging may serve
// a band's keys out of order, and v never goes back. It keeps what
// unserved needs: which grant v holds the key of, and the largest key of
// the band's others. A band let go (its last waiter gone) has no v.
func (f *fairQueue) served(band int32, key int64, t *permit.Token) {
	b := f.lookup(band)
	if b == nil {
		return
	}
	if key >= b.v {
		b.second, b.v, b.top = b.v, key, t
		return
	}
	b.second = max(b.second, key)
}

// unserved takes back the move of band's v for the grant of key through
// t, given back before it reached its waiter, if v holds that grant's key
// and nobody joined the band since: v becomes what it would be had the
// waiter left first. The band and the key, not the token alone, say which
// grant top names: a token is reused by the next grant, of any band, and
// top is not cleared when its grant reaches its waiter.
func (f *fairQueue) unserved(band int32, key int64, t *permit.Token) {
	if b := f.lookup(band); b != nil && b.top == t && b.v == key {
		b.v, b.top = b.second, nil
	}
}

// sweep looks at two records, the next ones in turn, and drops those whose
// finish is at most v. Each push adds at most one record and looks at
// two, so a record that has stopped mattering is gone within as many
// pushes as there are records, and the records are never many more than
// the groups that waited within one request's length of v.
func (b *fairBand) sweep() {
	for range 2 {
		if b.sweepAt >= len(b.recs) {
			b.sweepAt = 0
			if len(b.recs) == 0 {
				return
			}
		}
		i := b.sweepAt
		if b.recs[i].finish > b.v {
			b.sweepAt++
			continue
		}
		// Drop record i: the last one takes its place.
		last := len(b.recs) - 1
		if b.indexed {
			delete(b.index, b.recs[i].group)
		}
		if i != last {
			b.recs[i] = b.recs[last]
			if b.indexed {
				b.index[b.recs[i].group] = int32(i)
			}
		}
		b.recs[last] = fairRecord{}
		b.recs = b.recs[:last]
	}
}
