package redislane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrCoolingDown is the Err of a [*LateError] for a lane closed by a
// cooldown ([Weighted.Cooldown]) until after the caller's deadline.
var ErrCoolingDown = errors.New("redislane: lane cooling down after an overload")

// ErrWindowFull is the Err of a [*LateError] for a [Tokens] lane whose
// window makes room for the caller's tokens only after its deadline.
var ErrWindowFull = errors.New("redislane: window's budget spent")

// ErrQuarantined is the Err of a [*LateError] for a [Tokens] lane whose
// quarantine ([WithQuarantine]: its state in Redis is new, or was lost)
// ends only after the caller's deadline.
var ErrQuarantined = errors.New("redislane: lane in quarantine (its state in Redis is new or was lost)")

// LateError is the error of an acquire that fails at once, rather than at
// its context's deadline, because what it waits for comes after it: its
// lane's reopening from a cooldown ([ErrCoolingDown]), or room in a
// [Tokens] lane's window ([ErrWindowFull]) or the end of its quarantine
// ([ErrQuarantined]). Nothing is held. It matches
// its Err and context.DeadlineExceeded (errors.Is). Through a
// lanequeue.Queue it is the cause of the lane's LaneError (errors.As
// reaches it).
type LateError struct {
	Lane string // the lane's name
	// RetryAfter is the time from the refusal until the lane can grant,
	// as far as this instance knows: counted from the send time of the
	// call that read it, so never later than the server has it (a
	// window's room can come earlier, by another caller's refund).
	RetryAfter time.Duration
	Err        error // ErrCoolingDown, ErrWindowFull or ErrQuarantined
}

func (e *LateError) Error() string {
	cause := "<nil>"
	if e.Err != nil {
		cause = strings.TrimPrefix(e.Err.Error(), "redislane: ")
	}
	return fmt.Sprintf("redislane: lane %q: %s (retry after %v): %v", e.Lane, cause, e.RetryAfter, context.DeadlineExceeded)
}

// Unwrap returns Err and context.DeadlineExceeded.
func (e *LateError) Unwrap() []error { return []error{e.Err, context.DeadlineExceeded} }

// RetryIn returns RetryAfter: a lanequeue.Queue reads it into its
// LaneError's RetryAfter.
func (e *LateError) RetryIn() time.Duration { return e.RetryAfter }

// news tells waiters that something they wait on changed: ch returns a
// channel that the next tell closes (and tell makes the one after it). A
// waiter takes the channel, then looks at the state, then waits on the
// channel, so that a change after its look is never missed. The zero news
// is ready to use.
type news struct {
	mu sync.Mutex
	c  chan struct{} // nil until a waiter asks, and after a tell
}

// ch returns the channel the next tell closes.
func (n *news) ch() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		n.c = make(chan struct{})
	}
	return n.c
}

// tell wakes the waiters on the current channel, after the state changed.
func (n *news) tell() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c != nil {
		close(n.c)
		n.c = nil
	}
}

// coolState is what an instance knows of its lane's cooldown: the
// reopening read from Redis, on the local clock.
type coolState struct {
	mu    sync.Mutex
	at    time.Time // send time of the call it was read by (later calls win)
	until time.Time // the reopening, or zero: open
	later news      // told when until moves later
}

// newsCh returns a channel closed when the instance learns of a later
// reopening.
func (s *coolState) newsCh() <-chan struct{} { return s.later.ch() }

// learn records what a call sent at sent read: the lane reopens left
// from the server's now (0: open). The reopening is counted from the send
// time, the earliest the server's now can have been, so that it is never
// later than the server's.
func (s *coolState) learn(sent time.Time, left time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.Before(s.at) {
		return // an older reading
	}
	s.at = sent
	var u time.Time
	if left > 0 {
		u = sent.Add(left)
	}
	if u.After(s.until) {
		defer s.later.tell() // once until is u
	}
	s.until = u
}

// refusal returns the error of a caller of lane whose context's deadline
// comes before the lane reopens, as far as the instance knows; nil
// otherwise.
func (s *coolState) refusal(ctx context.Context, lane string) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	s.mu.Lock()
	u := s.until
	s.mu.Unlock()
	if u.IsZero() || !dl.Before(u) {
		return nil
	}
	return &LateError{Lane: lane, RetryAfter: max(time.Until(u), 0), Err: ErrCoolingDown}
}

func (c *core) coolNews() <-chan struct{}                    { return c.cool.newsCh() }
func (c *core) learnCool(sent time.Time, left time.Duration) { c.cool.learn(sent, left) }
func (c *core) coolRefusal(ctx context.Context) error        { return c.cool.refusal(ctx, c.name) }
func (c *core) cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	if c.isClosed() {
		return 0, ErrClosed
	}
	limit, lterm := c.limitAndTerm()
	left, err := coolCall(ctx, c.client, c.cfg, c.callCtx, &c.cool, c.metaKey, c.name, limit, c.kindName(), lterm, d)
	if err != nil && !errors.Is(err, ErrCapacityMismatch) && !errors.Is(err, errBadReply) && ctx.Err() == nil {
		c.st.redisErrs.Add(1)
	}
	return left, err
}

// coolCall runs the cooldown script of the lane name (meta key mk) for d,
// records what it read in cs, and returns the time until the lane
// reopens from the cooldown.
func coolCall(ctx context.Context, client redis.UniversalClient, cfg config,
	callCtx func(context.Context, time.Duration) (context.Context, context.CancelFunc),
	cs *coolState, mk, name string, limit int64, kind string, lterm int64, d time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dms := int64(0)
	if d > 0 {
		// Never shorter than d, rounded up without d+1ms-1, which
		// overflows to a negative d (set nothing) near the largest d.
		dms = int64(d / time.Millisecond)
		if d%time.Millisecond != 0 {
			dms++
		}
	}
	cctx, cancel := callCtx(ctx, cfg.margin())
	defer cancel()
	sent := time.Now()
	v, err := coolScript.Run(cctx, client, []string{mk},
		limit, kind, ms(cfg.lease), ms(cfg.quarantine), lterm, dms).Int64Slice()
	switch {
	case err != nil:
		return 0, fmt.Errorf("redislane: cooldown %q: %w", name, err)
	case len(v) != 2:
		return 0, fmt.Errorf("%w: cooldown script returned %v", errBadReply, v)
	case v[0] == stMismatch:
		what := "capacity"
		if strings.HasPrefix(kind, "tokens:") {
			what = "budget"
		}
		return 0, mismatchError(name, what, v[1], kind, limit)
	}
	left := msDur(v[1])
	cs.learn(sent, left)
	return left, nil
}
