// Package waitq holds what the semaphores' slow paths share: the waiter
// that a caller parks on, its pool, and the wake-up after unlocking.
//
// The protocol, in package semaphore and keyedsem alike: under the owner's
// lock a waiter is queued; a waker decides under the lock whom to serve,
// sets Served with either Tok/Gen (granted) or Err (failed), unlinks it,
// and chains it through WNext; after unlocking it calls WakeAll, which sends
// once on each Ready. A waiter whose context ends takes the lock: if it was
// not served it unlinks itself; if it was, it receives from Ready (the send
// is on its way) before it goes back to the pool, so a pooled waiter never
// holds a stale wake-up.
package waitq

import (
	"sync"
	"sync/atomic"

	"github.com/sessionlane/lanes/internal/permit"
)

// Waiter is one caller waiting for permits. Its fields are guarded by the
// lock of the queue it is in, except Ready (a channel) and the outcome
// fields, which the waiter reads after receiving from Ready.
type Waiter struct {
	N          int64
	Next, Prev *Waiter       // queue links, under the owner's lock
	WNext      *Waiter       // wake-list link, under the lock until woken
	Ready      chan struct{} // one send per service, after the lock is released
	Served     bool          // under the lock: granted or failed, and off the queue
	Err        error         // set with Served when failed
	Tok        *permit.Token // set with Served when granted
	Gen        uint64        // Tok's generation at the grant
}

var pool = sync.Pool{New: func() any { return &Waiter{Ready: make(chan struct{}, 1)} }}

// Cache hands out waiters: one kept in a slot of its own, else the shared
// pool. Under steady contention the same few waiters cycle through the
// slot, which costs one atomic swap where the pool costs a pin/unpin round
// trip. The zero Cache is ready to use.
type Cache struct {
	slot atomic.Pointer[Waiter]
}

// Get returns a free waiter, with an empty Ready.
func (c *Cache) Get() *Waiter {
	if w := c.slot.Swap(nil); w != nil {
		return w
	}
	return pool.Get().(*Waiter)
}

// Put takes back a waiter whose wake-up, if any, has been received.
func (c *Cache) Put(w *Waiter) {
	w.N, w.Served, w.Err, w.Tok, w.Gen = 0, false, nil, nil, 0
	if !c.slot.CompareAndSwap(nil, w) {
		pool.Put(w)
	}
}

// Outcome returns what the waker decided for w, a served waiter whose
// wake-up has been received: the permit it was granted, or the error it
// was failed with. w goes back to the cache.
func (c *Cache) Outcome(w *Waiter) (permit.Permit, error) {
	p, err := permit.Make(w.Tok, w.Gen, w.N), w.Err
	c.Put(w)
	if err != nil {
		return permit.Permit{}, err
	}
	return p, nil
}

// Chain collects served waiters, in order, under the owner's lock. The zero
// Chain is empty.
type Chain struct {
	first, last *Waiter
}

// Add appends w, which must be off the queue.
func (c *Chain) Add(w *Waiter) {
	if c.last == nil {
		c.first = w
	} else {
		c.last.WNext = w
	}
	c.last = w
}

// First returns the chain's first waiter (nil if empty), for WakeAll.
func (c *Chain) First() *Waiter { return c.first }

// WakeAll wakes a chain of waiters made under a lock; call it after
// unlocking. Each waiter may be reused as soon as it is woken, so the next
// link is read first.
func WakeAll(w *Waiter) {
	for w != nil {
		next := w.WNext
		w.WNext = nil
		w.Ready <- struct{}{}
		w = next
	}
}
