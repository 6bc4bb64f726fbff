package lanehttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/lanehttp"
)

// TestTransportWaitsTheProvidersRetryTime (issue 24): a 429 with each
// form of retry time is retried after at least that time (plus at most
// half a backoff step of jitter); a malformed one falls back to the
// backoff, a huge one is capped at MaxRetryAfter. The provider's Date is
// the fake clock's now, so absolute times read as the same waits.
func TestTransportWaitsTheProvidersRetryTime(t *testing.T) {
	const half = backoff / 2
	date := []string{"date", "Wed, 02 Dec 2026 05:00:00 GMT"}
	cases := []struct {
		name string
		kv   []string
		hint time.Duration // the wait is in [max(hint, half), max(hint, half)+half]
	}{
		{"Retry-After seconds", []string{"retry-after", "7"}, 7 * time.Second},
		{"Retry-After fraction", []string{"retry-after", "1.5"}, 1500 * time.Millisecond},
		{"Retry-After IMF date", append(date, "retry-after", "Wed, 02 Dec 2026 05:00:30 GMT"), 30 * time.Second},
		{"Retry-After RFC 850 date", append(date, "retry-after", "Wednesday, 02-Dec-26 05:00:30 GMT"), 30 * time.Second},
		{"Retry-After asctime date", append(date, "retry-after", "Wed Dec  2 05:00:30 2026"), 30 * time.Second},
		{"Retry-After past date", append(date, "retry-after", "Tue, 01 Dec 2026 05:00:00 GMT"), 0},
		{"retry-after-ms", []string{"retry-after-ms", "1500", "retry-after", "2"}, 1500 * time.Millisecond},
		{"x-ratelimit-reset-requests", []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "20s"}, 20 * time.Second},
		{"x-ratelimit-reset-tokens", []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1m30.5s"}, 90500 * time.Millisecond},
		{"x-ratelimit-reset 6m0s", []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"}, lanehttp.MaxRetryAfter},
		{"anthropic requests reset", append(date, "anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-12-02T05:00:40Z"), 40 * time.Second},
		{"anthropic tokens reset", append(date, "anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2026-12-02T05:01:00.5Z"), 60500 * time.Millisecond},
		{"anthropic input tokens reset", append(date, "anthropic-ratelimit-input-tokens-reset", "2026-12-02T05:00:12Z"), 12 * time.Second},
		{"anthropic output tokens reset", append(date, "anthropic-ratelimit-output-tokens-reset", "2026-12-02T05:00:13Z"), 13 * time.Second},

		// Malformed: the backoff decides.
		{"Retry-After word", []string{"retry-after", "soon"}, 0},
		{"Retry-After negative", []string{"retry-after", "-5"}, 0},
		{"Retry-After exponent", []string{"retry-after", "1e3"}, 0},
		{"retry-after-ms NaN", []string{"retry-after-ms", "NaN"}, 0},
		{"x-ratelimit-reset no unit", []string{"x-ratelimit-reset-requests", "20"}, 0},
		{"anthropic reset no zone", []string{"anthropic-ratelimit-requests-reset", "2026-12-02T05:00:40"}, 0},
		{"no hint", nil, 0},

		// Huge: capped, never an unbounded pause.
		{"Retry-After overflow", []string{"retry-after", "99999999999999999999"}, lanehttp.MaxRetryAfter},
		{"Retry-After a day", []string{"retry-after", "86400"}, lanehttp.MaxRetryAfter},
		{"Retry-After year 9999", append(date, "retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"), lanehttp.MaxRetryAfter},
		{"retry-after-ms overflow", []string{"retry-after-ms", "99999999999999999999999999999.9"}, lanehttp.MaxRetryAfter},
		{"x-ratelimit-reset overflow", []string{"x-ratelimit-reset-tokens", "2562047h2562047h2562047h"}, lanehttp.MaxRetryAfter},
		{"anthropic reset year 9999", append(date, "anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z"), lanehttp.MaxRetryAfter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, refuseOnce(http.StatusTooManyRequests, c.kv...), nil)
			done := testkit.Go(func() error {
				resp, err := g.get(context.Background())
				if err != nil {
					return err
				}
				if s := readAll(t, resp); resp.StatusCode != http.StatusOK || s != "ok" {
					return errors.New("the retry got " + resp.Status + " " + s)
				}
				return nil
			})
			d := g.clk.next(t)
			lo := max(c.hint, half)
			if d < lo || d > lo+half {
				t.Errorf("waited %v; want within [%v, %v]", d, lo, lo+half)
			}
			g.clk.Advance(d)
			must(t, testkit.Recv(t, done, "the retried request"))
			if n := g.attempts.Load(); n != 2 {
				t.Errorf("the provider got %d attempts; want 2", n)
			}
			nothingHeld(t, g.q)
		})
	}
}

