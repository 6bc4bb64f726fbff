package model

import (
	"fmt"
	"slices"
)

// fairScale is the length, in the fair model's virtual time, of a request
// of one permit in a group of weight 1. The order of service does not
// depend on it as long as every weight divides it (then every length is
// exact and scaling it scales every key alike); the tests use weights
// from 1 to 16, which divide it.
const fairScale = 720720

// FairShare is the order of semaphore.WithFairShare(weight): start-time
// fair queuing, written out plainly. weight gives each group's weight
// (nil: 1 for every group).
//
// Each band (a priority: PrioritiesFairShare; 0 here) is a fair queue of
// its own. Its virtual time V is the latest key served in it; each group
// has the finish of its last request in the band, F (0 if it has none).
// A waiter of n permits of group g joins its band at key max(V, F[g]),
// and F[g] becomes that key plus n*fairScale/weight(g): a group is
// charged in its calls' band only. The waiter served next is the one of
// the lowest key, the first to arrive among equals; one that does not fit
// stops the service (nobody overtakes it). A newcomer whose key is below
// every waiter's goes ahead of them, and is served as it joins if it fits
// (counted as a grant that waited). When a waiter joins a band that has
// no waiter, the band's V and every F start again from zero. The model
// keeps every group's F until then (the real semaphore drops the records
// that cannot matter, which must change nothing). A waiter that leaves
// without its grant leaves its group charged.
func FairShare(weight func(group string) int) Order {
	if weight == nil {
		weight = func(string) int { return 1 }
	}
	return &fairShare{weight: weight, bands: make(map[int]*fairBand)}
}

type fairShare struct {
	weight func(string) int
	bands  map[int]*fairBand
}

// fairBand is one band's virtual time and finishes.
type fairBand struct {
	v      int64
	finish map[string]int64
}

// band returns the state of band p, made if it has none.
func (f *fairShare) band(p int) *fairBand {
	b := f.bands[p]
	if b == nil {
		b = &fairBand{finish: make(map[string]int64)}
		f.bands[p] = b
	}
	return b
}

func (*fairShare) takes(t Turn) bool { return t.Priority == 0 }

// passes is false: a newcomer is charged and placed first (join), and
// served as it joins if its place comes first.
func (*fairShare) passes(*Semaphore, Waiter) bool { return false }

func (f *fairShare) join(m *Semaphore, w *Waiter) {
	b := f.band(w.Priority)
	if !slices.ContainsFunc(m.queue, func(x Waiter) bool { return x.Priority == w.Priority }) {
		b.v = 0
		clear(b.finish)
	}
	w.Key = max(b.v, b.finish[w.Group])
	b.finish[w.Group] = w.Key + w.N*(fairScale/int64(f.weight(w.Group)))
}

func (*fairShare) before(_ *Semaphore, a, b Waiter) bool { return a.Key < b.Key }

func (f *fairShare) served(_ *Semaphore, w Waiter) { f.band(w.Priority).v = w.Key }

// check: every waiting key is at least its band's V, and within a group
// keys rise in arrival order (FIFO within a group).
func (f *fairShare) check(m *Semaphore) error {
	last := make(map[string]Waiter)
	for _, w := range m.queue {
		if v := f.band(w.Priority).v; w.Key < v {
			return fmt.Errorf("model: waiter %+v has a key below V %d", w, v)
		}
		if p, ok := last[w.Group]; ok && p.Key >= w.Key {
			return fmt.Errorf("model: group %q out of arrival order: %+v before %+v", w.Group, p, w)
		}
		last[w.Group] = w
	}
	return nil
}
