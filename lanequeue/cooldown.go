package lanequeue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/semaphore"
)

// Cooldown pauses admission on lane for d from now, for every caller (a
// provider's retry time): calls keep their place and wait holding their
// permits (listed by [Queue.Holders], and by [Queue.Waiters] on the
// lane), or fail at once with a [*LaneError] if their deadline comes
// first; d <= 0 pauses nothing. A lane shared by a fleet that pauses for
// all of it (one with a method
// Cooldown(context.Context, time.Duration) (time.Duration, error), as
// redislane's lanes have) is paused there too, under ctx, after the local
// pause; its error is returned. A call's wait for a pause is reported to
// [Hooks.OnSlowWait] as a wait for the cooling lane ([Event] Cooldown);
// it counts in no lane's [semaphore.Stats] (Waited, Cancelled), which are
// the lane's own line's, but in the lane's [LaneStats] CooldownWaiters while
// it waits, and CooldownRefused if its deadline comes first. See
// docs/api-details.md.
func (q *Queue[K]) Cooldown(ctx context.Context, lane string, d time.Duration) error {
	if ctx == nil {
		panic("lanequeue: nil Context") // as every call that takes one (a fleet lane's pause would use it)
	}
	ref, ok := q.tbl().byName[lane]
	if !ok {
		return fmt.Errorf("lanequeue: unknown lane %q: %w", lane, semaphore.ErrInvalidConfig)
	}
	if d <= 0 {
		return nil // no pause
	}
	// The end, in nanoseconds of the clock, saturated: a d that reaches
	// past the year 2262 pauses until then (for good, in practice).
	now := q.now().UnixNano()
	u := int64(math.MaxInt64)
	if now < 0 || d < time.Duration(math.MaxInt64-now) { // a clock before 1970 cannot overflow
		u = now + int64(d)
	}
	for {
		old := ref.e.cool.Load()
		if (old != 0 && u <= old) || ref.e.cool.CompareAndSwap(old, u) { // 0: never paused
			break
		}
	}
	q.cooling.Store(true)
	if f, ok := ref.e.lane.(fleetCooler); ok {
		if _, err := f.Cooldown(ctx, d); err != nil {
			return fmt.Errorf("lanequeue: lane %q: fleet cooldown: %w", lane, err)
		}
	}
	return nil
}

// Exhaust tells a token lane ([NewTokenLane]) that the provider has
// refused for its budget: the provider's window is full, whatever the
// lane counted (calls in flight may use more than their estimates, and
// the lane learns it only as they settle). The lane is charged up to its
// budget in the current second, so it admits again only as its older
// seconds leave the window, and a refund of a call charged in that second
// or before (the refused call's Settle to 0) gives nothing back. Call it
// beside [Queue.Cooldown] for a refusal of that lane's budget only (a
// remaining-tokens header of 0, as lanehttp's Verdict.TokensSpent says):
// after a refusal of another limit it would hold the lane back for a
// window for nothing. Another lane (a fleet's, a rate limiter's) keeps no
// window of its own to fill and is left as it is. See
// docs/api-details.md.
func (q *Queue[K]) Exhaust(lane string) error {
	ref, ok := q.tbl().byName[lane]
	if !ok {
		return fmt.Errorf("lanequeue: unknown lane %q: %w", lane, semaphore.ErrInvalidConfig)
	}
	if tl, ok := ref.e.lane.(*tokenLane[K]); ok {
		tl.fill()
	}
	return nil
}

// fleetCooler is a lane whose cooldown pauses a whole fleet (redislane's
// lanes).
type fleetCooler interface {
	Cooldown(ctx context.Context, d time.Duration) (time.Duration, error)
}

// errCooling is the cause in Check's LaneError for a lane that cools
// down.
var errCooling = errors.New("cooling down after an overload")

// SetClock sets the clock of cooldowns and later token lanes (for tests).
func (q *Queue[K]) SetClock(c semaphore.Clock) { q.clk = c }

// now reads the queue's clock (the system clock, or a test's).
func (q *Queue[K]) now() time.Time {
	if q.clk == nil {
		return time.Now()
	}
	return q.clk.Now()
}

// timer returns a timer of the queue's clock.
func (q *Queue[K]) timer(d time.Duration) clock.Timer {
	if q.clk == nil {
		return clock.Real{}.NewTimer(d)
	}
	return q.clk.NewTimer(d)
}

// cooling returns the lane of g whose cooldown ends last after now, and
// when (in nanoseconds of the queue's clock); nil if none cools down.
func (g *grant[K]) cooling(now int64) (e *laneEntry[K], until int64) {
	e, _, until = g.coolingAt(now)
	return e, until
}

