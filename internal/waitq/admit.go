package waitq

import (
	"context"

	"github.com/sessionlane/lanes/internal/permit"
)

// Admitter is the Owner of a queue that callers join through Admit: it
// says what refuses a caller and whether one comes first, and takes
// permits from its state word. The engine calls its methods with the
// lock held. Arguments are values, not pointers: a pointer passed through
// the generic call would move what it points to to the heap.
type Admitter interface {
	Owner
	// Refusal returns the refusal of a caller of n permits that needs no
	// look at the permits (closed, too heavy), or nil.
	Refusal(n int64) error
	// Load returns the owner's state word.
	Load() uint64
	// First reports whether a caller at pl whose n permits are free in st
	// is served before every waiter (nobody waits, it goes ahead of the
	// head, or it may barge).
	First(st uint64, n int64, pl Place) bool
	// Take takes n permits from st for a caller at pl that comes first,
	// and returns its permit and the waiters it served meanwhile (a
	// reorder hold it ended), for waking; ok is false, nothing taken, if
	// the word moved.
	Take(st uint64, n int64, pl Place) (p permit.Permit, c Chain, ok bool)
	// Full returns the refusal of a waiter of n permits that the queue
	// has no room for, or nil.
	Full(n int64) error
	// Mark sets the flag that sends releases through the lock in st, by
	// compare-and-swap (or sees it set), and reports false if the word
	// moved.
	Mark(st uint64) bool
	// Refuse counts an admission refused (cancelled: its context had
	// ended; else rejected) and unlocks.
	Refuse(cancelled bool)
}

// Admit is the admission of every call that may wait, for n permits at
// place pl (zero for FIFO): under o's lock, a refusal that needs no look
// at the permits; else, after each load of the state word, the end of
// ctx (permits given back since the caller looked at ctx, by a release
// that takes no lock, must not go to a context that ended before they
// came free); the permits, if they are free and the caller comes first;
// the queue's room; and the flag that sends releases through the lock,
// set before the caller queues, so that no release slips past the queue
// (if the word moved, it looks again: the permits may have come back).
// It returns the permit (unlocked), or the refusal, counted (unlocked),
// or queue true with o's lock still held: the caller pushes its waiter,
// counts it and unlocks.
func Admit[O Admitter](ctx context.Context, o O, n int64, pl Place) (p permit.Permit, queue bool, err error) {
	o.Lock()
	if err = o.Refusal(n); err != nil {
		o.Refuse(false)
		return permit.Permit{}, false, err
	}
	for {
		st := o.Load()
		if err = ctx.Err(); err != nil {
			o.Refuse(true)
			return permit.Permit{}, false, err
		}
		if o.First(st, n, pl) {
			if p, c, ok := o.Take(st, n, pl); ok {
				o.Unlock()
				c.Wake()
				return p, false, nil
			}
			continue
		}
		if err = o.Full(n); err != nil {
			o.Refuse(false)
			return permit.Permit{}, false, err
		}
		if o.Mark(st) {
			return permit.Permit{}, true, nil
		}
	}
}
