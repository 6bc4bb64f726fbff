package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlane/lanes/lanehttp"
)

// TestDefaultClassifierResponses: what DefaultClassifier documents for
// each status: 429, 503 and 529 are overloads with the headers' hint;
// 408 and the 5xx but 501 and 505 are retried without one; the rest are
// done; X-Should-Retry decides Retry on a failure.
func TestDefaultClassifierResponses(t *testing.T) {
	post := &http.Request{Method: http.MethodPost, Header: http.Header{}}
	hinted := []string{"retry-after", "7"}
	cases := []struct {
		status int
		kv     []string
		want   lanehttp.Verdict
	}{
		{200, hinted, lanehttp.Verdict{}},
		{201, nil, lanehttp.Verdict{}},
		{204, hinted, lanehttp.Verdict{}},
		{101, nil, lanehttp.Verdict{}},
		{301, hinted, lanehttp.Verdict{}},
		{304, nil, lanehttp.Verdict{}},
		{400, nil, lanehttp.Verdict{}},
		{401, nil, lanehttp.Verdict{}},
		{403, nil, lanehttp.Verdict{}},
		{404, nil, lanehttp.Verdict{}},
		{409, nil, lanehttp.Verdict{}},
		{413, hinted, lanehttp.Verdict{}},
		{422, nil, lanehttp.Verdict{}},
		{408, hinted, lanehttp.Verdict{Retry: true}},
		{429, nil, lanehttp.Verdict{Retry: true, Overload: true}},
		{429, hinted, lanehttp.Verdict{Retry: true, Overload: true, After: 7 * time.Second, HasAfter: true}},
		{429, []string{"retry-after", "0"}, lanehttp.Verdict{Retry: true, Overload: true, After: 0, HasAfter: true}},
		{429, []string{"retry-after", "nonsense"}, lanehttp.Verdict{Retry: true, Overload: true}},
		{429, []string{"retry-after", "86400"}, lanehttp.Verdict{Retry: true, Overload: true, After: lanehttp.MaxRetryAfter, HasAfter: true}},
		{429, []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "12s"}, lanehttp.Verdict{Retry: true, Overload: true, After: 12 * time.Second, HasAfter: true, TokensSpent: true}},
		{429, []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "12s", "x-ratelimit-remaining-tokens", "40"}, lanehttp.Verdict{Retry: true, Overload: true, After: 12 * time.Second, HasAfter: true}},
		{429, []string{"anthropic-ratelimit-input-tokens-remaining", "0", "retry-after", "7"}, lanehttp.Verdict{Retry: true, Overload: true, After: 7 * time.Second, HasAfter: true, TokensSpent: true}},
		{429, []string{"anthropic-ratelimit-tokens-remaining", "none", "retry-after", "7"}, lanehttp.Verdict{Retry: true, Overload: true, After: 7 * time.Second, HasAfter: true}},
		{200, []string{"x-ratelimit-remaining-tokens", "0"}, lanehttp.Verdict{}}, // only a refusal says anything of a limit
		{503, hinted, lanehttp.Verdict{Retry: true, Overload: true, After: 7 * time.Second, HasAfter: true}},
		{503, nil, lanehttp.Verdict{Retry: true, Overload: true}},
		{529, nil, lanehttp.Verdict{Retry: true, Overload: true}},
		{529, hinted, lanehttp.Verdict{Retry: true, Overload: true, After: 7 * time.Second, HasAfter: true}},
		{500, hinted, lanehttp.Verdict{Retry: true}},
		{502, nil, lanehttp.Verdict{Retry: true}},
		{504, nil, lanehttp.Verdict{Retry: true}},
		{599, nil, lanehttp.Verdict{Retry: true}},
		{501, hinted, lanehttp.Verdict{}},
		{505, nil, lanehttp.Verdict{}},
		{600, nil, lanehttp.Verdict{}},

		// X-Should-Retry decides Retry of a failure, nothing else.
		{429, []string{"x-should-retry", "false", "retry-after", "7"}, lanehttp.Verdict{Overload: true, After: 7 * time.Second, HasAfter: true}},
		{500, []string{"x-should-retry", "false"}, lanehttp.Verdict{}},
		{409, []string{"x-should-retry", "true"}, lanehttp.Verdict{Retry: true}},
		{400, []string{"x-should-retry", "true"}, lanehttp.Verdict{Retry: true}},
		{501, []string{"x-should-retry", "true"}, lanehttp.Verdict{Retry: true}},
		{500, []string{"x-should-retry", "maybe"}, lanehttp.Verdict{Retry: true}},
		{200, []string{"x-should-retry", "true"}, lanehttp.Verdict{}},
		{304, []string{"x-should-retry", "true"}, lanehttp.Verdict{}},
	}
	for _, c := range cases {
		resp := response(c.status, c.kv...)
		resp.Request = post
		got := lanehttp.DefaultClassifier(lanehttp.Attempt{Request: post, Response: resp, Now: received})
		if got != c.want {
			t.Errorf("%d %q: %+v; want %+v", c.status, c.kv, got, c.want)
		}
	}
	if got := lanehttp.DefaultClassifier(lanehttp.Attempt{Request: post, Now: received}); got != (lanehttp.Verdict{}) {
		t.Errorf("no response and no error: %+v; want done", got)
	}
}

