package redislane

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/hist"
)

// Bounds of the wait between two calls of a waiter, and of the backoff
// after a failed call. 5 ms keeps a waiter from hammering Redis; 250 ms
// bounds how long a waiter whose wake-up message was lost sleeps past a
// free permit.
const (
	minWait = 5 * time.Millisecond
	maxWait = 250 * time.Millisecond
)

// core is what a Weighted and a Keyed share: a lane in Redis, the local
// lines of waiters (one per bucket), and the refresher of the permits and
// queued ids of this instance.
type core struct {
	client   redis.UniversalClient
	name     string
	keyed    bool  // a Keyed lane (a bucket per key), or a Weighted one
	capacity int64 // the capacity, or the per-key capacity (a fleet lane's: at creation)
	cfg      config
	fleet    *fleet      // a Fleet's lane: its limit and leadership; nil otherwise
	seq      *seqScripts // a Keyed made WithSequenceOrder: its scripts; nil for FIFO
	ord      *ordScripts // a Weighted made WithPriorities or WithFairShare: its scripts; nil for FIFO
	fairKey  string      // under WithFairShare: the key of the groups' records (the bucket's fifth)

	prefix  string // {lanes:<name>}, or {lanes:<tag>}{<name>} WithHashTag
	metaKey string
	channel string
	hub     *hub

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	refDone   chan struct{} // closed when the refresher returns
	kick      chan struct{} // wakes the refresher; buffered 1

	closeBy atomic.Pointer[time.Time] // set by Close: no call of the lane outlasts it

	mu      sync.Mutex // protects the fields below, and waiter.{id,rk,lastQueued,due}, Permit.due
	closed  bool
	bgDone  bool                 // set by Close once the waiters left: no new background call
	lines   map[string]*line     // local waiters by bucket; a line exists while it has waiters
	permits map[string]*Permit   // permits out whose lease is kept, by id
	queued  map[string]*waiter   // head waiters queued in Redis, by id
	rel     map[string]*relQueue // releases waiting by bucket (its first key), while a release call of the bucket runs
	nwait   int                  // waiters in all lines
	drained chan struct{}        // after Close: closed when nwait drops to 0
	planned time.Time            // when the refresher means to wake (zero: only when kicked)
	retryAt time.Time            // after a failed refresh: not before this
	exp     expiry               // the permits out, by deadline

	held atomic.Int64 // weight of the permits of this instance that are out
	// holdsOut counts this instance's grants that went on a reorder hold
	// that ran out (WithReorderHold), as told by the grant's reply or message.
	holdsOut atomic.Uint64
	cool     coolState // the lane's cooldown, as last read
	st       counters
	tm       *hist.Timings // WithHistograms; nil: off. Immutable after newCore
	clk      hist.Clock    // the clock of tm's waits and holds

	// wg counts the calls and clean-ups that finish in the background after
	// their caller left: a waiter's, a TryAcquire's, a Release's. Close sets
	// bgDone (under mu) once the waiters left, and after that none starts,
	// so Close can wait for them.
	wg sync.WaitGroup
}

func newCore(client redis.UniversalClient, name string, keyed bool, capacity int64, opts []Option) (*core, error) {
	return newCoreFleet(client, name, keyed, false, capacity, opts)
}

func newCoreFleet(client redis.UniversalClient, name string, keyed, fleetLane bool, capacity int64, opts []Option) (*core, error) {
	if err := checkArgs(client, name, capacity); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if !keyed {
		what := "Weighted"
		if fleetLane {
			what = "Fleet"
		}
		if err := cfg.refuseOrder(what); err != nil {
			return nil, err
		}
	}
	switch {
	case keyed:
		if err := cfg.refusePlaceOrder("Keyed"); err != nil {
			return nil, err
		}
	case cfg.quotaSet:
		if err := cfg.refusePlaceOrder("WithQuota"); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.quotaSet && keyed:
		return nil, errQuotaOnly("Keyed")
	case cfg.quotaSet && fleetLane:
		return nil, errQuotaOnly("Fleet")
	}
	prefix := keyPrefix(name, cfg)
	c := &core{
		client:   client,
		name:     name,
		keyed:    keyed,
		capacity: capacity,
		cfg:      cfg,
		prefix:   prefix,
		metaKey:  prefix + ":meta",
		channel:  prefix + ":wake",
		done:     make(chan struct{}),
		refDone:  make(chan struct{}),
		kick:     make(chan struct{}, 1),
		lines:    make(map[string]*line),
		permits:  make(map[string]*Permit),
		queued:   make(map[string]*waiter),
		rel:      make(map[string]*relQueue),
	}
	if cfg.histograms {
		c.tm = new(hist.Timings)
	}
	if fleetLane {
		c.fleet = newFleet(c)
	}
	if cfg.seqOrder {
		c.seq = newSeqScripts(cfg)
	}
	if cfg.ordered() && !keyed {
		c.ord = newOrdScripts(cfg, fleetLane)
		if cfg.fairSet {
			c.fairKey = prefix + ":g:r"
		}
	}
	c.hub = joinHub(client, c.channel)
	go c.refreshLoop()
	if c.fleet != nil {
		go c.fleetLoop()
	}
	return c, nil
}

