package redislane

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/internal/permit"
	"github.com/sessionlane/lanes/semaphore"
)

// DefaultWindow is the window of a [Tokens] lane when no [WithWindow] is
// given: the providers' minute and two seconds, as lanequeue's token lane
// counts. A charge is made on the Redis server's clock and the call
// reaches the provider some milliseconds later, where it is counted; a
// window exactly the provider's lets a call charged as an old one leaves
// the fleet's window arrive within the provider's window of it
// (cmd/fleetsim -provider measured 429s from that alone, and none with the
// window 2% longer: docs/benchmarks-fleet.md).
const DefaultWindow = 62 * time.Second

// minWindow keeps a window's arithmetic in whole milliseconds with room to
// spare.
const minWindow = 10 * time.Millisecond

// WithWindow sets the window of a [Tokens] lane (default
// [DefaultWindow]): a charge counts against the budget from its time on
// the server's clock until one window later. It must be a whole number of
// milliseconds, at least 10 ms; every instance of the lane must use the
// same (else [ErrCapacityMismatch]). It is ignored by the other lanes.
func WithWindow(d time.Duration) Option { return func(c *config) { c.window, c.windowSet = d, true } }

// Tokens is a budget of a number of units (tokens, or requests at one
// each) in any window (a minute and two seconds by default) shared by every instance, in
// any process, that uses the same Redis and the same name: a provider's
// tokens or requests per minute, for a fleet. An acquire charges its
// estimate at once, in one script call, if the window has room; its
// [Charge] then settles the actual count after the call ([Charge.Settle]):
// a refund, or a debt that later callers wait out. See the package doc
// (Tokens) for the contract. A Tokens is safe for concurrent use; Close it
// to stop the calls it makes in the background.
type Tokens struct {
	client redis.UniversalClient
	name   string
	limit  int64
	cfg    config
	kind   string // "tokens:<window ms>"
	keys   []string
	cool   coolState

	head chan struct{} // holds one value while no caller of this instance asks Redis
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	bg   sync.WaitGroup // refunds of charges whose caller left
	shut bool           // under mu: Close began; no background call starts

	waiters                                       atomic.Int64
	acquired, waited, cancelled, rejected, failed atomic.Uint64
	settled, redisErrs                            atomic.Uint64
}

