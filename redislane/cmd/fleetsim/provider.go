package main

// The -provider run: a fake model provider, in process on a loopback
// port, that limits calls in flight, requests per window and tokens per
// window (counted when a call starts, at the tokens it will use) and
// answers 429 with retry-after-ms and Retry-After above them (and the
// remaining header, 0, of the limit that refused, as OpenAI's API does, so
// that the transport pauses the tokens lane only for a refusal of tokens);
// and a fleet of three replicas calling it, each with its own go-redis
// client, its own
// lanequeue.Queue and its own lanehttp.Transport over three lanes:
// "concurrency" (redislane.AsLane of a Weighted), "requests" and "tokens"
// (redislane.AsRateLane of a Tokens; each call charges its estimate and
// the transport settles the tokens to the usage of the answer, a refund
// or a debt). A 429's retry time pauses the lanes through Queue.Cooldown,
// which pauses a fleet lane for every replica that shares it.
//
// Each row is a budget under a load:
//
//   - shared: the three replicas share one budget through Redis: N
//     requests and T tokens per window, C calls at once (the provider's
//     limits).
//   - per replica: each replica has a budget of its own, N/3, T/3 and C/3
//     (on Redis too, under names of its own): the usual fix for a fleet
//     without a shared budget.
//
// and the load is uneven (one replica busy, two nearly idle) or even.
// The run is in real time, with the provider's minute scaled down to a
// window of -window (1 s by default).
//
// What the provider counts. A fleet lane admits a call when Redis charges
// it, at a time on the Redis server's clock, and keeps every window of
// that clock within its budget; the call reaches the provider a little
// later (the other lane's charge, the HTTP send). So the provider counts
// each call that reaches it at the time the requests lane charged it (its
// tokens at the time the tokens lane did), read from the grant itself:
// a go-redis hook on each replica's client (stampHook) copies it into
// the call's chargeTimes, found through the command's context when the
// call waits for a lane and through the lane (stampedLane) when the call
// only tries it, and the replica's base transport sends it in two
// headers. It also counts each call at its arrival, on its own clock,
// which is what it limits by, and refuses what passes a limit there. A
// queue tries a call's requests and tokens lanes together and, if one
// has no room, gives back the other's charge and waits for that one
// first; it then takes the other one, and if it had to wait for it
// holding the first one's charge, moves that charge to the end of the
// wait (RestampPermit, which stampHook reads as a grant), so a call's two
// charges are moments apart, and any call is sent a few milliseconds
// after them. A call charged just after the fleet's window made room
// still arrives within the provider's window of the call that left it
// when that one took longer from its charge to the provider (see the
// figures in docs/benchmarks-fleet.md). For each 429 the
// provider records that call and its wait between its two charges
// (provRow.RefusedLetGo), and -margin makes the fleet's lanes count a
// window longer than the provider's by a time for a charge to reach it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/redislane"
	"github.com/sessionlane/lanes/redislane/redistest"
	"github.com/sessionlane/lanes/semaphore"
)

// replicas is the size of the fleet.
const replicas = 3

// provConfig is the provider, the fleet's load and the run.
type provConfig struct {
	Window time.Duration `json:"window_ns"` // the provider's minute, scaled down
	// Margin: the fleet's lanes count a window this much longer than the
	// provider's (redislane.WithWindow), for the time from a charge to
	// the provider.
	Margin   time.Duration `json:"lane_margin_ns"`
	Duration time.Duration `json:"duration_ns"` // of each row; its first window is left out
	// The provider's limits, which the shared budget is given as is.
	Requests    int64 `json:"requests"`    // N, requests per window
	Tokens      int64 `json:"tokens"`      // T, tokens per window
	Concurrency int64 `json:"concurrency"` // C, calls in flight
	// A call's estimate is uniform in [EstMin, EstMax]; it uses Use times
	// it, Use uniform in [UseMin, UseMax].
	EstMin int64   `json:"est_min"`
	EstMax int64   `json:"est_max"`
	UseMin float64 `json:"use_min"`
	UseMax float64 `json:"use_max"`
	// A served call takes Base + PerToken × its tokens.
	Base     time.Duration `json:"base_ns"`
	PerToken time.Duration `json:"per_token_ns"`
	// The uneven load: Busy callers on replica 0, Light on each other one,
	// who pause Think between calls. The even load: Even callers on each.
	Busy  int           `json:"busy"`
	Light int           `json:"light"`
	Think time.Duration `json:"think_ns"`
	Even  int           `json:"even"`
	Seed  uint64        `json:"seed"`
	Redis string        `json:"redis"`
	Own   bool          `json:"own_redis"`
}

