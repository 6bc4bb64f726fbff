package lanehttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// DefaultRetryAfter is the Retry-After of a refusal whose error carries no
// retry time, when [Config.RetryAfter] is 0.
const DefaultRetryAfter = time.Second

// DefaultMaxKeyBytes is the longest key, in bytes, that [Middleware]
// admits when [Config.MaxKeyBytes] is 0: room for a UUID, a hash in hex or
// a tenant and a session ID, and, with a keyed lane's default of 4096
// idle keys, at most 1 MiB of idle keys' bytes.
const DefaultMaxKeyBytes = 256

// ErrKeyTooLong is the error, wrapped, that [Config.Reject] is given for a
// request whose key is longer than [Config.MaxKeyBytes] (answered 400 Bad
// Request).
var ErrKeyTooLong = errors.New("lanehttp: key too long")

// Config says which lanes a request takes and how refusals are answered.
// Queue, Lanes and Key are required.
type Config[K comparable] struct {
	// Queue is the queue whose lanes the requests take.
	Queue *lanequeue.Queue[K]
	// Lanes is the set every request takes, prepared by Queue.Lanes.
	Lanes lanequeue.LaneSet[K]
	// Decode, if not nil, reads the request once before Key and Options:
	// the middleware reads the body whole, within MaxBodyBytes, and Decode
	// decodes it into a value that Key, Options and the handler read with
	// [Decoder.From] (see the package docs, Body). A body over MaxBodyBytes
	// answers 413 Content Too Large (Reject is given an error wrapping
	// [ErrBodyTooLarge]); an error of the decode, or of reading the body,
	// answers 400 Bad Request as Key's does. Either way the request reaches
	// no lane and the handler is not called. Nil (the default) reads
	// nothing: Key and Options see the request as it came.
	Decode BodyDecoder
	// MaxBodyBytes bounds the body that Decode is given, in bytes; 0 means
	// [DefaultMaxBodyBytes] (1 MiB), and a negative value makes Middleware
	// panic. Without Decode it bounds nothing.
	MaxBodyBytes int64
	// Key returns the request's key: its session, thread or tenant. An
	// error answers 400 Bad Request (the status text only: the error's text
	// is not sent, see Reject), and the handler is not called. Return an
	// error for a request that has no key (a missing header, say) rather
	// than the zero K: every request given the same key waits in that
	// key's one line, so keyless requests would all run one at a time.
	Key func(*http.Request) (K, error)
	// MaxKeyBytes bounds the key Key returns, in bytes: a longer one
	// answers 400 Bad Request (Reject is given an error wrapping
	// [ErrKeyTooLong]), reaches no lane and leaves nothing behind, and the
	// handler is not called. A key's bytes are those of its strings: a
	// string key's length; the sum of its strings' lengths for a key
	// that is a struct or an array (the rest of K is fixed by its type).
	// A string key is copied once checked, so a key cut from a longer
	// string (a part of a header) does not keep the rest alive; the
	// strings inside a struct or array key are not copied: Key should
	// return strings of their own (strings.Clone) for the bound to hold.
	// 0 means [DefaultMaxKeyBytes]; a negative value makes Middleware
	// panic. Raise it only as far as the keys need: a keyed lane keeps
	// every idle key's bytes for its idle timeout (see the package docs).
	MaxKeyBytes int
	// Options, if not nil, returns the request's acquire options: its
	// weight (semaphore.Weight, lanequeue.LaneWeight), priority
	// (semaphore.Priority), sequence number (semaphore.Sequence). An error answers 400
	// Bad Request as Key's does.
	Options func(*http.Request) ([]semaphore.AcquireOption, error)
	// Outcome, if not nil, maps the status of the handler's answer to the
	// error the request's ticket is finished with ([lanequeue.Ticket.Finish]),
	// which the observers of its lanes classify (an adaptive.Controller:
	// nil a success, an error wrapping adaptive.ErrOverload an overload,
	// any other error nothing); nil means [DefaultOutcome]. The status is
	// the first final status the handler sent, or 200 if it sent none or
	// took the connection over (Hijack) before sending one. It is called
	// by the request's goroutine after the handler returns, before the
	// lanes are released; not for a handler that panics (its lanes are
	// released with no report).
	Outcome func(status int) error
	// RetryAfter is the Retry-After of a refusal whose error carries no
	// retry time (a full line, too many keys, a draining queue);
	// 0 means [DefaultRetryAfter]. A rate lane's refusal carries its own:
	// when its next token comes. It is sent in whole seconds, rounded up.
	RetryAfter time.Duration
	// Reject, if not nil, answers a request the middleware refuses instead
	// of the default answer (the status, a Retry-After header for 429 and
	// 503, and the status text as the body: never an error's text, which
	// may tell a client about the server's insides). It is given the
	// status the default would send and the error: of reading the body,
	// Decode, Key or Options for 400 and 413, of the acquire otherwise;
	// Retry-After is set on w's header already. It is not called for a
	// client that went away while it waited in line.
	Reject func(w http.ResponseWriter, r *http.Request, status int, err error)
}

