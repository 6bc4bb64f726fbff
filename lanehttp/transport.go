package lanehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/call"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// Defaults of a [TransportConfig] field left 0.
const (
	// DefaultMaxAttempts is the attempts a request gets, the first
	// included: two retries, as the providers' own SDKs make.
	DefaultMaxAttempts = 3
	// DefaultBackoff is the first retry's backoff step.
	DefaultBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff bounds the backoff step as it doubles.
	DefaultMaxBackoff = 8 * time.Second
	// DefaultRetryRatio is the retries one request earns for the retry
	// budget: one retry per ten requests, beyond the burst.
	DefaultRetryRatio = 0.1
	// DefaultRetryBurst is the retries the budget holds at most: a quiet
	// transport may retry this many at once before the ratio binds.
	DefaultRetryBurst = 10
)

// maxRetryRatio is the largest RetryRatio: one that bounds nothing (a
// request retries at most MaxAttempts-1 times) but keeps the budget's
// sums within an int64.
const maxRetryRatio = 1000

// alwaysStamp, set by BenchmarkAblationAttemptNow only, makes every
// Transport read its clock for each Attempt's Now, as it did before.
var alwaysStamp bool

// budgetUnit is one retry in the budget's fixed point: a millionth of a
// retry is the finest ratio kept, and a burst of up to 9e12 retries fits.
const budgetUnit = 1_000_000

// TransportConfig says which lanes each attempt of a call to a provider
// takes and how failed attempts are retried; see [NewTransport] and the
// package docs (Transport). Queue and Lanes are required.
type TransportConfig[K comparable] struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Queue is the queue whose lanes the attempts take: it may be the one
	// a [Middleware] serves inbound requests with.
	Queue *lanequeue.Queue[K]
	// Lanes is the set every attempt takes, prepared by Queue.Lanes: the
	// provider's concurrency (a global lane, which an
	// adaptive.Controller may drive through Queue.ObserveLane), its
	// requests per window (a rate lane), its tokens per window (a rate
	// lane named by TokensLane), a keyed lane for a tenant's share.
	Lanes lanequeue.LaneSet[K]
	// Key, if not nil, returns the key the request's lanes are taken
	// for (a tenant, for a keyed lane in Lanes); an error fails the
	// request before any lane is taken. Nil takes the zero K, which is
	// right when Lanes has no keyed lane.
	Key func(*http.Request) (K, error)
	// TokensLane names the lane of Lanes that counts the provider's
	// tokens, a rate lane (a global or keyed one makes NewTransport
	// panic); "" when there is none. Each attempt takes Tokens(req) of
	// it, and 1 of every other lane.
	TokensLane string
	// Tokens returns the request's estimated token count, the weight
	// each of its attempts takes of TokensLane; it is called once per
	// request. An estimate below 1 fails the request with
	// semaphore.ErrInvalidWeight, and one above the lane's MaxWeight (a
	// rate lane's burst, a token lane's budget) with the lane's
	// ErrTooHeavy, before any lane is taken. Required with TokensLane.
	Tokens func(*http.Request) int64
	// Usage, if not nil, reports the tokens a call used, read from its
	// answer: tail is the end of what the caller read of the body (at
	// most its last 16 KiB, where an answer's usage is), and resp is the
	// response (its Body not to be read or closed). It is called once,
	// at the body's EOF or, if the caller stops before, at its Close;
	// the ticket of TokensLane (a lane of lanequeue.NewTokenLane) is then
	// settled to tokens before the lanes are released: a refund, or a
	// debt later calls wait out. With ok false, or at a Close before EOF
	// with tokens not above the estimate (the provider may have counted
	// more than was read), the estimate stands, as it does when the lane
	// refuses the settle or Usage reports a negative count (the body's
	// Close then returns why: see the package docs, Transport). If Usage
	// panics, the caller's Read or Close does, and the lanes are
	// released at Close.
	// [UsageJSON] reads OpenAI's and Anthropic's answers. Requires
	// TokensLane.
	Usage func(resp *http.Response, tail []byte) (tokens int64, ok bool)
	// Classify makes a [Verdict] of each attempt; nil means
	// [DefaultClassifier].
	Classify Classifier
	// MaxAttempts bounds the attempts of one request, the first
	// included: 1 never retries. 0 means [DefaultMaxAttempts]; a negative
	// value makes NewTransport panic.
	MaxAttempts int
	// Backoff is the first retry's backoff step, doubled for each later
	// retry up to MaxBackoff; 0 means [DefaultBackoff] and 0 for
	// MaxBackoff [DefaultMaxBackoff] (or Backoff, if longer). A negative
	// value, or a MaxBackoff below Backoff, makes NewTransport panic.
	Backoff, MaxBackoff time.Duration
	// RetryRatio and RetryBurst make the retry budget: each request
	// earns RetryRatio retries, the budget holds at most RetryBurst (and
	// starts full), and each retry spends one. 0 means
	// [DefaultRetryRatio] and [DefaultRetryBurst]; a negative value, or
	// a RetryRatio that is not a number or is above 1000, makes
	// NewTransport panic.
	RetryRatio float64
	RetryBurst int
	// RetryUnsafe retries a request that is not safe to send twice (a
	// POST or PATCH without an Idempotency-Key) whenever Classify says
	// Retry, as one that is. False, the default, retries it only when
	// the provider cannot have processed it (see the package docs).
	RetryUnsafe bool
	// Clock times the waits between attempts, is the Now of each
	// [Attempt], and is what a retry's end is compared with the
	// request's deadline on; nil means the system clock (with neither a
	// Clock nor a Classify, Now is left zero, which DefaultClassifier
	// reads as time.Now()). Tests pass a fake one.
	Clock semaphore.Clock
}

