package redislane

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Delivered returns how many pub/sub messages the hub of s's client has
// handed to a waiter of this process.
func Delivered(s *Weighted) int64 { return s.c.hub.delivered.Load() }

// HubGoroutines returns how many goroutines the pub/sub hub of s's client
// runs now (receive loops and subscriptions in flight); it reads the hub s
// joined, also after Close.
func HubGoroutines(s *Weighted) int64 { return s.c.hub.goroutines.Load() }

// HubConns returns how many pub/sub connections the hub of s's client
// holds now.
func HubConns(s *Weighted) int {
	h := s.c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// ScriptOf names the lane's script that cmd runs ("acquire", "release",
// "refresh", "fleet"), or returns "" for any other command.
func ScriptOf(cmd redis.Cmder) string {
	a := cmd.Args()
	if len(a) < 2 {
		return ""
	}
	s, _ := a[1].(string)
	for _, sc := range []struct {
		name string
		src  string
		sc   *redis.Script
	}{
		{"acquire", acquireSrc, acquireScript},
		{"release", releaseSrc, releaseScript},
		{"refresh", refreshSrc, refreshScript},
		{"fleet", fleetSrc, fleetScript},
	} {
		switch cmd.Name() {
		case "evalsha":
			if s == sc.sc.Hash() {
				return sc.name
			}
		case "eval":
			if s == sc.src {
				return sc.name
			}
		}
	}
	return ""
}

// FleetArgs are the arguments of one fleet script call made by FleetCall.
type FleetArgs struct {
	ID                string
	Limit, LTerm      int64 // the caller's last read and the term it was written in
	Seen              int64 // the highest term the caller saw
	Candidate, Set    bool
	Value, ValueTerm  int64
	Lease, Quarantine time.Duration
}

// FleetCall runs the fleet script of lane name once, as an instance of a
// Fleet would, and returns its reply: status, term, limit, written, lterm,
// and the overloads the followers shared.
func FleetCall(ctx context.Context, rc redis.UniversalClient, name string, a FleetArgs) ([]int64, error) {
	p := "{lanes:" + name + "}"
	return fleetScript.Run(ctx, rc,
		[]string{p + ":meta", p + ":leader", p + ":g:h", p + ":g:q", p + ":g:x", p + ":g:d"},
		a.ID, a.Limit, "fleet", ms(a.Lease), ms(a.Quarantine), p+":wake", "PUBLISH",
		flag(a.Candidate), ms(3*a.Lease), flag(a.Set), a.Value, a.ValueTerm, 0, a.Seen, a.LTerm, 0, 0,
	).Int64Slice()
}

// TryAcquireCall runs the acquire script of fleet lane name once in try
// mode, as a Fleet's TryAcquire would with the given last read, and
// returns its reply.
func TryAcquireCall(ctx context.Context, rc redis.UniversalClient, name, id string, limit, lterm int64, lease, quarantine time.Duration) ([]int64, error) {
	p := "{lanes:" + name + "}"
	return acquireScript.Run(ctx, rc,
		[]string{p + ":meta", p + ":g:h", p + ":g:q", p + ":g:x", p + ":g:d"},
		id, 1, limit, "fleet", ms(lease), ms(quarantine), 1, p+":wake", "PUBLISH", lterm,
	).Int64Slice()
}

// lineOfTwo returns a core and a line of two waiters on it: the head h,
// and f behind it, whose outcomes go to a one-slot channel that nobody
// reads until the caller does.
func lineOfTwo() (c *core, ln *line, h, f *waiter) {
	c = &core{}
	c.cfg.lease = time.Minute
	ln = &line{key: ""}
	h = &waiter{}
	h.elem = ln.list.PushBack(h)
	f = &waiter{got: make(chan batchResult, 1)}
	f.elem = ln.list.PushBack(f)
	return c, ln, h, f
}

// SettleUnread settles three calls of a head that carried one waiter's
// request (not granted, not granted, then granted) while the waiter reads
// none of their outcomes, as a waiter that its goroutine has not run yet.
// The returned channel gets, once all three settles returned, whether the
// outcome the waiter then reads is the grant and whether another is left
// behind it.
func SettleUnread() <-chan [2]bool {
	c, ln, _, f := lineOfTwo()
	out := make(chan [2]bool, 1)
	go func() {
		now := time.Now()
		c.settle(ln, []*waiter{f}, reply{sent: now})
		c.settle(ln, []*waiter{f}, reply{sent: now})
		c.settle(ln, []*waiter{f}, reply{sent: now, fences: []int64{7}})
		r := <-f.got
		out <- [2]bool{r.granted && r.fence == 7, len(f.got) > 0}
	}()
	return out
}

// NewID is newID: a request's or a permit's id.
var NewID = newID

// ExpiryHeap is the heap of deadlines of a lane's permits (see expiry),
// alone, for tests: its permits are made by Add, active, and held nowhere.
type ExpiryHeap struct {
	c  *core
	ps []*Permit
}

// NewExpiryHeap returns an empty heap of deadlines.
func NewExpiryHeap() *ExpiryHeap { return &ExpiryHeap{c: &core{}} }

// Add puts in a new active permit whose deadline is dl, and returns its
// number (its index among those added).
func (h *ExpiryHeap) Add(dl time.Time) int { return h.AddRefreshed(dl, dl) }

// AddRefreshed puts in a new active permit at at, as it was granted, whose
// deadline a refresh has moved to dl since, and returns its number.
func (h *ExpiryHeap) AddRefreshed(at, dl time.Time) int {
	p := &Permit{c: h.c, deadline: dl, expIdx: -1}
	h.c.mu.Lock()
	h.c.expiryAddLocked(p, at)
	h.c.mu.Unlock()
	h.ps = append(h.ps, p)
	return len(h.ps) - 1
}

// Remove takes out permit i, as its release does.
func (h *ExpiryHeap) Remove(i int) { h.c.forget(h.ps[i]) }

// Stop stops the heap's timer, as Close does.
func (h *ExpiryHeap) Stop() {
	h.c.mu.Lock()
	h.c.expiryStopLocked()
	h.c.mu.Unlock()
}

// Permit returns permit i.
func (h *ExpiryHeap) Permit(i int) *Permit { return h.ps[i] }

// Check returns an error if an entry is earlier than its parent, an
// entry's index is not its place, or the timer would fire after the root's
// deadline (earlier is allowed: the root it was set for may have left).
func (h *ExpiryHeap) Check() error {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	e := &h.c.exp
	for i, p := range e.heap {
		if p.expIdx != i {
			return fmt.Errorf("entry %d has index %d", i, p.expIdx)
		}
		if i > 0 && p.expAt.Before(e.heap[(i-1)/2].expAt) {
			return fmt.Errorf("entry %d (%v) is earlier than its parent (%v)", i, p.expAt, e.heap[(i-1)/2].expAt)
		}
	}
	if len(e.heap) > 0 && (e.at.IsZero() || e.at.After(e.heap[0].expAt)) {
		return fmt.Errorf("timer set for %v, root at %v", e.at, e.heap[0].expAt)
	}
	return nil
}

// Root returns the number of the permit at the root, or -1 if the heap is
// empty.
func (h *ExpiryHeap) Root() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if len(h.c.exp.heap) == 0 {
		return -1
	}
	for i, p := range h.ps {
		if p == h.c.exp.heap[0] {
			return i
		}
	}
	return -1
}

// Expired returns how many leases the heap ended.
func (h *ExpiryHeap) Expired() uint64 { return h.c.st.expired.Load() }

// TurnUnread passes the turn to a waiter behind the head (the head
// leaves) and then settles a call that carried the waiter without granting
// it, while the waiter reads neither message, as a waiter that its
// goroutine has not run yet. The returned channel gets whether the message
// the waiter then reads still tells it that its turn came.
func TurnUnread() <-chan bool {
	c, ln, h, f := lineOfTwo()
	out := make(chan bool, 1)
	go func() {
		c.mu.Lock()
		c.removeLocked(ln, h)
		c.mu.Unlock()
		c.settle(ln, []*waiter{f}, reply{sent: time.Now()})
		r := <-f.got
		out <- r.turn && !r.granted
	}()
	return out
}