// NewTokens returns the instance of the Tokens lane name, of perWindow
// units in any window, on client. It makes no call to Redis. It fails as
// [NewWeighted] does (perWindow is the capacity), and for a [WithWindow]
// out of range, [WithHistograms] or [WithMaxHold], with an error wrapping
// [ErrInvalidConfig].
//
// Quarantine: after Redis lost the lane's state (and on its first use,
// which Redis cannot tell from a loss), the lane grants nothing for one
// window by default, as the charges that Redis forgot may still count
// with the provider. [WithQuarantine] shortens it, down to 0 for a lane
// that may admit up to one more window's budget after a loss.
func NewTokens(client redis.UniversalClient, name string, perWindow int64, opts ...Option) (*Tokens, error) {
	if err := checkArgs(client, name, perWindow); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.refuseOrder("Tokens"); err != nil {
		return nil, err
	}
	if err := cfg.refusePlaceOrder("Tokens"); err != nil {
		return nil, err
	}
	if cfg.quotaSet {
		return nil, errQuotaOnly("Tokens lane")
	}
	if !cfg.windowSet {
		cfg.window = DefaultWindow
	}
	if cfg.window < minWindow || cfg.window%time.Millisecond != 0 {
		return nil, fmt.Errorf("%w: window %v must be a whole number of milliseconds, at least %v", ErrInvalidConfig, cfg.window, minWindow)
	}
	if !cfg.quarantineSet {
		cfg.quarantine = cfg.window
	}
	if cfg.hashTagSet {
		return nil, fmt.Errorf("%w: WithHashTag: a Tokens lane takes no part in TryAcquireAll", ErrInvalidConfig)
	}
	if cfg.histograms {
		return nil, fmt.Errorf("%w: WithHistograms: a Tokens lane keeps no wait or hold times (its charges are never given back)", ErrInvalidConfig)
	}
	if cfg.maxHold != 0 {
		return nil, fmt.Errorf("%w: WithMaxHold: a Tokens lane's charges are not held (they leave the window by themselves)", ErrInvalidConfig)
	}
	p := "{lanes:" + name + "}"
	t := &Tokens{
		client: client,
		name:   name,
		limit:  perWindow,
		cfg:    cfg,
		kind:   "tokens:" + strconv.FormatInt(ms(cfg.window), 10),
		keys:   []string{p + ":meta", p + ":t:z", p + ":t:w"},
		head:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	t.head <- struct{}{}
	return t, nil
}

// Charge is an admission of a [Tokens] lane: its estimate, charged at
// [Charge.Time] on the server's clock, until [Charge.Settle] sets the
// actual count. A Charge needs no release: it leaves the window by itself.
type Charge struct {
	t  *Tokens
	id string
	n  int64
	at time.Time
	mu sync.Mutex // one Settle at a time: the last one's count stands
	// tok is the token of the permit that AsRateLane's lane returns for
	// the charge, through which a lanequeue Ticket.Settle finds it. A
	// charge needs no release, so the token's owner does nothing on one.
	tok permit.Token
	gen atomic.Uint64
}

// chargeOwner is a Charge as the owner of its permit's token.
type chargeOwner Charge

func (*chargeOwner) ReleaseToken(*permit.Token, int64) {}
func (*chargeOwner) CountDoubleRelease(*permit.Token)  {}

// permit returns a permit of the charge, for a lanequeue lane.
func (c *Charge) permit() semaphore.Permit {
	c.tok.Init((*chargeOwner)(c), -1, &c.gen)
	return semaphore.Permit(permit.Make(&c.tok, c.gen.Load(), c.n))
}

// chargeOf returns the charge a permit of AsRateLane's lane was made for,
// or nil.
func chargeOf(p semaphore.Permit) *Charge {
	t := permit.TokenOf(permit.Permit(p))
	if t == nil {
		return nil
	}
	if o, ok := permit.OwnerOf(t).(*chargeOwner); ok {
		return (*Charge)(o)
	}
	return nil
}

// Estimate returns the units the charge was admitted with.
func (c *Charge) Estimate() int64 { return c.n }

// Time returns when the charge was made, on the Redis server's clock (or
// when a queue moved it to, letting its call through after a wait for
// another lane: AsRateLane): it counts against the budget until Time plus
// the window.
func (c *Charge) Time() time.Time { return c.at }

// Settle sets what the charge counts to actual, the count the call used
// (absolute: a later Settle replaces an earlier one). Below the estimate,
// the difference is refunded while the charge is in the window (never
// more than it holds); above, the difference is charged now, a debt that
// later callers wait out. It makes one call, bounded by a fifth of the
// lease (the default lease: 2 s) and by ctx; a retried or repeated call
// changes nothing more. It fails for actual below 0 or above
// [semaphore.MaxCapacity] with [ErrInvalidWeight], and with ErrClosed
// after Close.
func (c *Charge) Settle(ctx context.Context, actual int64) error {
	if actual < 0 || actual > semaphore.MaxCapacity {
		return fmt.Errorf("redislane: settle %q: %d units: %w", c.t.name, actual, ErrInvalidWeight)
	}
	if c.t.isClosed() {
		return ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.t.settle(ctx, c.id, c.n, actual); err != nil {
		return err
	}
	c.t.settled.Add(1)
	return nil
}

// settle runs the settle script for id (estimate est) once.
func (t *Tokens) settle(ctx context.Context, id string, est, actual int64) error {
	cctx, cancel := context.WithTimeout(ctx, t.cfg.margin())
	defer cancel()
	_, err := settleScript.Run(cctx, t.client, t.keys, id, est, actual, ms(t.cfg.window)).Int64Slice()
	if err != nil {
		t.redisErrs.Add(1)
		return fmt.Errorf("redislane: settle %q: %w", t.name, err)
	}
	return nil
}

// restampScript moves the charge id to now, the time its call is let
// through after it waited for another lane (lanequeue's rate tail), if it
// is still in the window: its units stay, so the window's sum stays. The
// window ending now holds the charge whether at its old time or now, and
// every later one holds now: no window the lane still counts passes the
// budget for the move (lanequeue's restampTail has the argument). It
// grants nothing, so it ignores a cooldown and the quarantine. It replies
// {1, the charge's time (ms)}, or {0, 0} if the charge has left the window
// (or Redis lost it): it counts nothing then, and the call takes the lane
// again. Its arguments are the tokens script's, so that a hook that reads
// that script's grants reads its moves too.
//
// KEYS: meta, z, w
// ARGV: id, n, limit, kind, lease ms, quarantine ms, window ms
var restampScript = redis.NewScript(tokensPrelude + `
local id, win = ARGV[1], tonumber(ARGV[7])
window_drop(win)
local at = redis.call('ZSCORE', Z, id)
if not at then return {0, 0} end
at = math.max(tonumber(at), now)
redis.call('ZADD', Z, s(at), id)
keep(win)
return {1, at}
`)

// restamp moves c to now (restampScript), in one call bounded by a fifth
// of the lease and by ctx. It reports false if the charge has left the
// window; a failed call leaves it where it was and reports true.
func (t *Tokens) restamp(ctx context.Context, c *Charge) bool {
	if t.isClosed() {
		return true // Close ends nothing a call holds; the charge counts where it is
	}
	cctx, cancel := context.WithTimeout(ctx, t.cfg.margin())
	defer cancel()
	v, err := restampScript.Run(cctx, t.client, t.keys,
		c.id, c.n, t.limit, t.kind, ms(t.cfg.lease), ms(t.cfg.quarantine), ms(t.cfg.window)).Int64Slice()
	switch {
	case err != nil || len(v) != 2:
		t.redisErrs.Add(1)
		return true
	case v[0] == 0:
		return false
	}
	c.at = time.UnixMilli(v[1]) // before the queue lets the call through: nobody reads it yet
	return true
}

// tkReply is a reply of the tokens script.
type tkReply struct {
	status, a, cool int64
	quarantined     bool // tkWait: the lane is in its quarantine
	sent            time.Time
	err             error
}

func (t *Tokens) call(ctx context.Context, id string, n int64) tkReply {
	cctx, cancel := context.WithTimeout(ctx, t.cfg.margin())
	defer cancel()
	r := tkReply{sent: time.Now()}
	v, err := tokensScript.Run(cctx, t.client, t.keys,
		id, n, t.limit, t.kind, ms(t.cfg.lease), ms(t.cfg.quarantine), ms(t.cfg.window)).Int64Slice()
	switch {
	case err != nil:
		r.err = err
	case len(v) < 2 || (v[0] == tkWait && len(v) < 3):
		r.err = fmt.Errorf("%w: tokens script returned %v", errBadReply, v)
	default:
		r.status, r.a = v[0], v[1]
		if r.status == tkWait {
			r.cool = v[2]
			r.quarantined = len(v) > 3 && v[3] == 1
			t.cool.learn(r.sent, msDur(r.cool))
		} else if r.status == tkGranted {
			t.cool.learn(r.sent, 0)
		}
	}
	return r
}

// Acquire charges n units (an estimate, to be settled with
// [Charge.Settle]), waiting until the window has room for them and the
// lane is open. Callers of one instance ask Redis one at a time, in
// arrival order; instances do not queue in Redis, so a heavy charge can
// be passed by lighter ones of other instances (fleet-wide order is not
// kept). A waiter asks again when the reply's hint says the window has
// room (at most 250 ms later, jittered: another instance's refund may
// make room sooner). When the room, or the reopening from a cooldown,
// comes after ctx's deadline, Acquire fails at once with a [*LateError]
// that says when. It fails at once with [ErrInvalidWeight] for n <= 0,
// [ErrTooHeavy] for n above the budget, [ErrClosed] after Close, and
// [ErrCapacityMismatch] when Redis holds the lane with another budget,
// window or kind. Failed calls are retried with the same id (a retry
// never charges twice) while they fail for a passing reason; when ctx
// ends with a call's outcome unknown, what it may have charged is
// refunded in the background.
func (t *Tokens) Acquire(ctx context.Context, n int64) (*Charge, error) {
	if err := ctx.Err(); err != nil {
		t.cancelled.Add(1)
		return nil, err
	}
	switch {
	case n <= 0:
		t.rejected.Add(1)
		return nil, ErrInvalidWeight
	case n > t.limit:
		t.rejected.Add(1)
		return nil, ErrTooHeavy
	case t.isClosed():
		t.rejected.Add(1)
		return nil, ErrClosed
	}
	if err := t.cool.refusal(ctx, t.name); err != nil {
		t.cancelled.Add(1)
		return nil, err
	}
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	waited := false
	select {
	case <-t.head:
	default:
		waited = true
		news := t.cool.newsCh()
	wait:
		for {
			select {
			case <-t.head:
				break wait
			case <-news: // the lane is closed longer than the instance knew
				if err := t.cool.refusal(ctx, t.name); err != nil {
					t.cancelled.Add(1)
					return nil, err
				}
				news = t.cool.newsCh()
			case <-ctx.Done():
				t.cancelled.Add(1)
				return nil, ctx.Err()
			case <-t.done:
				t.failed.Add(1)
				return nil, ErrClosed
			}
		}
	}
	defer func() { t.head <- struct{}{} }()

	id := newID()
	backoff := time.Duration(0)
	var lastErr error
	for {
		r := t.call(ctx, id, n)
		if r.err != nil {
			t.redisErrs.Add(1)
			lastErr = r.err
			if ctx.Err() != nil || !retryable(r.err) {
				t.refundAsync(id, n) // the outcome is unknown
				if ctx.Err() != nil {
					t.cancelled.Add(1)
					return nil, fmt.Errorf("%w (last Redis error: %w)", ctx.Err(), lastErr)
				}
				t.rejected.Add(1)
				return nil, fmt.Errorf("redislane: acquire %q: %w", t.name, r.err)
			}
			backoff = nextBackoff(backoff)
			if !t.pause(ctx, jitter(backoff)) {
				t.refundAsync(id, n)
				return nil, t.quit(ctx, lastErr)
			}
			continue
		}
		backoff, lastErr = 0, nil
		switch r.status {
		case tkGranted:
			if ctx.Err() != nil || t.isClosed() { // the grant raced with the end: give it back
				t.refundAsync(id, n)
				return nil, t.quit(ctx, nil)
			}
			t.acquired.Add(1)
			if waited {
				t.waited.Add(1)
			}
			return &Charge{t: t, id: id, n: n, at: time.UnixMilli(r.a)}, nil
		case stMismatch:
			t.rejected.Add(1)
			return nil, mismatchError(t.name, "budget", r.a, t.kind, t.limit)
		case stTooHeavy:
			t.rejected.Add(1)
			return nil, ErrTooHeavy
		case tkWait:
			waited = true
			after := msDur(r.a)
			if dl, ok := ctx.Deadline(); ok && dl.Before(r.sent.Add(after)) {
				t.cancelled.Add(1)
				cause := ErrWindowFull
				switch {
				case r.cool > 0 && r.cool >= r.a:
					cause = ErrCoolingDown
				case r.quarantined:
					cause = ErrQuarantined
				}
				return nil, &LateError{Lane: t.name, RetryAfter: max(time.Until(r.sent.Add(after)), 0), Err: cause}
			}
			if !t.pause(ctx, jitter(min(max(after, minWait), maxWait))) {
				return nil, t.quit(ctx, nil)
			}
		default:
			t.rejected.Add(1)
			return nil, fmt.Errorf("redislane: acquire %q: unexpected script status %d", t.name, r.status)
		}
	}
}

// TryAcquire charges n units if the window has room now, the lane is
// open and no caller of this instance is waiting. It makes one call,
// bounded by a fifth of the lease; if the call fails, what it may have
// charged is refunded in the background.
func (t *Tokens) TryAcquire(n int64) (*Charge, bool) {
	if n <= 0 || n > t.limit || t.isClosed() {
		return nil, false
	}
	select {
	case <-t.head:
	default:
		return nil, false
	}
	defer func() { t.head <- struct{}{} }()
	id := newID()
	r := t.call(context.Background(), id, n)
	switch {
	case r.err != nil:
		t.redisErrs.Add(1)
		t.refundAsync(id, n)
		return nil, false
	case r.status != tkGranted:
		return nil, false
	}
	t.acquired.Add(1)
	return &Charge{t: t, id: id, n: n, at: time.UnixMilli(r.a)}, true
}

// Cooldown closes the lane to new charges for every instance until d from
// now on the server's clock, as [Weighted.Cooldown] does (settles go on).
func (t *Tokens) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	if t.isClosed() {
		return 0, ErrClosed
	}
	left, err := coolCall(ctx, t.client, t.cfg, context.WithTimeout, &t.cool, t.keys[0], t.name, t.limit, t.kind, 0, d)
	if err != nil {
		t.redisErrs.Add(1)
	}
	return left, err
}

// refundAsync refunds in the background what a call for id may have
// charged (its outcome is unknown, or its caller left), unless Close
// began: the charge then leaves the window by itself.
func (t *Tokens) refundAsync(id string, n int64) {
	t.mu.Lock()
	if t.shut {
		t.mu.Unlock()
		return
	}
	t.bg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.bg.Done()
		_ = t.settle(context.Background(), id, n, 0)
	}()
}

