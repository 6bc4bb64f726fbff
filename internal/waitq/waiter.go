package waitq

import (
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// Waiter is one caller waiting for permits. N is set by the owner before
// Push; the other fields belong to the engine and are guarded by the lock
// of the queue the waiter is in, except ready, and the outcome, which the
// waiter reads after receiving from ready.
type Waiter struct {
	N     int64 // the permits asked for
	Since int64 // when it joined, on the owner's clock; set by the owner before Push (0: not stamped)
	// Timed is set by an owner that times this wait (its Since is then
	// the start), for the owner's own use after the wake-up.
	Timed bool
	// Place is where an ordered queue (PushOrdered) puts it, set by the
	// owner before pushing; a FIFO owner leaves it zero, or uses its
	// Arrival for its own ends (barging's bound).
	Place
	next, prev *Waiter // queue links (circular), under the owner's lock
	// On the head of a queue: the waiters in it (Len), kept where a push
	// and a serve write already (the head's prev, the next head's prev).
	qlen int
	// The run w begins or ends in an ordered queue (see PushOrdered), under
	// the owner's lock: nil, both, on a waiter that is a run of its own or
	// inside one, so that Push leaves them alone and unlink looks at them
	// only on an ordered queue.
	runFirst *Waiter       // on the last of a run: its first
	runLast  *Waiter       // on the first of a run: its last
	runMin   int64         // on the last of a run: at most the least Arrival in it
	wnext    *Waiter       // wake-up link, under the lock until woken
	ready    chan struct{} // one send per service, after the lock is released
	served   bool          // under the lock: granted or failed, and off the queue
	err      error         // set with served when failed
	tok      *permit.Token // set with served when granted
	gen      uint64        // tok's generation at the grant
	uses     uint32        // the waits it has served, kept across reuse (Uses)
}

var pool = sync.Pool{New: func() any { return &Waiter{ready: make(chan struct{}, 1)} }}

// Cache hands out waiters: one kept in a slot of its own, else the shared
// pool. Under steady contention the same few waiters cycle through the
// slot, which costs one atomic swap where the pool costs a pin/unpin round
// trip. The zero Cache is ready to use.
type Cache struct {
	slot atomic.Pointer[Waiter]
}

// Get returns a free waiter, with no outcome and an empty ready channel.
func (c *Cache) Get() *Waiter {
	w := c.slot.Swap(nil)
	if w == nil {
		w = pool.Get().(*Waiter)
	}
	w.uses++
	return w
}

// Uses returns how many times w was handed out by a Cache, this time
// included: a count that moves on by one per wait of this waiter, for an
// owner that samples its waits (hist.Sampler) without a shared counter.
func (w *Waiter) Uses() uint32 { return w.uses }

// Put takes back a waiter that is off the queue and whose wake-up, if
// any, has been received.
func (c *Cache) Put(w *Waiter) {
	w.N, w.Since, w.Timed, w.Place, w.served, w.err, w.tok, w.gen = 0, 0, false, Place{}, false, nil, nil, 0
	if !c.slot.CompareAndSwap(nil, w) {
		pool.Put(w)
	}
}

// Chain collects served waiters, in order, under the owner's lock, for
// Wake after unlocking. The zero Chain is empty.
type Chain struct {
	first, last *Waiter
}

func (c *Chain) add(w *Waiter) {
	if c.last == nil {
		c.first = w
	} else {
		c.last.wnext = w
	}
	c.last = w
}

// Wake wakes the chain's waiters in order, once each; call it after
// unlocking. Each waiter may be reused as soon as it is woken, so the next
// link is read first.
func (c *Chain) Wake() {
	for w := c.first; w != nil; {
		next := w.wnext
		w.wnext = nil
		w.ready <- struct{}{}
		w = next
	}
	c.first, c.last = nil, nil
}

// Ready is the channel w's wake-up is sent on, for an owner that writes
// Await's select out (see Await): receive from it once, and follow the
// protocol of the package doc.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }
