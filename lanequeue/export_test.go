package lanequeue

import (
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
)

// TicketSize is the size of a Ticket[string], pinned by TestTicketLayout:
// the handle that an AcquireAll hands out, from a block of handles.
const TicketSize = unsafe.Sizeof(Ticket[string]{})

// HandlesPerBlock is how many handles of a Ticket[string] one allocation
// of a block holds.
const HandlesPerBlock = handleBlockBytes / unsafe.Sizeof(Ticket[string]{})

// StripeSize is the size of a stripe of the list of records.
const StripeSize = unsafe.Sizeof(holderStripe[string]{})

// InlineLanes is how many lanes a ticket holds without a second allocation.
const InlineLanes = inlineLanes

// MaxFree is how many free records a stripe keeps.
const MaxFree = maxFree

// SameRecord reports whether a and b were granted through the same record.
func SameRecord[K comparable](a, b *Ticket[K]) bool { return a.r != nil && a.r == b.r }

// Records counts the records that q keeps, held or free, over all stripes,
// and the records in free lists.
func (q *Queue[K]) Records() (all, free int) {
	for i := range q.holders.stripes {
		st := &q.holders.stripes[i]
		st.mu.Lock()
		for r := st.all; r != nil; r = r.next {
			all++
		}
		free += st.nfree
		st.mu.Unlock()
	}
	return all, free
}

// SetRateClock makes the rate lane registered as name on q read the time
// from c (and make its timers with it). Call it before q is used.
func SetRateClock[K comparable](q *Queue[K], name string, c clock.Clock) {
	q.table.Load().byName[name].e.rate.clk = c
}

// RateLimiter returns the limiter of the rate lane registered as name on q.
func RateLimiter[K comparable](q *Queue[K], name string) *rate.Limiter {
	return q.table.Load().byName[name].e.rate.lim
}

// AdmitLeave counts one call in and out, as an AcquireAll that fails does
// for Drain, for BenchmarkDrainCount.
func (q *Queue[K]) AdmitLeave() {
	if q.admit() == nil {
		q.leave()
	}
}

// SetClock makes q read the time for Holders, Waiters, Ticket.Since and
// the hooks from c. Call it before q is used.
func SetClock[K comparable](q *Queue[K], c clock.Clock) {
	q.watch.fake, q.watch.epoch = c, c.Now()
}
