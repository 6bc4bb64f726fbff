package redislane

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/semaphore"
)

// WithPriorities orders a [Weighted]'s (or a [Fleet]'s) waiters across
// the fleet by [semaphore.Priority], aged by step (1 ms or more: a
// waiter's band rises by one per whole step it has waited, on the Redis
// server's clock), as semaphore.WithPriorities does in one process: see
// "Priorities and fair share" in the package documentation. A [Keyed] or
// a [Tokens] lane, and a Weighted with [WithQuota], refuse it (an error
// wrapping [ErrInvalidConfig]).
func WithPriorities(step time.Duration) Option {
	return func(c *config) { c.prioStep, c.prioSet = step, true }
}

// WithFairShare orders a [Weighted]'s (or a [Fleet]'s) waiters of one
// band across the fleet by [semaphore.Group], granting the groups that
// wait permits in proportion to weight(group), or equally if weight is
// nil, as semaphore.WithFairShare does in one process: see "Priorities
// and fair share" in the package documentation. weight is called by the
// instance once per Acquire, concurrently, without a lock; a result
// outside [1, 1000] fails that call with [ErrInvalidConfig]. Every
// instance should give a group the same weight. A [Keyed] or a [Tokens]
// lane, and a Weighted with [WithQuota], refuse it.
func WithFairShare(weight func(group string) int) Option {
	return func(c *config) { c.fairSet, c.fairWeight = true, weight }
}

// ordered tells a lane made with priorities or fair share.
func (c config) ordered() bool { return c.prioSet || c.fairSet }

// checkPlaceOrder is newConfig's check of WithPriorities.
func (c config) checkPlaceOrder() error {
	if c.prioSet && c.prioStep < time.Millisecond {
		return fmt.Errorf("redislane: WithPriorities(%v): the step must be 1ms or more (the resolution of the lane's clock): %w", c.prioStep, ErrInvalidConfig)
	}
	return nil
}

// refusePlaceOrder is the refusal of WithPriorities and WithFairShare by
// a lane whose waiters they cannot order.
func (c config) refusePlaceOrder(what string) error {
	if c.ordered() {
		return fmt.Errorf("redislane: WithPriorities and WithFairShare order the waiters of a global lane (a Weighted or a Fleet, without WithQuota): a %s lane refuses them: %w", what, ErrInvalidConfig)
	}
	return nil
}

// fairScale is the length of a request of one permit in a group of weight
// 1, in units of virtual time, as in package semaphore: 720720 is
// divisible by every weight from 1 to 16.
const fairScale = 720720

// maxGroupWeight is the largest weight of a WithFairShare group.
const maxGroupWeight = 1000

// maxTag bounds a fair-share tag: the scripts count in doubles, exact up
// to 2^53. Tags saturate there (after some 10^10 turns without a break in
// the queue); equal tags are served in arrival order.
const maxTag = 1 << 53

// place is a caller's place in line, as its call's options give it: its
// number on a sequenced Keyed, its band and its fair-share group (and the
// length of its request in virtual time) on an ordered Weighted. The zero
// place asks for nothing.
type place struct {
	num   int64  // Sequence, on a sequenced Keyed
	band  int64  // Priority, under WithPriorities
	group string // Group, under WithFairShare
	flen  int64  // the request's length: n * fairScale / weight(group)
}

// errPlaceOptions refuses per-call options that an ordered global lane
// cannot honour; errFIFOOptions those given to a FIFO one.
var (
	errFIFOOptions  = fmt.Errorf("redislane: a global fleet lane made without WithPriorities or WithFairShare is FIFO: it takes no per-call option: %w", ErrInvalidConfig)
	errPlaceOptions = fmt.Errorf("redislane: a global fleet lane takes semaphore.Priority under WithPriorities and semaphore.Group under WithFairShare, and no other per-call option: %w", ErrInvalidConfig)
	errPriority     = fmt.Errorf("redislane: Priority out of [-1000000, 1000000]: %w", ErrInvalidConfig)
)

// placeOf reads the options of a global lane's call of n permits into its
// place. A lenient call (a lanequeue.Queue's) drops what the lane does not
// order by; any other refuses it.
func (c *core) placeOf(n int64, opts []semaphore.AcquireOption) (place, error) {
	var pl place
	if len(opts) == 0 {
		return pl, c.fairPlace(&pl, n)
	}
	cl, bad := call.Read(opts)
	if bad != call.BadNone {
		return pl, errPriority
	}
	t := cl.Turn
	if c.cfg.prioSet {
		pl.band, t.Priority = int64(t.Priority), 0
	}
	if c.cfg.fairSet {
		pl.group, t.Group = t.Group, ""
	}
	if !cl.Lenient && (t != (call.Turn{}) || cl.WeightSet || cl.LaneWeight) {
		if c.ord == nil {
			return place{}, errFIFOOptions
		}
		return place{}, errPlaceOptions
	}
	return pl, c.fairPlace(&pl, n)
}

// fairPlace sets the length of pl's request under WithFairShare.
func (c *core) fairPlace(pl *place, n int64) error {
	if !c.cfg.fairSet {
		return nil
	}
	unit := int64(fairScale)
	if c.cfg.fairWeight != nil {
		w := c.cfg.fairWeight(pl.group)
		if w < 1 || w > maxGroupWeight {
			return fmt.Errorf("redislane: WithFairShare: weight of group %q is %d, want 1 to %d: %w", pl.group, w, maxGroupWeight, ErrInvalidConfig)
		}
		unit = fairScale / int64(w)
	}
	pl.flen = maxTag
	if n <= maxTag/unit {
		pl.flen = n * unit
	}
	return nil
}

// ordScripts are the scripts of a Weighted (or Fleet) made with
// WithPriorities or WithFairShare: the bodies of the FIFO scripts run over
// the order library (ordLib), which places each waiter in the Redis queue
// by the lane's order as it joins. The FIFO scripts are not touched by it.
type ordScripts struct {
	kind                            string // the kind stored in the meta hash
	acquire, release, refres, fleet *redis.Script
}

func newOrdScripts(cfg config, fleetLane bool) *ordScripts {
	var step int64 // µs; 0: no priorities
	if cfg.prioSet {
		step = int64(cfg.prioStep / time.Microsecond)
	}
	fair := 0
	if cfg.fairSet {
		fair = 1
	}
	kind := "global"
	if fleetLane {
		kind = "fleet"
	}
	kind += ":ord:" + strconv.FormatInt(step, 10) + ":" + strconv.Itoa(fair)
	lib := prelude + "\nlocal STEP, FAIR = " + strconv.FormatInt(step, 10) + ", " + strconv.Itoa(fair) + "\nlocal MAXTAG = " + strconv.FormatInt(maxTag, 10) + "\n" + ordLib
	return &ordScripts{
		kind:    kind,
		acquire: redis.NewScript(lib + ordAcquireBody),
		release: redis.NewScript(lib + releaseBody),
		refres:  redis.NewScript(lib + refreshBody),
		fleet:   redis.NewScript(lib + fleetBody),
	}
}