// coolingAt is cooling, also returning the lane's index in g.held().
func (g *grant[K]) coolingAt(now int64) (e *laneEntry[K], at int, until int64) {
	hs := g.held()
	for i := range hs {
		if c := hs[i].e.cool.Load(); c != 0 && c > now && (e == nil || c > until) { // 0: never paused
			e, at, until = hs[i].e, i, c
		}
	}
	return e, at, until
}

// coolErr returns the error of a call whose wait for e's cooldown, which
// ends at until, is cut by cause; now is the queue's clock.
func coolErr[K comparable](e *laneEntry[K], key K, now, until int64, cause error) error {
	le := &LaneError{Lane: e.name, Kind: e.kind, Err: fmt.Errorf("%w: %w", errCooling, cause), RetryAfter: time.Duration(until - now)}
	if e.kind == Keyed {
		le.Key = key
	}
	return le
}

// checkCool fails a call whose context's deadline comes before a lane of
// g reopens; nil when no lane of g cools down, or ctx has time to wait.
func (q *Queue[K]) checkCool(ctx context.Context, key K, g *grant[K]) error {
	now := q.now().UnixNano()
	e, until := g.cooling(now)
	if e == nil {
		return nil
	}
	if d, ok := ctx.Deadline(); ok && d.Before(time.Unix(0, until)) {
		e.coolRefused.Add(1)
		return coolErr(e, key, now, until, context.DeadlineExceeded)
	}
	return nil
}

// coolHolding is waitCool for a call that holds g's first plain lanes:
// if the clock (a test's, code of the program) panics, the call gives
// them back and is counted out before the panic goes on (unwind).
func (q *Queue[K]) coolHolding(ctx context.Context, key K, g *grant[K], plain int, turn call.Turn) (err error) {
	done := false
	defer func() {
		if !done {
			q.unwind(g, plain)
		}
	}()
	err = q.waitCool(ctx, key, g, turn)
	done = true
	return err
}

// waitCool waits until no lane of g cools down, or fails as checkCool
// does, or with the context's error if it ends first, or semaphore.ErrClosed if the
// queue closes. The caller holds g's plain lanes and gives them back on
// failure. While it waits, the call is listed as waiting for the cooling
// lane, holding its plain lanes (waitFor): it holds permits, which
// Holders must show, as it does for a call that waits for a later lane.
// A call that waited is reported to the hooks as a wait for the cooling
// lane it was listed for last, timed from the start of its wait for the
// cooldowns, as a wait for a lane is; one sent away by the queue's Close
// is not (a closed queue's refusal, which no lane counts: see Event).
func (q *Queue[K]) waitCool(ctx context.Context, key K, g *grant[K], turn call.Turn) error {
	listed := -1 // the cooling lane the call is listed for: a pause extended leaves the listing (its Since) as it is
	since := int64(noWait)
	var on *laneEntry[K] // the lane whose CooldownWaiters counts the call
	defer func() {
		if on != nil {
			on.coolWaiters.Add(-1)
		}
	}()
	for {
		now := q.now().UnixNano()
		e, at, until := g.coolingAt(now)
		if e == nil {
			return q.cooled(key, g, listed, nil, since, turn)
		}
		if d, ok := ctx.Deadline(); ok && d.Before(time.Unix(0, until)) {
			e.coolRefused.Add(1)
			return q.cooled(key, g, listed, coolErr(e, key, now, until, context.DeadlineExceeded), since, turn)
		}
		if e != on {
			if on != nil {
				on.coolWaiters.Add(-1)
			}
			e.coolWaiters.Add(1)
			on = e
		}
		if at != listed {
			stamp := q.waitFor(key, g, at, true)
			if since == noWait {
				since = stamp
			}
			listed = at
		}
		t := q.timer(time.Duration(until - now))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return q.cooled(key, g, listed, coolErr(e, key, now, until, ctx.Err()), since, turn)
		case <-q.done:
			t.Stop()
			return semaphore.ErrClosed // not reported: see above
		}
	}
}

// cooled reports the end of a wait for cooldowns (waitCool) to the hooks,
// if the call waited (since is not noWait), as the wait for lane i of g,
// and returns err.
func (q *Queue[K]) cooled(key K, g *grant[K], i int, err error, since int64, turn call.Turn) error {
	if since == noWait {
		return err
	}
	if hk := q.watch.hooks.Load(); hk != nil {
		q.waitedCool(hk, key, g, i, err, since, g.held()[i].e.groupOf(key, turn))
	}
	return err
}