// keyPrefix is the start of every key of lane name: {lanes:<name>}, or
// WithHashTag {lanes:<tag>}{<name>}. A name holds no brace, so the two
// forms never give two lanes one key, and Redis hashes only the first
// braces' content: the name's, or the tag's.
func keyPrefix(name string, cfg config) string {
	if cfg.hashTagSet {
		return "{lanes:" + cfg.hashTag + "}{" + name + "}"
	}
	return "{lanes:" + name + "}"
}

// limit is the capacity the instance enforces locally (weights above it
// are refused at once): the capacity, or a fleet lane's limit as last
// read from Redis. Grants are decided in Redis, against the stored limit.
func (c *core) limit() int64 {
	l, _ := c.limitAndTerm()
	return l
}

// tooHeavyNow is the error of a call of n permits on a fleet lane whose
// limit fell to limit below it.
func (c *core) tooHeavyNow(n, limit int64) error {
	return fmt.Errorf("%w: %d permits, and the fleet limit of %q is now %d", ErrTooHeavy, n, c.name, limit)
}

// shrinkNews returns a channel closed when a fleet lane's limit read next
// falls, or nil for another lane (a receive from it waits for ever).
func (c *core) shrinkNews() <-chan struct{} {
	if c.fleet == nil {
		return nil
	}
	return c.fleet.shrinkNews()
}

// limitAndTerm returns limit and the term in which a fleet lane's limit
// was written (0 for other lanes), read together.
func (c *core) limitAndTerm() (int64, int64) {
	if c.fleet != nil {
		r := c.fleet.read.Load()
		return r.limit, r.term
	}
	return c.capacity, 0
}

// oldestFence returns the lowest fence among the permits this instance
// holds (a quota block counts as one), or 0 if it holds none.
func (c *core) oldestFence() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var low int64
	for _, p := range c.permits {
		if low == 0 || p.fence < low {
			low = p.fence
		}
	}
	return low
}

// mismatchError is the ErrCapacityMismatch of the lane name, whose
// instance has kind (as stored in the meta hash) and limit (its capacity,
// a Tokens' budget: what) while Redis holds stored for it. A script
// refuses when the limits differ or when the stored kind is not this one
// (another kind, order, hold or window). With equal limits it is the
// kind, and so it is for a fleet lane, whose limit is the stored one; the
// message then says so rather than naming two limits that do not differ.
func mismatchError(name, what string, stored int64, kind string, limit int64) error {
	differs := "kind or order" // a hold is part of a sequence order
	if what == "budget" {
		differs = "kind or window" // a Tokens has no order
	}
	switch {
	case strings.HasPrefix(kind, "fleet"):
		return fmt.Errorf("%w: %q is in Redis as a lane of another %s; this is a %s lane",
			ErrCapacityMismatch, name, differs, kind)
	case stored == limit:
		return fmt.Errorf("%w: %q is in Redis as a lane of another %s (its %s, %d, is this %s lane's)",
			ErrCapacityMismatch, name, differs, what, stored, kind)
	}
	return fmt.Errorf("%w: %q has %s %d in Redis; this %s lane has %d",
		ErrCapacityMismatch, name, what, stored, kind, limit)
}

// kindName is the kind stored in the lane's meta hash.
func (c *core) kindName() string {
	if c.ord != nil {
		return c.ord.kind
	}
	if c.fleet != nil {
		return "fleet"
	}
	if !c.keyed {
		return "global"
	}
	if c.seq != nil {
		return c.seq.kind
	}
	return "keyed"
}

// eachAsks tells a lane whose waiters each ask Redis themselves, with no
// local line in front and no batch: a sequenced Keyed, an ordered
// Weighted. The order is Redis's, over all the instances' waiters.
func (c *core) eachAsks() bool { return c.seq != nil || c.ord != nil }

