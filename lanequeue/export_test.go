package lanequeue

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/semaphore"
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

// The reads the API leaves to Queue.Holders and Queue.Stats, for tests
// that check one ticket or one lane.

// GlobalSemaphore returns the semaphore of q's global or fair lane name.
func GlobalSemaphore[K comparable](q *Queue[K], name string) (*semaphore.Weighted, error) {
	r, ok := q.tbl().byName[name]
	if !ok || r.e.capSem == nil {
		return nil, fmt.Errorf("lanequeue test: %q is no global lane of this package: %w", name, semaphore.ErrInvalidConfig)
	}
	return r.e.capSem, nil
}

// KeyedSemaphore returns the keyed semaphore of q's keyed lane name.
func KeyedSemaphore[K comparable](q *Queue[K], name string) (*keyedsem.Keyed[K], error) {
	r, ok := q.tbl().byName[name]
	if !ok || r.e.keyed == nil {
		return nil, fmt.Errorf("lanequeue test: %q is no keyed lane of this package: %w", name, semaphore.ErrInvalidConfig)
	}
	return r.e.keyed, nil
}

// LaneOf returns q's lane name.
func LaneOf[K comparable](q *Queue[K], name string) (Lane[K], bool) {
	r, ok := q.tbl().byName[name]
	if !ok {
		return nil, false
	}
	return r.e.lane, true
}

// Names returns the names of q's lanes in canonical order.
func Names[K comparable](q *Queue[K]) []string {
	var out []string
	for _, e := range q.tbl().ordered {
		out = append(out, e.name)
	}
	return out
}

// TicketReleased reports whether t holds nothing.
func TicketReleased[K comparable](t *Ticket[K]) bool {
	r := t.lock()
	if r == nil {
		return true
	}
	r.home.mu.Unlock()
	return false
}

// TicketKey returns t's key, or the zero K.
func TicketKey[K comparable](t *Ticket[K]) K {
	r := t.lock()
	if r == nil {
		var zero K
		return zero
	}
	defer r.home.mu.Unlock()
	return r.key
}

// TicketLanes returns the names of t's lanes, in canonical order.
func TicketLanes[K comparable](t *Ticket[K]) []string {
	r := t.lock()
	if r == nil {
		return nil
	}
	defer r.home.mu.Unlock()
	var out []string
	for _, h := range r.g.held() {
		out = append(out, h.e.name)
	}
	return out
}

// TicketWeight returns the weight t holds on lane.
func TicketWeight[K comparable](t *Ticket[K], lane string) (int64, bool) {
	r := t.lock()
	if r == nil {
		return 0, false
	}
	defer r.home.mu.Unlock()
	for _, h := range r.g.held() {
		if h.e.name == lane {
			return h.n, true
		}
	}
	return 0, false
}

// TicketSince returns when t was granted.
func TicketSince[K comparable](t *Ticket[K]) time.Time {
	r := t.lock()
	if r == nil {
		return time.Time{}
	}
	defer r.home.mu.Unlock()
	return r.q.timeOf(r.since)
}

// PlaceKey returns p's key.
func PlaceKey[K comparable](p *Place[K]) K { return p.key }

// SetHeapReservations makes rate lanes put a copy of each reservation on
// the heap, as keeping ReserveN's pointer did (the ablation of holding
// reservations by value).
func SetHeapReservations(on bool) { heapReservations = on }
