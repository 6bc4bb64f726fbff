package redislane

import (
	"container/heap"
	"time"
)

// Expiry: a permit's lease ends at its deadline when no refresh moved it
// (Redis away, or the refresher late). The permits out of an instance wait
// for their deadlines in one heap with one timer, not a timer each: a
// grant adds its permit to the heap and a release takes it out, under the
// c.mu that both take anyway. Most permits are released long before their
// deadline, and a permit granted after the others has the latest deadline,
// so a grant usually only appends to the heap and leaves the timer alone.
// (A timer a grant, set and then stopped, was about 5% of an instance's CPU
// per grant in fleetsim: docs/benchmarks-fleet.md.)
//
// A permit's place in the heap is the deadline it had when it went in: a
// refresh moves its deadline later and leaves the heap alone, so the timer
// may fire early for it; it then goes back in at its new deadline. It
// never fires late.

// expiry is the heap of the permits out, earliest deadline first, and its
// timer. Guarded by core.mu.
type expiry struct {
	heap  []*Permit
	timer *time.Timer // fires expire at `at`; nil until the first grant
	at    time.Time   // when timer fires; zero: stopped
}

// expiryAddLocked puts p in the heap at its deadline dl, and moves the timer
// earlier if p's is the earliest.
func (c *core) expiryAddLocked(p *Permit, dl time.Time) {
	e := &c.exp
	p.expAt = dl
	heap.Push(e, p)
	if e.at.IsZero() || dl.Before(e.at) {
		e.at = dl
		if e.timer == nil {
			e.timer = time.AfterFunc(time.Until(dl), c.expire)
		} else {
			e.timer.Reset(time.Until(dl))
		}
	}
}

// expiryRemoveLocked takes p out of the heap, if it is there. The timer is
// left as it is, also when the heap is empty: it may fire for nothing, and
// is set again then, where stopping it would make the next grant set it
// again (a lane whose permits are all back between grants would pay the
// timer at every grant). Close stops it.
func (c *core) expiryRemoveLocked(p *Permit) {
	e := &c.exp
	if i := p.expIdx; i >= 0 && i < len(e.heap) && e.heap[i] == p {
		heap.Remove(e, i)
	}
}

// expiryStopLocked stops the timer, at Close once every permit ended.
func (c *core) expiryStopLocked() {
	if c.exp.timer != nil {
		c.exp.timer.Stop()
		c.exp.at = time.Time{}
	}
}

// expire is the timer's: it ends the leases whose deadline passed, puts
// back the permits whose deadline a refresh moved, and sets the timer for
// the earliest deadline left.
func (c *core) expire() {
	now := time.Now()
	var due []*Permit
	c.mu.Lock()
	e := &c.exp
	var back []*Permit
	for len(e.heap) > 0 && !e.heap[0].expAt.After(now) {
		p := e.heap[0]
		c.expiryRemoveLocked(p)
		p.mu.Lock()
		switch {
		case p.state != active:
		case p.deadline.After(now): // refreshed meanwhile
			back = append(back, p)
		default:
			p.state = ended
			due = append(due, p)
		}
		p.mu.Unlock()
	}
	for _, p := range back {
		p.mu.Lock()
		dl := p.deadline
		p.mu.Unlock()
		c.expiryAddLocked(p, dl)
	}
	e.at = time.Time{}
	if len(e.heap) > 0 {
		e.at = e.heap[0].expAt
		e.timer.Reset(time.Until(e.at))
	}
	// Not refreshed any more (forget's work, for all of them at once).
	for _, p := range due {
		if c.permits[p.id] == p {
			delete(c.permits, p.id)
		}
	}
	last := len(due) > 0 && c.closed && c.nwait == 0 && len(c.permits) == 0
	c.mu.Unlock()
	for _, p := range due {
		p.expired()
	}
	if last {
		c.kickRefresher()
	}
}

// Len, Less, Swap, Push and Pop make expiry a heap.Interface of permits by
// expAt, each knowing its index (expIdx): call heap.Push and heap.Remove,
// not Push and Pop.
func (e *expiry) Len() int           { return len(e.heap) }
func (e *expiry) Less(i, j int) bool { return e.heap[i].expAt.Before(e.heap[j].expAt) }

func (e *expiry) Swap(i, j int) {
	e.heap[i], e.heap[j] = e.heap[j], e.heap[i]
	e.heap[i].expIdx = i
	e.heap[j].expIdx = j
}

func (e *expiry) Push(x any) {
	p := x.(*Permit)
	p.expIdx = len(e.heap)
	e.heap = append(e.heap, p)
}

func (e *expiry) Pop() any {
	last := len(e.heap) - 1
	p := e.heap[last]
	e.heap[last] = nil
	e.heap = e.heap[:last]
	p.expIdx = -1
	return p
}