func defaultProv() provConfig {
	return provConfig{
		Window: time.Second, Duration: 8 * time.Second,
		Requests: 60, Tokens: 8000, Concurrency: 12,
		EstMin: 50, EstMax: 250, UseMin: 0.5, UseMax: 1.2,
		Base: 40 * time.Millisecond, PerToken: 200 * time.Microsecond,
		Busy: 12, Light: 1, Think: 300 * time.Millisecond, Even: 4,
		Seed: 1,
	}
}

func (c *provConfig) check() error {
	switch {
	case c.Window < 10*time.Millisecond || c.Window%time.Millisecond != 0:
		return errors.New("-window must be a whole number of milliseconds, at least 10ms")
	case c.Margin < 0 || c.Margin%time.Millisecond != 0:
		return errors.New("-margin must be a whole number of milliseconds, not negative")
	case c.Duration < 2*c.Window:
		return errors.New("-duration must be at least two windows (the first is left out)")
	case c.Requests < replicas || c.Tokens < replicas || c.Concurrency < replicas:
		return fmt.Errorf("-rpw, -tpw and -conc must be at least %d (a third for each replica)", replicas)
	case c.EstMin < 1 || c.EstMax < c.EstMin || c.EstMax > c.Tokens/replicas:
		return errors.New("need 1 <= estimate min <= max <= a replica's third of -tpw")
	case !(c.UseMin > 0 && c.UseMax >= c.UseMin && float64(c.EstMax)*c.UseMax <= float64(c.Tokens)):
		return errors.New("need 0 < use min <= use max, and a call's use within -tpw")
	case c.Busy < 1 || c.Light < 0 || c.Even < 1 || c.Think < 0 || c.Base < 0 || c.PerToken < 0:
		return errors.New("need -busy and -even at least 1, -light and the durations not negative")
	}
	return nil
}

// maxUnder is the most a call can use above its estimate: what the
// tokens lane learns only when it settles.
func (c *provConfig) maxUnder() int64 {
	return max(0, int64(math.Round(float64(c.EstMax)*c.UseMax))-c.EstMax)
}

// provRow is one budget under one load.
type provRow struct {
	Budget string `json:"budget"` // "shared" or "per replica"
	Load   string `json:"load"`   // "uneven" or "even"
	// What the provider served after the first window: calls per second,
	// and their share of the binding limit (the larger of requests and
	// tokens per window over N and T).
	CallsPerSec float64 `json:"calls_per_sec"`
	UseReq      float64 `json:"use_requests"`
	UseTok      float64 `json:"use_tokens"`
	Binding     float64 `json:"binding"`
	// 429s after the first window: per window per replica (mean), and
	// the most one replica got in one window.
	Refused       int            `json:"refused"`
	RefusedBy     map[string]int `json:"refused_by"` // the limit each 429 was for
	PerWindow     float64        `json:"refused_per_window_per_replica"`
	MostInWindow  int            `json:"most_refused_in_a_window"`
	GaveUp        int            `json:"gave_up"` // calls that ended on a 429 (the transport's retries spent)
	Calls         int            `json:"calls"`   // calls that reached the provider, the first window included
	MaxReq        int64          `json:"max_requests_in_a_window"`
	MaxTok        int64          `json:"max_tokens_in_a_window"`
	TokBound      int64          `json:"token_bound"`
	MaxReqArrival int64          `json:"max_requests_in_a_window_at_arrival"`
	MaxTokArrival int64          `json:"max_tokens_in_a_window_at_arrival"`
	// The 429s for requests or tokens after the first window for which
	// the provider held a call that the fleet's window had let go:
	// charged on the refused limit's lane a window or more before the
	// refused call, but arrived within the provider's window of it. For
	// each, the most time such a call spent between its two charges (ms).
	RefusedLetGo int     `json:"refused_holding_a_let_go_call"`
	LetGoGapsMs  []int64 `json:"let_go_charge_gaps_ms"`
	// From a call's requests charge to its arrival at the provider (the
	// clocks of Redis and the provider are the same machine's): a call
	// that waited for the requests lane may then wait for the tokens
	// lane's window.
	DelayP99Ms int64 `json:"charge_to_arrival_p99_ms"`
	DelayMaxMs int64 `json:"charge_to_arrival_max_ms"`
	Held       bool  `json:"held"` // MaxReq <= N and MaxTok <= TokBound
}