// Handler returns next behind the lanes of cfg: each request takes the
// lanes (see [Middleware]).
func Handler[K comparable](cfg Config[K], next http.Handler) http.Handler {
	return Middleware(cfg)(next)
}

// Middleware returns a middleware that runs each request's handler while
// the request holds the lanes of cfg for its key, taken with
// [lanequeue.Queue.AcquireAll] and the request's context. When the handler
// returns, the ticket is finished ([lanequeue.Ticket.Finish]) with the
// outcome of its answer ([Config.Outcome]), which the observers of the
// lanes learn before the lanes are released; if the handler panics, the
// lanes are released, nothing is reported, and the panic goes on. The
// handler is given a ResponseWriter that notes the status and passes the
// rest through: http.ResponseController reaches the server's writer
// through its Unwrap method, and it implements http.Flusher and
// http.Hijacker by passing them on. The handler's request context carries
// the ticket ([lanequeue.WorkContext]), and also ends when a fleet lane's
// permit of the request ends before the handler returns (its lease lost in
// Redis), so that the handler stops before another holder is let in. A
// nested acquire with it that would wait for the ticket (the same key on
// its lanes, or another key on a global lane of it with no room for both;
// see lanequeue's Re-entry) fails at once with lanequeue.ErrReentrant
// rather than waiting for itself, and [lanequeue.TicketFrom] reads it.
//
// A request the lanes refuse gets, and its handler is not called:
//   - 429 Too Many Requests when the refusal is the request's own key's or
//     rate's: a keyed lane's line full for the key
//     (keyedsem.WithMaxWaitersPerKey) or a wait on it that took too long
//     or outlived the request's deadline, and a rate lane's next token
//     coming after the request's deadline;
//   - 503 Service Unavailable when it is the server's: a global lane's line
//     full (semaphore.WithMaxWaiters), a wait on it too long or past the
//     deadline, a keyed lane's table full ([keyedsem.ErrTooManyKeys]), a
//     closed or draining queue, and a global lane whose capacity is now
//     below the request's weight (a limit controller, package adaptive,
//     shrank it: it grows back);
//   - 500 Internal Server Error for what no retry mends (a weight above a
//     keyed lane's capacity, a re-entrant acquire, a key not equal to
//     itself);
//   - nothing, when the client went away while the request waited (its
//     context was cancelled): the request left the line, and there is
//     nobody to answer.
//
// 429 and 503 carry a Retry-After: the error's [lanequeue.LaneError]
// RetryAfter when known (a rate lane's next token), or [Config.RetryAfter].
//
// A request whose Decode, Key or Options fails, or whose key is longer
// than [Config.MaxKeyBytes], gets 400 Bad Request, and one whose body is
// longer than [Config.MaxBodyBytes] 413 Content Too Large, with the status
// text as the body (or [Config.Reject]'s answer); it reaches no lane. A
// Decode, Key or Options that panics does so before any lane is taken:
// the panic goes on, and nothing is held.
//
// Middleware panics if cfg has no Queue or Key, if Lanes is empty (not
// set: make it with Queue.Lanes), if Lanes is not a set of Queue, or if
// MaxKeyBytes or MaxBodyBytes is negative, or if Decode is a nil
// *Decoder: a programming error, found when the server is set up.
func Middleware[K comparable](cfg Config[K]) func(http.Handler) http.Handler {
	if cfg.Queue == nil {
		panic("lanehttp: Config.Queue is nil")
	}
	if cfg.Key == nil {
		panic("lanehttp: Config.Key is nil")
	}
	if err := cfg.Queue.Check(cfg.Lanes); errors.Is(err, semaphore.ErrInvalidConfig) {
		panic("lanehttp: Config.Lanes: " + err.Error() + ": set it to the lanes every request takes, made by Queue.Lanes")
	}
	switch {
	case cfg.MaxKeyBytes < 0:
		panic("lanehttp: Config.MaxKeyBytes is negative: 0 means DefaultMaxKeyBytes")
	case cfg.MaxKeyBytes == 0:
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if cfg.Decode != nil && cfg.Decode.isNil() {
		panic("lanehttp: Config.Decode is a nil *Decoder: leave Decode nil, or make one with new or NewDecoder")
	}
	switch {
	case cfg.MaxBodyBytes < 0:
		panic("lanehttp: Config.MaxBodyBytes is negative: 0 means DefaultMaxBodyBytes")
	case cfg.MaxBodyBytes == 0:
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	keyBytes, ownKey := keyMeasure[K](), keyOwner[K]()
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Outcome == nil {
		cfg.Outcome = DefaultOutcome
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body []byte
			if cfg.Decode != nil {
				var ok bool
				if r, body, ok = cfg.decode(w, r); !ok {
					return
				}
			}
			key, err := cfg.Key(r)
			if err != nil {
				cfg.answer(w, r, http.StatusBadRequest, err)
				return
			}
			if n := keyBytes(key); n > cfg.MaxKeyBytes {
				cfg.answer(w, r, http.StatusBadRequest, fmt.Errorf("%w: %d bytes, over Config.MaxKeyBytes (%d)", ErrKeyTooLong, n, cfg.MaxKeyBytes))
				return
			}
			key = ownKey(key)
			var opts []semaphore.AcquireOption
			if cfg.Options != nil {
				if opts, err = cfg.Options(r); err != nil {
					cfg.answer(w, r, http.StatusBadRequest, err)
					return
				}
			}
			ctx := r.Context()
			t, err := cfg.Queue.AcquireAll(ctx, key, cfg.Lanes, opts...)
			if err != nil {
				cfg.reject(w, r, err)
				return
			}
			finished, stop := false, func() {}
			defer func() {
				if !finished { // the handler, Outcome or a lane's PermitContext panicked
					stop()
					t.Release()
				}
			}()
			var wctx context.Context
			wctx, stop = lanequeue.WorkContext(ctx, t)
			sw := &statusWriter{ResponseWriter: w}
			hr := r.WithContext(wctx)
			if cfg.Decode != nil { // Key or Options may have read the body
				hr.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(sw, hr)
			stop()
			outcome := cfg.Outcome(sw.sent())
			finished = true
			t.Finish(outcome)
		})
	}
}

// reject answers a request whose acquire failed with err.
func (cfg *Config[K]) reject(w http.ResponseWriter, r *http.Request, err error) {
	status := Status(err)
	if status == 0 {
		if r.Context().Err() != nil {
			return // the client went away
		}
		status = http.StatusServiceUnavailable // a context of the server's
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		retry := cfg.RetryAfter
		var le *lanequeue.LaneError
		if errors.As(err, &le) && le.RetryAfter > 0 {
			retry = le.RetryAfter
		}
		w.Header().Set("Retry-After", strconv.FormatInt(seconds(retry), 10))
	}
	cfg.answer(w, r, status, err)
}

// answer refuses the request with status: by Reject, or with the status
// text (not err's: it may be internal).
func (cfg *Config[K]) answer(w http.ResponseWriter, r *http.Request, status int, err error) {
	if cfg.Reject != nil {
		cfg.Reject(w, r, status, err)
		return
	}
	http.Error(w, http.StatusText(status), status)
}

// Status returns the HTTP status that [Middleware] answers an acquire
// error with: 429, 503 or 500 as Middleware says, or 0 for a context
// cancelled while the request waited (the client went away: no answer).
func Status(err error) int {
	var le *lanequeue.LaneError
	isLane := errors.As(err, &le)
	switch {
	case errors.Is(err, semaphore.ErrClosed): // also lanequeue.ErrDraining
		return http.StatusServiceUnavailable
	case errors.Is(err, keyedsem.ErrTooManyKeys):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return 0
	case isLane && (errors.Is(err, semaphore.ErrQueueFull) || errors.Is(err, semaphore.ErrWaitTooLong) ||
		errors.Is(err, context.DeadlineExceeded)):
		if le.Kind == lanequeue.Global {
			return http.StatusServiceUnavailable
		}
		return http.StatusTooManyRequests // the key's own line, or its rate
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable // the deadline came before any lane was asked
	case isLane && le.Kind == lanequeue.Global && errors.Is(err, semaphore.ErrTooHeavy):
		return http.StatusServiceUnavailable // shrunk below the weight, as a controller does: it grows back
	}
	return http.StatusInternalServerError
}

// seconds is d in whole seconds, rounded up, at least 1.
func seconds(d time.Duration) int64 {
	s := math.Ceil(d.Seconds())
	if s < 1 {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(s)
}