// Transport is an [http.RoundTripper] that sends each attempt of a
// request to a provider while holding the lanes of its
// [TransportConfig], and retries failed attempts within the request's
// context and a retry budget, as the package docs (Transport) state.
// Make it with [NewTransport] (the zero Transport is not usable); it is
// safe for concurrent use.
type Transport[K comparable] struct {
	cfg TransportConfig[K]
	// cool are the lanes that an overload with a retry time pauses (see
	// Queue.Cooldown): the set's global and rate lanes, the provider's
	// budgets; a keyed lane, which other work of a key may share, is not
	// paused for all keys.
	cool []string
	// stamp makes each Attempt's Now a reading of the Clock. Without a
	// Clock or a Classifier of the caller's it is left zero, which
	// DefaultClassifier reads as time.Now() when it needs a time (for a
	// Retry-After date): a success then reads no clock
	// (BenchmarkAblationAttemptNow).
	stamp  bool
	earn   int64        // budget units a request earns
	cap    int64        // budget units held at most
	budget atomic.Int64 // budget units now
}

// NewTransport returns a Transport for cfg. It panics, as [Middleware]
// does, if cfg has no Queue, if Lanes is empty or not a set of Queue, if
// TokensLane is not in Lanes, is not a rate lane, or has no Tokens, if
// Usage is set without a TokensLane or with one that cannot settle (a
// NewRateLane lane), or if a bound is negative:
// a programming error, found when the client is set up.
func NewTransport[K comparable](cfg TransportConfig[K]) *Transport[K] {
	if cfg.Queue == nil {
		panic("lanehttp: TransportConfig.Queue is nil")
	}
	if err := cfg.Queue.Check(cfg.Lanes); errors.Is(err, semaphore.ErrInvalidConfig) {
		panic("lanehttp: TransportConfig.Lanes: " + err.Error() + ": set it to the lanes every attempt takes, made by Queue.Lanes")
	}
	kinds := map[string]lanequeue.Kind{}
	for _, st := range cfg.Queue.Stats() {
		kinds[st.Name] = st.Kind
	}
	if cfg.TokensLane != "" {
		if !slices.Contains(cfg.Lanes.Names(), cfg.TokensLane) {
			panic("lanehttp: TransportConfig.TokensLane " + cfg.TokensLane + " is not in Lanes " + strings.Join(cfg.Lanes.Names(), ", "))
		}
		if cfg.Tokens == nil {
			panic("lanehttp: TransportConfig.Tokens is nil with a TokensLane")
		}
		// A global or keyed lane would hold the estimate as concurrency,
		// refuse Usage's settle, and leave the provider's tokens lane
		// charged 1 a call.
		if k := kinds[cfg.TokensLane]; k != lanequeue.Rate {
			panic("lanehttp: TransportConfig.TokensLane " + cfg.TokensLane + " is a " + k.String() + " lane: name the rate lane of the provider's tokens (lanequeue.NewTokenLane)")
		}
		if cfg.Usage != nil && !call.Settles(cfg.Queue, cfg.TokensLane) {
			panic("lanehttp: TransportConfig.Usage: TokensLane " + cfg.TokensLane + " is a rate lane that cannot settle (a request rate, lanequeue.NewRateLane): name a lane of tokens (lanequeue.NewTokenLane, redislane.AsRateLane)")
		}
	} else if cfg.Usage != nil {
		panic("lanehttp: TransportConfig.Usage is set without a TokensLane to settle")
	}
	stamp := alwaysStamp || cfg.Clock != nil || cfg.Classify != nil
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.Classify == nil {
		cfg.Classify = DefaultClassifier
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	switch {
	case cfg.MaxAttempts < 0:
		panic("lanehttp: TransportConfig.MaxAttempts is negative: 0 means DefaultMaxAttempts")
	case cfg.MaxAttempts == 0:
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff < 0 || cfg.MaxBackoff < 0 {
		panic("lanehttp: TransportConfig.Backoff or MaxBackoff is negative: 0 means the default")
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.Backoff)
	}
	if cfg.MaxBackoff < cfg.Backoff {
		panic("lanehttp: TransportConfig.MaxBackoff is below Backoff")
	}
	r := cfg.RetryRatio
	if !(r >= 0 && r <= maxRetryRatio) { // NaN too
		panic("lanehttp: TransportConfig.RetryRatio is negative, not a number, or above 1000: 0 means DefaultRetryRatio")
	}
	if r == 0 {
		r = DefaultRetryRatio
	}
	switch {
	case cfg.RetryBurst < 0 || int64(cfg.RetryBurst) > math.MaxInt64/(2*budgetUnit):
		panic("lanehttp: TransportConfig.RetryBurst is negative or too large: 0 means DefaultRetryBurst")
	case cfg.RetryBurst == 0:
		cfg.RetryBurst = DefaultRetryBurst
	}
	t := &Transport[K]{cfg: cfg, stamp: stamp, earn: int64(math.Round(r * budgetUnit)), cap: int64(cfg.RetryBurst) * budgetUnit}
	for _, name := range cfg.Lanes.Names() {
		if kinds[name] != lanequeue.Keyed {
			t.cool = append(t.cool, name)
		}
	}
	t.budget.Store(t.cap)
	return t
}

// RoundTrip sends req to the provider, one attempt at a time, each while
// holding the lanes, as the package docs (Transport) state. It returns
// the last attempt's response, whose Body's Close releases that
// attempt's lanes (or, when the lanes refuse a retry, the answer retried,
// which holds nothing), or an error: the lanes' (a [*lanequeue.LaneError],
// or one matching semaphore.ErrClosed), Key's, one matching
// semaphore.ErrInvalidWeight for an estimate of Tokens below 1, the
// request's context's, or the last attempt's. It never changes req, and closes req.Body, as
// http.RoundTripper requires.
//
// Cancellation: the request's context bounds every wait (for the lanes,
// between attempts, and the attempt itself): when it ends, RoundTrip
// returns its error and holds nothing.
func (t *Transport[K]) RoundTrip(req *http.Request) (*http.Response, error) {
	cfg := &t.cfg
	ctx := req.Context()
	body := req.Body // the caller's, until an attempt is given it
	defer func() {
		if body != nil {
			body.Close()
		}
	}()
	var key K
	if cfg.Key != nil {
		var err error
		if key, err = cfg.Key(req); err != nil {
			return nil, err
		}
	}
	var optBuf [1]semaphore.AcquireOption // on the stack: AcquireAll keeps no option
	est, opts, err := t.acquireOptions(req, optBuf[:0])
	if err != nil {
		return nil, err
	}
	t.earnRetry()
	rewind := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	safe := cfg.RetryUnsafe || safeToRepeat(req)
	var last *http.Response // the answer of the attempt retried, kept (see kept)
	for n := 1; ; n++ {
		tk, err := cfg.Queue.AcquireAll(ctx, key, cfg.Lanes, opts...)
		if err != nil {
			if last != nil && ctx.Err() == nil {
				// A lane refused the retry (its line full, the queue
				// drained or closed while the call waited, holding no
				// lanes): the retry is not sent, and the caller gets
				// the answer it would have had without one.
				return last, nil
			}
			return nil, err
		}
		last = nil
		areq := req
		if n > 1 {
			if areq, err = rewound(req); err != nil {
				tk.Release()
				return nil, err
			}
		}
		body = nil // the base closes it
		resp, v, err := t.attempt(tk, req, areq)
		if v.Overload && v.HasAfter && v.After > 0 {
			// Every caller of these lanes pauses, not only this one:
			// the provider's limit is theirs too.
			for _, name := range t.cool {
				// A lane of the set, never unknown; a fleet lane that fails to
				// pause its fleet is paused here all the same.
				_ = cfg.Queue.Cooldown(req.Context(), name, v.After)
			}
		}
		if v.Overload && v.TokensSpent && cfg.TokensLane != "" {
			// The provider's token window is full, whatever the lane
			// counted, with a retry time or without: a token lane counts
			// it full too.
			_ = cfg.Queue.Exhaust(cfg.TokensLane)
		}
		if (v.Overload || unsent(err)) && cfg.TokensLane != "" {
			// The provider refused or never saw the attempt: it used
			// none of the tokens charged for it (refused by a lane that
			// is not a token lane: the estimate stands there).
			_ = tk.Settle(cfg.TokensLane, 0)
		}
		outcome := attemptOutcome(resp, err, v)
		retry := v.Retry && n < cfg.MaxAttempts && rewind &&
			(safe || v.Overload || unsent(err))
		var wait time.Duration
		if retry {
			wait = t.backoff(n, v)
			if dl, ok := ctx.Deadline(); ok && cfg.Clock.Now().Add(wait).After(dl) {
				retry = false // the caller would be gone before the retry: give it this answer
			}
		}
		if !retry || !t.spendRetry() {
			if err != nil {
				tk.Finish(outcome)
				return nil, err
			}
			return t.holdUntilClosed(resp, tk, outcome, est), nil
		}
		last = kept(resp)
		tk.Finish(outcome)
		if err := t.sleep(ctx, wait); err != nil {
			return nil, err
		}
		// Slept out, or cut short by the queue stopping: then the next
		// AcquireAll refuses, and the caller gets the answer kept.
	}
}

// attempt sends areq through the base and classifies what came back. If
// the base or the classifier panics, it releases tk (reporting nothing),
// closes the base's answer if there is one, and the panic goes on.
func (t *Transport[K]) attempt(tk *lanequeue.Ticket[K], req, areq *http.Request) (resp *http.Response, v Verdict, err error) {
	done := false
	defer func() {
		if !done {
			if resp != nil && resp.Body != nil {
				resp.Body.Close() // the classifier panicked: nobody else will
			}
			tk.Release()
		}
	}()
	resp, err = t.cfg.Base.RoundTrip(areq)
	a := Attempt{Request: req, Response: resp, Err: err}
	if t.stamp {
		a.Now = t.cfg.Clock.Now()
	}
	v = t.cfg.Classify(a)
	done = true
	return resp, v, err
}

// rewound is a copy of req, for a retry, with its body read again from
// GetBody.
func rewound(req *http.Request) (*http.Request, error) {
	r := new(http.Request)
	*r = *req
	if req.Body != nil && req.Body != http.NoBody {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// acquireOptions returns req's token estimate and the per-call options
// of its attempts, appended to buf: the estimate as the weight of the
// tokens lane. It is the one place that names lanequeue's per-call
// options. An estimate below 1 is refused, not raised: a weight the
// caller did not ask for would be charged in its name.
func (t *Transport[K]) acquireOptions(req *http.Request, buf []semaphore.AcquireOption) (int64, []semaphore.AcquireOption, error) {
	if t.cfg.TokensLane == "" {
		return 0, buf, nil
	}
	est := t.cfg.Tokens(req)
	if est < 1 {
		return 0, nil, fmt.Errorf("lanehttp: TransportConfig.Tokens estimated %d tokens: must be at least 1: %w", est, semaphore.ErrInvalidWeight)
	}
	return est, append(buf, lanequeue.LaneWeight(t.cfg.TokensLane, est)), nil
}

// earnRetry adds a request's share to the retry budget, up to its cap.
func (t *Transport[K]) earnRetry() {
	for {
		b := t.budget.Load()
		if b >= t.cap || t.budget.CompareAndSwap(b, min(t.cap, b+t.earn)) {
			return
		}
	}
}

// spendRetry takes one retry from the budget, if it holds one.
func (t *Transport[K]) spendRetry() bool {
	for {
		b := t.budget.Load()
		if b < budgetUnit {
			return false
		}
		if t.budget.CompareAndSwap(b, b-budgetUnit) {
			return true
		}
	}
}

// backoff is the wait before the n-th retry (n from 1):
// max(After, step/2) + a uniform jitter in [0, step/2], where step is
// Backoff doubled n-1 times, at most MaxBackoff, and After the verdict's
// hint (0 without one).
func (t *Transport[K]) backoff(n int, v Verdict) time.Duration {
	step := t.cfg.Backoff
	for i := 1; i < n && step < t.cfg.MaxBackoff; i++ {
		if step > t.cfg.MaxBackoff/2 {
			step = t.cfg.MaxBackoff
			break
		}
		step *= 2
	}
	step = min(step, t.cfg.MaxBackoff)
	half := step / 2
	base := half
	if v.HasAfter {
		base = max(half, min(v.After, MaxRetryAfter))
	}
	return base + time.Duration(rand.Int64N(int64(half)+1))
}

// sleep waits d on the transport's clock, or until ctx ends (returning
// its error), or until the queue stops admitting work (Queue.Stopping),
// which would refuse the retry: waiting on would only delay the caller's
// answer, and a drain's end. A call whose ctx carries a ticket waits d
// out, since a drain admits it as the ticket's work if the ticket is of
// the queue and held (see lanequeue.WithTicket).
func (t *Transport[K]) sleep(ctx context.Context, d time.Duration) error {
	tm := t.cfg.Clock.NewTimer(d)
	stopping := t.cfg.Queue.Stopping()
	if _, ok := lanequeue.TicketFrom[K](ctx); ok {
		stopping = nil // never ready
	}
	select {
	case <-tm.C():
		return nil
	case <-stopping:
		tm.Stop()
		return nil
	case <-ctx.Done():
		tm.Stop()
		return ctx.Err()
	}
}

// CloseIdleConnections closes the idle connections of the Base, if it
// has such a method (http.Client.CloseIdleConnections calls it).
func (t *Transport[K]) CloseIdleConnections() {
	if c, ok := t.cfg.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// attemptOutcome is what an attempt's lanes' observers are told: an
// overload as adaptive.ErrOverload (a [*StatusError] for a response),
// any other failed response as a StatusError wrapping nothing, an error
// as it is (an adaptive controller ignores both), a success as nil.
func attemptOutcome(resp *http.Response, err error, v Verdict) error {
	switch {
	case err != nil && v.Overload:
		return errors.Join(adaptive.ErrOverload, err)
	case err != nil:
		return err
	case v.Overload:
		return &StatusError{Status: resp.StatusCode, Err: adaptive.ErrOverload}
	case resp.StatusCode >= 500:
		return &StatusError{Status: resp.StatusCode}
	}
	return nil
}

// kept reads the body of a retried attempt's answer (resp, nil for
// none), up to maxDrain, and closes it, so that the connection goes back
// to the pool during the wait. It returns the answer with its body in
// memory, for a retry that the lanes refuse (see RoundTrip), if the body
// is at most maxKeep long; else, or if the read failed, nil.
func kept(resp *http.Response) *http.Response {
	if resp == nil {
		return nil
	}
	if resp.Body == nil { // a Base of the user's own may leave it nil
		k := *resp
		k.Body = http.NoBody
		return &k
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeep+1))
	if err != nil || len(b) > maxKeep {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain-int64(len(b)))
		return nil
	}
	k := *resp
	k.Body = io.NopCloser(bytes.NewReader(b))
	return &k
}

// maxKeep is how much of a retried answer's body is kept for the caller
// while the call waits to retry: a refusal's body is short (an error's
// JSON); a longer one (an HTML error page) is not kept.
const maxKeep = 8 << 10

// maxDrain is how much of a retried attempt's body is read before it is
// closed, so that its connection can carry the next attempt; a longer one
// costs its connection instead.
const maxDrain = 64 << 10

// holdUntilClosed makes resp's body finish tk with outcome when it is
// closed, once, after settling the tokens lane to the call's usage if
// the transport has a Usage; est is the estimate tk holds of that lane.
func (t *Transport[K]) holdUntilClosed(resp *http.Response, tk *lanequeue.Ticket[K], outcome error, est int64) *http.Response {
	if resp.Body == nil {
		tk.Finish(outcome)
		return resp
	}
	if _, ok := resp.Body.(io.Writer); ok { // a 101 Switching Protocols' connection
		b := &laneRWBody[K]{}
		b.ReadCloser, b.t, b.outcome = resp.Body, tk, outcome
		resp.Body = b
		return resp
	}
	if t.cfg.Usage != nil {
		b := &usageBody[K]{resp: resp, usage: t.cfg.Usage, lane: t.cfg.TokensLane, est: est}
		b.ReadCloser, b.t, b.outcome = resp.Body, tk, outcome
		resp.Body = b
		return resp
	}
	resp.Body = &laneBody[K]{ReadCloser: resp.Body, t: tk, outcome: outcome}
	return resp
}

// laneBody is a response's body that releases its attempt's lanes when
// closed.
type laneBody[K comparable] struct {
	io.ReadCloser
	t       *lanequeue.Ticket[K]
	outcome error
	closed  atomic.Bool
}

// Close closes the body and, the first time, finishes the ticket.
func (b *laneBody[K]) Close() error {
	err := b.ReadCloser.Close()
	if b.closed.CompareAndSwap(false, true) {
		b.t.Finish(b.outcome)
	}
	return err
}

// laneRWBody is a laneBody that can be written to, as the body of a 101
// Switching Protocols response can.
type laneRWBody[K comparable] struct{ laneBody[K] }

func (b *laneRWBody[K]) Write(p []byte) (int, error) {
	return b.ReadCloser.(io.Writer).Write(p)
}