// TestTransportBackoffDoublesAndIsBounded: without a hint, the n-th
// retry waits within [step/2, step], step doubling from Backoff up to
// MaxBackoff.
func TestTransportBackoffDoublesAndIsBounded(t *testing.T) {
	g := newRig(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n < 6 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}, func(c *lanehttp.TransportConfig[string]) { c.MaxAttempts = 6; c.MaxBackoff = 4 * backoff })
	done := testkit.Go(func() error {
		resp, err := g.get(context.Background())
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	for i, step := range []time.Duration{backoff, 2 * backoff, 4 * backoff, 4 * backoff, 4 * backoff} {
		d := g.clk.next(t)
		if d < step/2 || d > step {
			t.Errorf("retry %d waited %v; want within [%v, %v]", i+1, d, step/2, step)
		}
		g.clk.Advance(d)
	}
	must(t, testkit.Recv(t, done, "the request"))
	nothingHeld(t, g.q)
}

// TestTransportRetriesWithTheSameBody: a POST refused twice (503, then
// 429) is sent three times, with the whole body each time (rewound with
// GetBody).
func TestTransportRetriesWithTheSameBody(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hello"}]}`
	var mu sync.Mutex
	var got []string // guarded by mu
	rec := &bodyRecorder{}
	g := newRig(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	}, func(c *lanehttp.TransportConfig[string]) { rec.base = c.Base; c.Base = rec })
	done := testkit.Go(func() error {
		resp, err := g.post(context.Background(), body)
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	g.clk.Advance(g.clk.next(t))
	g.clk.Advance(g.clk.next(t))
	must(t, testkit.Recv(t, done, "the request"))
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("the provider got %d attempts; want 3", len(got))
	}
	sent := rec.bodies()
	if len(sent) != 3 {
		t.Fatalf("the base was given %d attempts; want 3", len(sent))
	}
	for i := range 3 {
		if got[i] != body || sent[i] != body {
			t.Errorf("attempt %d: the base was given %q, the provider got %q; want %q", i+1, sent[i], got[i], body)
		}
	}
	nothingHeld(t, g.q)
}

// bodyRecorder is a base that reads each attempt's body itself, notes
// it, and sends a copy through base: net/http's own transport would
// repair a body read twice with GetBody, and hide that the transport had
// not rewound it.
type bodyRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string // guarded by mu
}

func (r *bodyRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.seen = append(r.seen, string(b))
	r.mu.Unlock()
	out := req.Clone(req.Context())
	out.Body, out.GetBody, out.ContentLength = io.NopCloser(strings.NewReader(string(b))), nil, int64(len(b))
	return r.base.RoundTrip(out)
}

func (r *bodyRecorder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// onceReader is a body http.NewRequest cannot rewind (no GetBody).
type onceReader struct{ io.Reader }

// TestTransportDoesNotRetryABodyItCannotRewind: a request whose body has
// no GetBody gets one attempt, and its answer.
func TestTransportDoesNotRetryABodyItCannotRewind(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "1"), nil)
	req, err := http.NewRequest(http.MethodPost, g.srv.URL, onceReader{strings.NewReader("once")})
	must(t, err)
	resp, err := g.client.Do(req)
	must(t, err)
	readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || g.attempts.Load() != 1 {
		t.Errorf("got %d after %d attempts; want 429 after 1", resp.StatusCode, g.attempts.Load())
	}
	nothingHeld(t, g.q)
}

// TestTransportRetriesUnsafeRequestsOnlyWhenUnprocessed: a POST that gets
// a 500 (the provider may have done the work) is not retried, unless it
// carries an Idempotency-Key or RetryUnsafe is set; a GET is.
func TestTransportRetriesUnsafeRequestsOnlyWhenUnprocessed(t *testing.T) {
	cases := []struct {
		name      string
		unsafeOK  bool
		method    string
		kv        []string
		wantTries int64
	}{
		{"POST", false, http.MethodPost, nil, 1},
		{"POST with Idempotency-Key", false, http.MethodPost, []string{"Idempotency-Key", "k1"}, 2},
		{"POST with RetryUnsafe", true, http.MethodPost, nil, 2},
		{"GET", false, http.MethodGet, nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, refuseOnce(http.StatusInternalServerError), func(cfg *lanehttp.TransportConfig[string]) { cfg.RetryUnsafe = c.unsafeOK })
			done := testkit.Go(func() int {
				req, err := http.NewRequest(c.method, g.srv.URL, strings.NewReader("x"))
				if err != nil {
					return 0
				}
				for i := 0; i+1 < len(c.kv); i += 2 {
					req.Header.Set(c.kv[i], c.kv[i+1])
				}
				resp, err := g.client.Do(req)
				if err != nil {
					return 0
				}
				readAll(t, resp)
				return resp.StatusCode
			})
			want := http.StatusInternalServerError
			if c.wantTries == 2 {
				g.clk.Advance(g.clk.next(t))
				want = http.StatusOK
			}
			if got := testkit.Recv(t, done, "the request"); got != want || g.attempts.Load() != c.wantTries {
				t.Errorf("got %d after %d attempts; want %d after %d", got, g.attempts.Load(), want, c.wantTries)
			}
			nothingHeld(t, g.q)
		})
	}
}