// provReport is the -provider run's result.
type provReport struct {
	Config provConfig `json:"config"`
	Rows   []provRow  `json:"rows"`
	// OK: every row kept the invariants, and under the uneven load the
	// shared budget served more than the per-replica one.
	OK bool `json:"ok"`
}

// provCall is what the provider records of a call that reached it.
type provCall struct {
	replica     int
	arrival     time.Time
	reqAt       int64 // when the requests lane charged it (ms, Redis clock)
	tokAt       int64 // when the tokens lane charged it
	est, actual int64
	refused     string // the limit a 429 was for; "": served
	// For a 429 for requests or tokens: the most time between its two
	// charges (ms) of a call the provider held that the fleet's window
	// had let go (see provRow.RefusedLetGo); -1: none.
	letGoGap int64
}

// fakeProvider is the provider: an http.Handler with limits on calls in
// flight, and on requests and tokens of the calls it served in the last
// window (by arrival).
type fakeProvider struct {
	cfg      *provConfig
	mu       sync.Mutex
	inflight int64
	served   []stamp // calls served in the last window, oldest first
	tokens   int64   // their tokens
	calls    []provCall
	bad      error // the first malformed request
}

// stamp is a served call's arrival and tokens.
type stamp struct {
	at           time.Time
	n            int64
	reqAt, tokAt int64 // when its lanes charged it
}

// Headers of a call to the provider.
const (
	hReplica  = "X-Replica"
	hEstimate = "X-Estimate"
	hActual   = "X-Use" // the tokens the call will use: the provider knows them from the prompt and its output
	hReqAt    = "X-Charged-Requests"
	hTokAt    = "X-Charged-Tokens"
)

func headerInt(r *http.Request, h string) (int64, error) {
	v, err := strconv.ParseInt(r.Header.Get(h), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header %s: %w", h, err)
	}
	return v, nil
}