func (t *Tokens) pause(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
	case <-t.done:
	}
	return false
}

// quit returns the error of a waiter that stops waiting: ctx's error, or
// ErrClosed.
func (t *Tokens) quit(ctx context.Context, lastErr error) error {
	err := ctx.Err()
	if err == nil {
		t.failed.Add(1)
		return ErrClosed
	}
	t.cancelled.Add(1)
	if lastErr != nil {
		return fmt.Errorf("%w (last Redis error: %w)", err, lastErr)
	}
	return err
}

func (t *Tokens) isClosed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// Name returns the lane's name.
func (t *Tokens) Name() string { return t.name }

// Capacity returns the budget of a window.
func (t *Tokens) Capacity() int64 { return t.limit }

// Window returns the window.
func (t *Tokens) Window() time.Duration { return t.cfg.window }

// Stats returns a snapshot of this instance: Capacity is the budget of a
// window, Waiters the callers of this instance waiting now, and the
// counters count its calls (Acquired: charges made; Released: charges
// settled). Held and the lease counters stay 0.
func (t *Tokens) Stats() Stats {
	return Stats{
		Name:     t.name,
		Capacity: t.limit,
		Waiters:  int(t.waiters.Load()),
		Closed:   t.isClosed(),
		Counters: semaphore.Counters{
			Acquired:  t.acquired.Load(),
			Released:  t.settled.Load(),
			Waited:    t.waited.Load(),
			Cancelled: t.cancelled.Load(),
			Rejected:  t.rejected.Load(),
			Failed:    t.failed.Load(),
		},
		RedisErrors: t.redisErrs.Load(),
	}
}

// Close refuses later calls, sends the callers waiting away with
// [ErrClosed], and waits for the refunds it runs in the background (each
// bounded by a fifth of the lease). Charges out stay in the window; their
// Settle fails with ErrClosed. Close does not close the Redis client.
func (t *Tokens) Close() {
	t.once.Do(func() {
		close(t.done)
		t.mu.Lock()
		t.shut = true
		t.mu.Unlock()
		t.bg.Wait()
	})
}