// scriptKeys are the keys of a call of a script on bucket rk, after the
// ones given: the bucket's four, and under WithFairShare the groups'
// records.
func (c *core) scriptKeys(rk [4]string, first ...string) []string {
	keys := append(first, rk[:]...)
	if c.fairKey != "" {
		keys = append(keys, c.fairKey)
	}
	return keys
}

func (c *core) bucketKeys(key string) [4]string {
	b := c.prefix + ":g:"
	if c.keyed {
		b = c.prefix + ":k:" + key + ":"
	}
	return [4]string{b + "h", b + "q", b + "x", b + "d"}
}

// check returns the error of a weight the lane can never grant. It counts
// nothing: acquire counts the refusal, TryAcquire's false counts in no
// counter (see semaphore.Counters).
func (c *core) check(n int64) error {
	switch {
	case n <= 0:
		return ErrInvalidWeight
	case n > c.limit():
		return ErrTooHeavy
	}
	return nil
}

// quit returns the error of a waiter that stops waiting: ctx's error (with
// the last Redis error, if the last call failed), or ErrClosed.
func (c *core) quit(ctx context.Context, lastErr error) error {
	err := ctx.Err()
	if err == nil {
		c.st.failed.Add(1) // a waiter that Close sent away
		return ErrClosed
	}
	c.st.cancelled.Add(1)
	if lastErr != nil {
		return fmt.Errorf("%w (last Redis error: %w)", err, lastErr)
	}
	return err
}

// pause sleeps for d unless ctx ends or the lane closes first.
func (c *core) pause(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, d, c.done)
}

func (c *core) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// startBackground counts a call that Close must wait for, unless Close
// has begun waiting (then it returns false and the call must not be made).
func (c *core) startBackground() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bgDone {
		return false
	}
	c.wg.Add(1)
	return true
}

func (c *core) endBackground() { c.wg.Done() }

// close refuses later acquires, sends the waiters away with ErrClosed, ends
// every permit out (cause ErrClosed; their leases are left to run out),
// waits for the waiters, the background calls and the refresher, and leaves
// the hub. Every call in flight ends within a third of the lease, and every
// call begun after Close started within one margin of its start (see
// callCtx).
func (c *core) close() {
	c.closeOnce.Do(func() {
		by := time.Now().Add(c.cfg.margin())
		c.closeBy.Store(&by)
		c.mu.Lock()
		c.closed = true
		close(c.done)
		var drained chan struct{}
		if c.nwait > 0 {
			drained = make(chan struct{})
			c.drained = drained
		}
		c.mu.Unlock()
		if drained != nil {
			<-drained // waiters leave at once: their calls go on in wg
		}
		// The waiters are gone, so every grant has registered its permit
		// (or, seeing closed, released it), and no background call starts
		// after this.
		c.mu.Lock()
		c.bgDone = true
		out := make([]*Permit, 0, len(c.permits))
		for _, p := range c.permits {
			out = append(out, p)
		}
		c.mu.Unlock()
		for _, p := range out {
			p.end(ErrClosed, nil)
		}
		c.mu.Lock()
		c.expiryStopLocked() // every permit ended, and no grant comes after closed
		c.mu.Unlock()
		c.kickRefresher()
		c.wg.Wait()
		c.hub.leave(c.channel, by)
		<-c.refDone
		if c.fleet != nil {
			<-c.fleet.loopDone // it resigns the leadership, within one margin
		}
	})
}

// retryable tells a failure worth another try (the network, a server busy,
// loading or failing over) from one that will not go away: an error reply
// such as OOM or NOPERM, a reply the scripts cannot have sent, or a client
// that has been closed.
func retryable(err error) bool {
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, errBadReply) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := re.Error()
	for _, p := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK", "NOREPLICAS", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// errBadReply marks a reply that the scripts cannot have sent: retrying
// would not change it.
var errBadReply = errors.New("redislane: malformed script reply")

// nextBackoff doubles a retry delay, within [minWait, maxWait].
func nextBackoff(d time.Duration) time.Duration { return min(max(2*d, minWait), maxWait) }

// jitter spreads d over [0.75d, 1.25d).
func jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(rand.Int64N(int64(d)/2+1))
}

// newID returns a request's or a permit's id: 130 random bits, unique
// across the fleet. Each id is drawn on its own, though a process's random
// prefix and a counter would cost less (about 3% of an instance's CPU per
// grant in fleetsim): an acquire is idempotent by its id, and two copies of
// one process (a VM restored twice from one snapshot) would repeat a
// counter and its prefix, so each would hold a permit that Redis counts
// once. crypto/rand's source is reseeded when a VM is restored.
func newID() string { return crand.Text() }
