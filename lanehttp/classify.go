package lanehttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Attempt is one call to a provider as a [Classifier] sees it: the
// request sent and what came back, a response or an error (as from an
// [http.RoundTripper]: one of the two is nil).
type Attempt struct {
	// Request is the request sent.
	Request *http.Request
	// Response is the provider's response, nil when Err is not.
	Response *http.Response
	// Err is the error the call returned instead of a response.
	Err error
	// Now is when the response (or the error) came back: retry times are
	// measured from it (see [RetryAfter]). [DefaultClassifier] reads the
	// zero time as time.Now().
	Now time.Time
}

// Verdict is what a [Classifier] makes of an [Attempt]. Its zero value
// means done: a success, or a failure that another attempt would not fix
// (a 4xx is the caller's to correct); either way it is no overload.
type Verdict struct {
	// After is how long the provider asked to wait before the next
	// attempt; it means something only when HasAfter is true. It is at
	// most MaxRetryAfter, and 0 means "now".
	After time.Duration
	// Retry says that the attempt failed and that another attempt of the
	// same request may succeed and is safe to send.
	Retry bool
	// Overload says that the provider refused for being over a limit:
	// the observers of the lanes the attempt held (an adaptive
	// controller) are to be told adaptive.ErrOverload, as
	// [DefaultOutcome] tells them of a handler's 429.
	Overload bool
	// HasAfter says that After holds the provider's hint; when false, the
	// provider gave none and the caller's own backoff decides.
	HasAfter bool
	// TokensSpent says that the refusal was of the provider's token
	// budget (a remaining-tokens header of 0, see [TokensSpent]). Only
	// then does a [Transport] tell its TokensLane that the provider's
	// window is spent (lanequeue.Queue.Exhaust: a token lane counts it
	// full); a refusal of another limit leaves the lane's count as it is.
	TokensSpent bool
}

// Classifier makes a [Verdict] of each attempt's outcome. It is called
// once per attempt, must not read or close the response's body (the
// caller's to read), and may be called from several goroutines at once.
// [DefaultClassifier] is the one used unless replaced; a classifier for
// a particular provider can start from it:
//
//	func classify(a lanehttp.Attempt) lanehttp.Verdict {
//		if a.Response != nil && a.Response.StatusCode == http.StatusConflict {
//			return lanehttp.Verdict{Retry: true} // this provider's lock timeout
//		}
//		return lanehttp.DefaultClassifier(a)
//	}
type Classifier func(Attempt) Verdict

// DefaultClassifier is the [Classifier] used unless replaced. Of a
// response:
//   - 429 Too Many Requests, 503 Service Unavailable and 529 (Anthropic's
//     "overloaded"): an overload, retried, After read by [RetryAfter]
//     from the response's headers when it carries a hint (only an
//     overload's hint is read, because the reset headers come with every
//     response, successes included);
//   - 408 Request Timeout and any other 5xx except 501 Not Implemented
//     and 505 HTTP Version Not Supported (which the same request gets
//     again): retried, no overload (as [DefaultOutcome], it says nothing
//     about a limit), no After. A 5xx may come after the provider did the
//     work; a provider whose calls must not be repeated needs its own
//     classifier;
//   - anything else (1xx, 2xx, 3xx, and 4xx but 408 and 429): done.
//
// A failed response's X-Should-Retry header, which OpenAI's and
// Anthropic's APIs send and their SDKs obey, decides Retry when it says
// "true" or "false", and changes nothing else.
//
// Of an error: the request's context ending (the error is, or wraps,
// context.Canceled or context.DeadlineExceeded) is done, since the caller
// no longer waits for an answer. Any other error (a refused or reset
// connection, a timeout) is retried if the request is safe to send twice,
// which is all a client can assume when it cannot tell whether the
// provider received it: its method is idempotent (GET, HEAD, OPTIONS,
// TRACE, PUT, DELETE; RFC 9110 section 9.2.2), or it carries an
// Idempotency-Key or X-Idempotency-Key header. An error before the
// request had a connection (a dial or a proxy connect that failed: the
// provider saw none of it) is retried whatever the method. Such an error
// is no overload and has no After.
//
// Whether a request's body can be sent again (no body, or GetBody set) is
// not the classifier's concern but the caller's, which must rewind it.
func DefaultClassifier(a Attempt) Verdict {
	if a.Err != nil {
		if errors.Is(a.Err, context.Canceled) || errors.Is(a.Err, context.DeadlineExceeded) {
			return Verdict{}
		}
		return Verdict{Retry: unsent(a.Err) || safeToRepeat(a.Request)}
	}
	resp := a.Response
	if resp == nil {
		return Verdict{}
	}
	var v Verdict
	switch code := resp.StatusCode; {
	case overloaded(code):
		v.Overload, v.Retry = true, true
		now := a.Now
		if now.IsZero() {
			now = time.Now()
		}
		v.After, v.HasAfter = RetryAfter(resp, now)
		v.TokensSpent = TokensSpent(resp)
	case code == http.StatusRequestTimeout:
		v.Retry = true
	case code == http.StatusNotImplemented || code == http.StatusHTTPVersionNotSupported:
		// Done: the same request would get the same answer.
	case code >= 500 && code <= 599:
		v.Retry = true
	}
	if resp.StatusCode >= 400 {
		switch first(resp.Header, hdrShouldRetry) {
		case "true":
			v.Retry = true
		case "false":
			v.Retry = false
		}
	}
	return v
}

// statusOverloaded is the status Anthropic's API answers when it is over
// capacity as a whole (its "overloaded_error"); net/http names no 529.
const statusOverloaded = 529

// overloaded says that status is a refusal for being over a limit: 429,
// 503 and 529. It is the one table of the package, for what a handler
// answers ([DefaultOutcome]) and what a provider answers
// ([DefaultClassifier]).
func overloaded(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == statusOverloaded
}

// hdrShouldRetry is the provider's own word on whether to retry, in
// canonical form.
const hdrShouldRetry = "X-Should-Retry"

// safeToRepeat says whether req may be sent again without knowing whether
// the provider received it, as DefaultClassifier documents.
func safeToRepeat(req *http.Request) bool {
	if req == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true // "" is GET for an http.Client
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}

// unsent says that err came before the request had a connection to be
// written to (a dial or proxy connect that failed), so the provider saw
// none of it.
func unsent(err error) bool {
	if err == nil {
		return false // before op, which errors.As moves to the heap: a success allocates nothing here
	}
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}