func (p *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	c := provCall{arrival: time.Now()}
	var errs [5]error
	var rep int64
	rep, errs[0] = headerInt(r, hReplica)
	c.est, errs[1] = headerInt(r, hEstimate)
	c.actual, errs[2] = headerInt(r, hActual)
	c.reqAt, errs[3] = headerInt(r, hReqAt)
	c.tokAt, errs[4] = headerInt(r, hTokAt)
	c.replica = int(rep)
	if err := errors.Join(errs[:]...); err != nil {
		p.mu.Lock()
		if p.bad == nil {
			p.bad = err
		}
		p.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	retry, ok := p.start(&c)
	if !ok {
		ms := (retry + time.Millisecond - 1) / time.Millisecond
		secs := (retry + time.Second - 1) / time.Second
		w.Header().Set("retry-after-ms", strconv.FormatInt(int64(ms), 10)) // OpenAI's, read first
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
		switch c.refused { // which limit refused, as OpenAI's headers say it
		case "requests":
			w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		case "tokens":
			w.Header().Set("X-Ratelimit-Remaining-Tokens", "0")
		}
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(p.cfg.Base + time.Duration(c.actual)*p.cfg.PerToken) // the call's work
	p.mu.Lock()
	p.inflight-- // before the answer: the caller's lanes are released after it
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"x","usage":{"prompt_tokens":0,"completion_tokens":%d,"total_tokens":%d}}`, c.actual, c.actual)
}

// start records c and takes it, or refuses it with the time until the
// provider would have room for it.
func (p *fakeProvider) start(c *provCall) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := c.arrival
	i := 0
	for i < len(p.served) && !p.served[i].at.After(now.Add(-p.cfg.Window)) {
		p.tokens -= p.served[i].n
		i++
	}
	p.served = p.served[i:]
	var retry time.Duration
	switch {
	case p.inflight >= p.cfg.Concurrency:
		retry, c.refused = p.cfg.Window/60, "concurrency" // a second of a minute
	case int64(len(p.served)) >= p.cfg.Requests:
		retry, c.refused = p.served[0].at.Add(p.cfg.Window).Sub(now), "requests"
	case p.tokens+c.actual > p.cfg.Tokens:
		c.refused = "tokens"
		left := p.tokens
		for _, s := range p.served {
			left -= s.n
			if left+c.actual <= p.cfg.Tokens {
				retry = s.at.Add(p.cfg.Window).Sub(now)
				break
			}
		}
	}
	c.letGoGap = -1
	if c.refused == "requests" || c.refused == "tokens" {
		c.letGoGap = p.letGo(c)
	}
	if c.refused != "" {
		p.calls = append(p.calls, *c)
		return max(retry, time.Millisecond), false
	}
	p.inflight++
	p.served = append(p.served, stamp{now, c.actual, c.reqAt, c.tokAt})
	p.tokens += c.actual
	p.calls = append(p.calls, *c)
	return 0, true
}

// letGo returns, for c refused for requests or tokens, the most time
// between its two charges (ms) of a call in the provider's window that
// the fleet's window had let go (charged on that limit's lane a window or
// more before c), or -1 if it holds none. p.mu is held.
func (p *fakeProvider) letGo(c *provCall) int64 {
	gap := int64(-1)
	wms := p.cfg.Window.Milliseconds()
	for _, s := range p.served {
		at, mine := s.reqAt, c.reqAt
		if c.refused == "tokens" {
			at, mine = s.tokAt, c.tokAt
		}
		if at <= mine-wms {
			gap = max(gap, s.tokAt-s.reqAt, s.reqAt-s.tokAt)
		}
	}
	return gap
}

// chargeTimes is a call's record of when its requests and tokens lanes
// charged it, which stampHook fills in. A pointer to it is the call's
// key in its replica's queue (TransportConfig.Key reads it from the
// request's context), which passes it to the lanes: the queue has no
// keyed lane, so a key of its own per call changes nothing of how it
// admits.
type chargeTimes struct {
	mu       sync.Mutex
	req, tok int64 // ms on the Redis server's clock; 0: not charged
}

type chargeKey struct{}

// stampedLane is a replica's requests or tokens lane: redislane's
// AsRateLane lane, through which each call's TryAcquire goes, so that
// stampHook knows whose it is. A queue tries a call's rate lanes without
// a context (lanequeue's waitFirst), and the Tokens lane asks Redis on a
// background context then: the hook cannot find the call in it, so the
// lane names the call in trying for the length of the try. Its other
// methods are the wrapped lane's, SettlePermit, Cooldown and RestampPermit too, so the
// queue gives back and pauses it as it would AsRateLane's own.
type stampedLane struct {
	lanequeue.Lane[*chargeTimes]
	settler interface {
		SettlePermit(p semaphore.Permit, actual int64) error
	}
	cooler interface {
		Cooldown(ctx context.Context, d time.Duration) (time.Duration, error)
	}
	restamper interface {
		RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool)
	}
	tokens bool                        // the tokens lane; else the requests lane
	trying atomic.Pointer[chargeTimes] // the call whose TryAcquire is in flight
}

// wrap sets the lane l stands for: AsRateLane's, which settles and
// cools down.
func (l *stampedLane) wrap(inner lanequeue.Lane[*chargeTimes]) error {
	var ok1, ok2, ok3 bool
	l.settler, ok1 = inner.(interface {
		SettlePermit(p semaphore.Permit, actual int64) error
	})
	l.cooler, ok2 = inner.(interface {
		Cooldown(ctx context.Context, d time.Duration) (time.Duration, error)
	})
	l.restamper, ok3 = inner.(interface {
		RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool)
	})
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("redislane.AsRateLane's lane no longer has SettlePermit, Cooldown and RestampPermit (%T): stampedLane would hide what the queue needs of it", inner)
	}
	l.Lane = inner
	return nil
}

// TryAcquire tries the lane for the call ct, named in l.trying until it
// returns. One call tries at a time: a try that finds another's in flight
// fails, as the Tokens lane's own TryAcquire does when another caller of
// the replica holds its turn (it asks Redis for one caller at a time),
// so this refuses only within the few microseconds around that turn.
func (l *stampedLane) TryAcquire(ct *chargeTimes, n int64) (semaphore.Permit, bool) {
	if !l.trying.CompareAndSwap(nil, ct) {
		return semaphore.Permit{}, false
	}
	defer l.trying.Store(nil)
	return l.Lane.TryAcquire(ct, n)
}

// SettlePermit is the wrapped lane's: lanequeue gives a charge back
// through it, and Ticket.Settle settles the tokens lane.
func (l *stampedLane) SettlePermit(p semaphore.Permit, actual int64) error {
	return l.settler.SettlePermit(p, actual)
}

// RestampPermit is the wrapped lane's: the queue moves a charge the call
// held while it waited for the other lane to the end of that wait, and
// stampHook reads the new time from the reply (it has the grant's form).
func (l *stampedLane) RestampPermit(ctx context.Context, p semaphore.Permit) (semaphore.Permit, bool) {
	return l.restamper.RestampPermit(ctx, p)
}

// Cooldown is the wrapped lane's: a 429 pauses the lane for the fleet.
func (l *stampedLane) Cooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	return l.cooler.Cooldown(ctx, d)
}

// stampHook is a go-redis hook that reads the charge time out of each
// grant of a replica's requests and tokens lanes and puts it in the
// chargeTimes of the call it was for: the one in the command's context
// (a call that waits for the lane asks Redis on its own context), else
// the one the lane names as trying (a try asks on a background one). It
// knows the call's layout (EVALSHA sha 3 meta z w id n limit
// "tokens:<window ms>" lease quarantine window) and the reply of a grant
// ({1, the server's time in ms}), which the move of a charge to the end
// of a wait (RestampPermit) shares, so a move stamps the call anew; if
// either changes, calls reach the
// provider without their times, and a grant it cannot place is counted
// in lost: either way the run fails saying so.
type stampHook struct {
	lanes map[string]*stampedLane // by meta key; not changed once calls begin
	lost  atomic.Int64            // grants of the lanes for no call it could find
}

func (*stampHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*stampHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *stampHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) != 13 {
			return err
		}
		if kind, _ := args[9].(string); !strings.HasPrefix(kind, "tokens:") {
			return err
		}
		meta, _ := args[3].(string)
		l := h.lanes[meta]
		c, ok := cmd.(*redis.Cmd)
		if l == nil || !ok {
			return err
		}
		v, verr := c.Int64Slice()
		if verr != nil || len(v) != 2 || v[0] != 1 {
			return err
		}
		ct, _ := ctx.Value(chargeKey{}).(*chargeTimes)
		if ct == nil {
			ct = l.trying.Load()
		}
		if ct == nil {
			h.lost.Add(1)
			return err
		}
		ct.mu.Lock()
		if l.tokens {
			ct.tok = v[1]
		} else {
			ct.req = v[1]
		}
		ct.mu.Unlock()
		return err
	}
}

// metaKey is the key stampHook finds a lane by.
func metaKey(lane string) string { return "{lanes:" + lane + "}:meta" }

// stampingBase is a replica's base transport: it sends each attempt with
// the times its lanes charged it.
type stampingBase struct{ next http.RoundTripper }

func (b stampingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context()) // a RoundTripper leaves the request as it is
	if ct, ok := req.Context().Value(chargeKey{}).(*chargeTimes); ok {
		ct.mu.Lock()
		r.Header.Set(hReqAt, strconv.FormatInt(ct.req, 10))
		r.Header.Set(hTokAt, strconv.FormatInt(ct.tok, 10))
		ct.mu.Unlock()
	}
	return b.next.RoundTrip(r)
}

// replica is one member of the fleet.
type replica struct {
	rc     *redis.Client
	q      *lanequeue.Queue[*chargeTimes] // a call's key is its chargeTimes
	hook   *stampHook
	base   *http.Transport
	client *http.Client
}

func (r *replica) close() {
	r.q.Close() // closes its lanes
	r.base.CloseIdleConnections()
	_ = r.rc.Close()
}

// newReplica makes a replica with lanes named prefix+"-c", "-r", "-t" of
// the budgets conc, reqs and toks per window.
func newReplica(cfg *provConfig, prefix string, conc, reqs, toks int64) (*replica, error) {
	rname, tname := prefix+"-r", prefix+"-t"
	rc := redis.NewClient(&redis.Options{Addr: cfg.Redis, DisableIdentity: true, PoolSize: 32, ContextTimeoutEnabled: true})
	lanes := map[string]*stampedLane{metaKey(rname): {}, metaKey(tname): {tokens: true}}
	hook := &stampHook{lanes: lanes}
	rc.AddHook(hook)
	r := &replica{rc: rc, q: lanequeue.New[*chargeTimes](), hook: hook}
	fail := func(err error) (*replica, error) { r.q.Close(); _ = rc.Close(); return nil, err }
	// Every run's lane names are new, so no charge of an earlier run can
	// count: no quarantine.
	opts := []redislane.Option{redislane.WithQuarantine(0)}
	w, err := redislane.NewWeighted(rc, prefix+"-c", conc, opts...)
	if err != nil {
		return fail(err)
	}
	if err := r.q.Add("concurrency", redislane.AsLane[*chargeTimes](w)); err != nil {
		w.Close()
		return fail(err)
	}
	opts = append(opts, redislane.WithWindow(cfg.Window+cfg.Margin))
	for _, l := range []struct {
		lane, name string
		n          int64
	}{{"requests", rname, reqs}, {"tokens", tname, toks}} {
		t, err := redislane.NewTokens(rc, l.name, l.n, opts...)
		if err != nil {
			return fail(err)
		}
		sl := lanes[metaKey(l.name)]
		if err := sl.wrap(redislane.AsRateLane[*chargeTimes](t)); err != nil {
			t.Close()
			return fail(err)
		}
		if err := r.q.Add(l.lane, sl); err != nil {
			t.Close()
			return fail(err)
		}
	}
	set, err := r.q.Lanes("concurrency", "requests", "tokens")
	if err != nil {
		return fail(err)
	}
	r.base = &http.Transport{MaxIdleConnsPerHost: 64}
	r.client = &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[*chargeTimes]{
		Base:  stampingBase{next: r.base},
		Queue: r.q,
		Lanes: set,
		Key: func(req *http.Request) (*chargeTimes, error) {
			ct, ok := req.Context().Value(chargeKey{}).(*chargeTimes)
			if !ok {
				return nil, errors.New("a call without its chargeTimes in its context")
			}
			return ct, nil
		},
		TokensLane: "tokens",
		Tokens: func(req *http.Request) int64 {
			n, _ := strconv.ParseInt(req.Header.Get(hEstimate), 10, 64)
			return n
		},
		Usage: lanehttp.UsageJSON,
	})}
	return r, nil
}

// runProvRow runs one row: the fleet under a budget (shared or split)
// and a load, for cfg.Duration.
func runProvRow(ctx context.Context, cfg *provConfig, shared, uneven bool, name string) (provRow, error) {
	row := provRow{Budget: "per replica", Load: "even"}
	if shared {
		row.Budget = "shared"
	}
	if uneven {
		row.Load = "uneven"
	}
	prov := &fakeProvider{cfg: cfg}
	srv := httptest.NewServer(prov)
	defer srv.Close()

	fleet := make([]*replica, replicas)
	defer func() {
		for _, r := range fleet {
			if r != nil {
				r.close()
			}
		}
	}()
	for i := range fleet {
		prefix, c, n, t := name, cfg.Concurrency, cfg.Requests, cfg.Tokens
		if !shared {
			prefix = name + "-" + strconv.Itoa(i)
			c, n, t = c/replicas, n/replicas, t/replicas
		}
		var err error
		if fleet[i], err = newReplica(cfg, prefix, c, n, t); err != nil {
			return row, err
		}
	}

	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var runErr error
	for i, r := range fleet {
		callers, think := cfg.Even, time.Duration(0)
		if uneven {
			callers = cfg.Light
			if i == 0 {
				callers = cfg.Busy
			} else {
				think = cfg.Think
			}
		}
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<32|uint64(g)))
				if err := caller(rctx, cfg, r, i, srv.URL, rng, think, &row.GaveUp, &errMu); err != nil {
					errMu.Lock()
					runErr = errors.Join(runErr, err)
					errMu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if runErr != nil {
		return row, runErr
	}
	prov.mu.Lock()
	calls, bad := prov.calls, prov.bad
	prov.mu.Unlock()
	if bad != nil {
		return row, fmt.Errorf("the provider got a malformed call: %w", bad)
	}
	for i, r := range fleet {
		if n := r.hook.lost.Load(); n > 0 {
			return row, fmt.Errorf("replica %d: stampHook saw %d grants of the rate lanes for no call it could find", i, n)
		}
	}
	return row, summarizeProv(cfg, &row, calls, start)
}

// caller sends calls through r until ctx ends, each of an estimate and a
// use drawn from rng, pausing think between them.
func caller(ctx context.Context, cfg *provConfig, r *replica, i int, url string, rng *rand.Rand, think time.Duration, gaveUp *int, mu *sync.Mutex) error {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for ctx.Err() == nil {
		est := cfg.EstMin + rng.Int64N(cfg.EstMax-cfg.EstMin+1)
		use := cfg.UseMin + (cfg.UseMax-cfg.UseMin)*rng.Float64()
		actual := max(1, int64(math.Round(float64(est)*use)))
		cctx := context.WithValue(ctx, chargeKey{}, &chargeTimes{})
		req, err := http.NewRequestWithContext(cctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set(hReplica, strconv.Itoa(i))
		req.Header.Set(hEstimate, strconv.FormatInt(est, 10))
		req.Header.Set(hActual, strconv.FormatInt(actual, 10))
		resp, err := r.client.Do(req)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				// The run is over, or the lanes would let the call go
				// only after its end (a LateError says so at once).
				return nil
			}
			return fmt.Errorf("replica %d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			mu.Lock()
			*gaveUp++
			mu.Unlock()
		default:
			return fmt.Errorf("replica %d: provider answered %s", i, resp.Status)
		}
		if think > 0 {
			t := time.NewTimer(think)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return nil
}

// summarizeProv fills row from the provider's record of the calls.
func summarizeProv(cfg *provConfig, row *provRow, calls []provCall, start time.Time) error {
	row.Calls = len(calls)
	row.RefusedBy = map[string]int{}
	wms := cfg.Window.Milliseconds()
	var reqs, toks, reqArr, tokArr []weighted
	refusedIn := map[[2]int]int{}
	var served, tokens int64
	delays := make([]int64, 0, len(calls))
	for _, c := range calls {
		if c.reqAt <= 0 || c.tokAt <= 0 {
			return fmt.Errorf("a call of replica %d reached the provider without the times of its charges: stampHook no longer reads the lanes' grants", c.replica)
		}
		used := c.actual
		if c.refused != "" {
			used = 0 // the provider counted no tokens of it
		}
		reqs = append(reqs, weighted{c.reqAt, 1})
		toks = append(toks, weighted{c.tokAt, used})
		am := c.arrival.Sub(start).Milliseconds()
		delays = append(delays, c.arrival.UnixMilli()-c.reqAt)
		reqArr = append(reqArr, weighted{am, 1})
		tokArr = append(tokArr, weighted{am, used})
		w := int(c.arrival.Sub(start) / cfg.Window)
		if w < 1 {
			continue // the first window: the fleet starts from nothing
		}
		if c.refused != "" {
			row.Refused++
			row.RefusedBy[c.refused]++
			if c.letGoGap >= 0 {
				row.RefusedLetGo++
				row.LetGoGapsMs = append(row.LetGoGapsMs, c.letGoGap)
			}
			refusedIn[[2]int{w, c.replica}]++
		} else {
			served++
			tokens += c.actual
		}
	}
	slices.Sort(row.LetGoGapsMs)
	if len(delays) > 0 {
		slices.Sort(delays)
		row.DelayP99Ms = redistest.Percentile(delays, 0.99)
		row.DelayMaxMs = delays[len(delays)-1]
	}
	row.MaxReq = maxInWindow(reqs, wms)
	row.MaxTok = maxInWindow(toks, wms)
	row.MaxReqArrival = maxInWindow(reqArr, wms)
	row.MaxTokArrival = maxInWindow(tokArr, wms)
	// The tokens lane admits a call when the window's charges, each a
	// settled call's use or a call in flight's estimate, leave room for
	// its estimate: a window can pass T by what the calls in flight at its
	// last charge use above their estimates, at most C of them.
	row.TokBound = cfg.Tokens + cfg.Concurrency*cfg.maxUnder()
	row.Held = row.MaxReq <= cfg.Requests && row.MaxTok <= row.TokBound
	steady := cfg.Duration - cfg.Window
	windows := float64(steady) / float64(cfg.Window)
	row.CallsPerSec = float64(served) / steady.Seconds()
	row.UseReq = float64(served) / windows / float64(cfg.Requests)
	row.UseTok = float64(tokens) / windows / float64(cfg.Tokens)
	row.Binding = max(row.UseReq, row.UseTok)
	row.PerWindow = float64(row.Refused) / windows / replicas
	for _, n := range refusedIn {
		row.MostInWindow = max(row.MostInWindow, n)
	}
	return nil
}

// weighted is a count at a time (ms).
type weighted struct{ at, n int64 }

// maxInWindow returns the most of the counts whose times fall in one
// window [s, s+w), over every s.
func maxInWindow(xs []weighted, w int64) int64 {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b weighted) int { return int(a.at - b.at) })
	var best, sum int64
	j := 0
	for i := range xs { // the window starting at xs[i]: xs[i:j]
		for j < len(xs) && xs[j].at < xs[i].at+w {
			sum += xs[j].n
			j++
		}
		best = max(best, sum)
		sum -= xs[i].n
	}
	return best
}

// runProvAll runs the rows: shared and per replica, under the uneven
// load, then (unless unevenOnly) the even one.
func runProvAll(ctx context.Context, cfg provConfig, unevenOnly bool) (provReport, error) {
	rep := provReport{Config: cfg}
	if err := cfg.check(); err != nil {
		return rep, err
	}
	loads := []bool{true, false}
	if unevenOnly {
		loads = loads[:1]
	}
	base := fmt.Sprintf("fleetsim-provider-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, uneven := range loads {
		for _, shared := range []bool{true, false} {
			name := fmt.Sprintf("%s-%d", base, len(rep.Rows))
			row, err := runProvRow(ctx, &cfg, shared, uneven, name)
			if err != nil {
				return rep, fmt.Errorf("%s budget, %s load: %w", row.Budget, row.Load, err)
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	rep.OK = true
	for _, r := range rep.Rows {
		rep.OK = rep.OK && r.Held
	}
	rep.OK = rep.OK && rep.Rows[0].Binding > rep.Rows[1].Binding
	return rep, nil
}

func printProv(w io.Writer, rep provReport) {
	c := rep.Config
	own := ""
	if c.Own {
		own = " (own redis-server)"
	}
	fmt.Fprintf(w, "fleetsim -provider: %d replicas on one Redis %s%s, real time; a window of %v stands for the provider's minute\n",
		replicas, c.Redis, own, c.Window)
	fmt.Fprintf(w, "provider: %d calls in flight, N=%d requests and T=%d tokens a window (by arrival; 429 with retry-after-ms)\n",
		c.Concurrency, c.Requests, c.Tokens)
	fmt.Fprintf(w, "a call estimates %d-%d tokens, uses %.1f-%.1f times that (at most %d over), takes %v + %v/token\n",
		c.EstMin, c.EstMax, c.UseMin, c.UseMax, c.maxUnder(), c.Base, c.PerToken)
	fmt.Fprintf(w, "uneven load: %d callers on replica 0, %d on each other one (pausing %v between calls); even: %d on each\n",
		c.Busy, c.Light, c.Think, c.Even)
	if c.Margin > 0 {
		fmt.Fprintf(w, "the fleet's lanes count a window of %v (-margin %v)\n", c.Window+c.Margin, c.Margin)
	}
	fmt.Fprintf(w, "%v a row, the first window left out of calls/s and 429s\n\n", c.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "budget\tload\tcalls/s\tof binding limit\t429s/window/replica\tmost in a window\tmax requests/window\tmax tokens/window\tat arrival\t")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f%%\t%.2f\t%d\t%d of %d\t%d of %d\t%d, %d\t\n",
			r.Budget, r.Load, r.CallsPerSec, 100*r.Binding, r.PerWindow, r.MostInWindow,
			r.MaxReq, c.Requests, r.MaxTok, r.TokBound, r.MaxReqArrival, r.MaxTokArrival)
	}
	tw.Flush()
	verdict := "held"
	if !rep.OK {
		verdict = "BROKEN"
	}
	fmt.Fprintf(w, "\ninvariants (every row: at most N requests and T + C×%d tokens in any window; uneven load: shared above per replica): %s\n",
		c.maxUnder(), verdict)
	if missed := provTargets(rep.Rows); len(missed) == 0 {
		fmt.Fprintln(w, "targets (issue 24: a shared budget serves >= 95% of the binding limit; at most one 429 in any window per replica): met")
	} else {
		fmt.Fprintf(w, "targets (issue 24: a shared budget serves >= 95%% of the binding limit; at most one 429 in any window per replica): missed: %s\n", strings.Join(missed, "; "))
	}
	fmt.Fprint(w, `shared:      the three replicas' lanes are one budget in Redis: C, N and T
per replica: each replica's lanes are a budget of its own: C/3, N/3 and T/3
max requests/window, max tokens/window: counted at the provider, each call at the time the
             fleet's lanes charged it (Redis clock); tokens as used (0 for a 429)
at arrival:  the same, each call counted when it reached the provider (its clock, which it limits by)
`)
}

// provTargets returns what the rows miss of issue 24's targets for a
// fleet: each shared row serves at least 95% of its binding limit, and no
// row has more than one 429 for a replica in a window. They are measured
// in real time, so they are printed, not the exit status (which is the
// invariants').
func provTargets(rows []provRow) (missed []string) {
	for _, r := range rows {
		if r.Budget == "shared" && r.Binding < 0.95 {
			missed = append(missed, fmt.Sprintf("%s %s: %.1f%% of the binding limit", r.Budget, r.Load, 100*r.Binding))
		}
		if r.MostInWindow > 1 {
			missed = append(missed, fmt.Sprintf("%s %s: %d 429s in one window for one replica", r.Budget, r.Load, r.MostInWindow))
		}
	}
	return missed
}

// runProviderMain is the -provider run of main.
func runProviderMain(cfg provConfig, asJSON bool) int {
	if cfg.Redis == "" {
		srv, err := redistest.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim -provider:", err)
			return 2
		}
		defer srv.Stop()
		cfg.Redis, cfg.Own = srv.Addr, true
	}
	rep, err := runProvAll(context.Background(), cfg, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetsim -provider:", err)
		return 2
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printProv(os.Stdout, rep)
	}
	if !rep.OK {
		return 1
	}
	return 0
}