// TestDefaultClassifierErrors: a context's end is done; any other error
// is retried when the request is safe to send twice (an idempotent method
// or an idempotency key), and is never an overload.
func TestDefaultClassifierErrors(t *testing.T) {
	req := func(method string, kv ...string) *http.Request {
		r := &http.Request{Method: method, Header: http.Header{}}
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		req  *http.Request
		err  error
		want bool // Retry
	}{
		{"GET refused", req(http.MethodGet), refused, true},
		{"zero method refused", req(""), refused, true},
		{"HEAD reset", req(http.MethodHead), syscall.ECONNRESET, true},
		{"OPTIONS EOF", req(http.MethodOptions), io.ErrUnexpectedEOF, true},
		{"TRACE EOF", req(http.MethodTrace), io.EOF, true},
		{"PUT EOF", req(http.MethodPut), io.EOF, true},
		{"DELETE EOF", req(http.MethodDelete), io.EOF, true},
		{"POST EOF", req(http.MethodPost), io.EOF, false},
		{"POST refused", req(http.MethodPost), refused, true},
		{"POST refused, wrapped", req(http.MethodPost), fmt.Errorf("transport: %w", refused), true},
		{"POST through a proxy refused", req(http.MethodPost), &net.OpError{Op: "proxyconnect", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"POST reset while reading", req(http.MethodPost), &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"PATCH EOF", req(http.MethodPatch), io.EOF, false},
		{"POST with Idempotency-Key", req(http.MethodPost, "idempotency-key", "k1"), io.EOF, true},
		{"POST with X-Idempotency-Key", req(http.MethodPost, "x-idempotency-key", "k1"), io.EOF, true},
		{"no request", nil, io.EOF, false},
		{"GET cancelled", req(http.MethodGet), context.Canceled, false},
		{"GET past its deadline", req(http.MethodGet), fmt.Errorf("net/http: request: %w", context.DeadlineExceeded), false},
		{"POST with a key cancelled", req(http.MethodPost, "idempotency-key", "k1"), context.Canceled, false},
	}
	for _, c := range cases {
		got := lanehttp.DefaultClassifier(lanehttp.Attempt{Request: c.req, Err: c.err, Now: received})
		if want := (lanehttp.Verdict{Retry: c.want}); got != want {
			t.Errorf("%s (%v): %+v; want %+v", c.name, c.err, got, want)
		}
	}
	// An error beside a response (which a RoundTripper should not return)
	// is read as the error.
	got := lanehttp.DefaultClassifier(lanehttp.Attempt{Request: req(http.MethodPost), Response: response(429, "retry-after", "7"), Err: errors.New("broken"), Now: received})
	if got != (lanehttp.Verdict{}) {
		t.Errorf("POST, 429 and an error: %+v; want the error's verdict, done", got)
	}
}

// TestDefaultClassifierZeroNowIsNow: an Attempt without Now is measured
// from the time of the call, not from year 1 (which would read any date
// as years ahead). The date is an hour past, so the wait is 0 however
// long the call takes.
func TestDefaultClassifierZeroNowIsNow(t *testing.T) {
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	got := lanehttp.DefaultClassifier(lanehttp.Attempt{Response: response(http.StatusTooManyRequests, "retry-after", past)})
	if want := (lanehttp.Verdict{Retry: true, Overload: true, After: 0, HasAfter: true}); got != want {
		t.Fatalf("Retry-After %q, zero Now: %+v; want %+v", past, got, want)
	}
}