// TestTransportRetriesAPostWhoseDialFailed: a POST whose connection was
// refused never reached the provider, and is sent again.
func TestTransportRetriesAPostWhoseDialFailed(t *testing.T) {
	var dials atomic.Int64
	g := newRig(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }, nil)
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer base.CloseIdleConnections()
	set, err := g.q.Lanes("provider")
	must(t, err)
	client := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{Base: base, Queue: g.q, Lanes: set, Clock: g.clk})}
	done := testkit.Go(func() error {
		req, err := http.NewRequest(http.MethodPost, g.srv.URL, strings.NewReader("x"))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	g.clk.Advance(g.clk.next(t))
	must(t, testkit.Recv(t, done, "the request"))
	if n, a := dials.Load(), g.attempts.Load(); n != 2 || a != 1 {
		t.Errorf("%d dials, %d requests at the provider; want 2 and 1", n, a)
	}
	nothingHeld(t, g.q)
}

// TestTransportRetryBudget: with a budget of one retry and a ratio too
// small to earn another, the first request is retried once, and the
// second gets the provider's 429 (a response, not an error) at once.
func TestTransportRetryBudget(t *testing.T) {
	g := newRig(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}, func(c *lanehttp.TransportConfig[string]) { c.RetryBurst, c.RetryRatio = 1, 0.001 })
	done := testkit.Go(func() int {
		resp, err := g.get(context.Background())
		if err != nil {
			return 0
		}
		readAll(t, resp)
		return resp.StatusCode
	})
	g.clk.Advance(g.clk.next(t))
	if got := testkit.Recv(t, done, "the first request"); got != http.StatusTooManyRequests || g.attempts.Load() != 2 {
		t.Fatalf("first request: %d after %d attempts; want 429 after 2 (the budget's one retry)", got, g.attempts.Load())
	}
	second := testkit.Go(func() *http.Response {
		resp, err := g.get(context.Background())
		if err != nil {
			return nil
		}
		readAll(t, resp)
		return resp
	})
	// The last 429's Retry-After paused the lanes for every caller: the
	// second request waits it out in line, then gets no retry.
	if d := g.clk.next(t); d != time.Second {
		t.Fatalf("the second request waited %v in line; want the cooldown's 1s", d)
	}
	g.clk.Advance(time.Second)
	resp := testkit.Recv(t, second, "the second request")
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests || g.attempts.Load() != 3 {
		t.Fatalf("second request: %v after %d attempts in all; want 429 after 3", resp, g.attempts.Load())
	}
	if n := g.clk.Pending(); n != 0 {
		t.Errorf("%d timers armed; want none", n)
	}
	nothingHeld(t, g.q)
}

// TestTransportAnswersWhenTheRetryWouldMissTheDeadline: a retry time that
// ends after the request's deadline is not waited for: the caller gets
// the 429 at once.
func TestTransportAnswersWhenTheRetryWouldMissTheDeadline(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "60"), nil)
	ctx := testkit.NewExpiring()
	ctx.At = received.Add(30 * time.Second)
	defer ctx.Expire() // a transport that waits gives up at the test's end
	got := testkit.Go(func() *http.Response {
		resp, err := g.get(ctx)
		if err != nil {
			return nil
		}
		readAll(t, resp)
		return resp
	})
	resp := testkit.Recv(t, got, "the 429, at once")
	if resp == nil {
		t.Fatal("the request failed")
	}
	if resp.StatusCode != http.StatusTooManyRequests || g.attempts.Load() != 1 {
		t.Errorf("%d after %d attempts; want 429 after 1", resp.StatusCode, g.attempts.Load())
	}
	if resp.Header.Get("Retry-After") != "60" {
		t.Errorf("Retry-After %q; want the provider's 60", resp.Header.Get("Retry-After"))
	}
	nothingHeld(t, g.q)
}

// TestTransportOverloadPausesEveryCaller: a 429 with Retry-After pauses
// the provider's lanes for every caller of the transport, not only the
// retries of the request that got it: a request that comes meanwhile
// waits in line for the retry time before it is sent.
func TestTransportOverloadPausesEveryCaller(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "Retry-After", "30"), nil)
	status := func() int {
		resp, err := g.get(context.Background())
		if err != nil {
			return 0
		}
		readAll(t, resp)
		return resp.StatusCode
	}
	a := testkit.Go(status)
	waitA := g.clk.next(t) // a got the 429 and waits to retry
	b := testkit.Go(status)
	if waitB := g.clk.next(t); waitB != 30*time.Second {
		t.Fatalf("b waited %v in line; want the 30s the provider asked", waitB)
	}
	if n := g.attempts.Load(); n != 1 {
		t.Fatalf("the provider got %d requests during the pause; want only a's first", n)
	}
	g.clk.Advance(max(waitA, 30*time.Second))
	if sa, sb := testkit.Recv(t, a, "a"), testkit.Recv(t, b, "b"); sa != http.StatusOK || sb != http.StatusOK {
		t.Fatalf("a %d, b %d; want both 200 after the pause", sa, sb)
	}
	if n := g.attempts.Load(); n != 3 {
		t.Fatalf("the provider got %d requests; want 3", n)
	}
	nothingHeld(t, g.q)
}
