package lanehttp_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// stepClock is a fake clock that hands the test each wait the transport
// arms, once its timer is armed: receiving it is the test's cue that the
// transport waits, and what it waits is what the test checks.
type stepClock struct {
	*clock.Fake
	waits chan time.Duration
}

func (c *stepClock) NewTimer(d time.Duration) semaphore.Timer {
	tm := c.Fake.NewTimer(d)
	c.waits <- d
	return tm
}

// next returns the wait the transport armed next.
func (c *stepClock) next(t *testing.T) time.Duration {
	t.Helper()
	return testkit.Recv(t, c.waits, "the transport to wait before a retry")
}

// backoff is the rig's Backoff: its first retry waits max(After, 50ms)
// plus up to 50ms.
const backoff = 100 * time.Millisecond

// rig is a provider on loopback and a gateway's client for it, through a
// Transport over the lanes "provider" (concurrency 4), "rpm" (requests)
// and "tpm" (tokens: 100 a request), on a fake clock.
type rig struct {
	q        *lanequeue.Queue[string]
	provider *semaphore.Weighted // the provider lane's
	clk      *stepClock
	srv      *httptest.Server
	tr       *lanehttp.Transport[string]
	client   *http.Client
	attempts atomic.Int64 // requests the provider received
}

// newRig starts the provider, whose handler is given each request's
// number (from 1), and a transport configured by mod.
func newRig(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request), mod func(*lanehttp.TransportConfig[string])) *rig {
	t.Helper()
	g := &rig{q: lanequeue.New[string]()}
	g.provider = semaphore.New(4)
	must(t, g.q.Add("provider", lanequeue.NewGlobalLane[string](g.provider)))
	must(t, g.q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(1000, 1000))))
	must(t, g.q.Add("tpm", lanequeue.NewRateLane[string](rate.NewLimiter(1e6, 100_000))))
	set, err := g.q.Lanes("provider", "rpm", "tpm")
	must(t, err)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(g.attempts.Add(1), w, r)
	}))
	g.clk = &stepClock{Fake: clock.NewFake(received), waits: make(chan time.Duration, 16)}
	g.q.SetClock(g.clk)
	cfg := lanehttp.TransportConfig[string]{
		Base:  g.srv.Client().Transport,
		Queue: g.q, Lanes: set,
		TokensLane: "tpm", Tokens: func(*http.Request) int64 { return 100 },
		Backoff: backoff,
		Clock:   g.clk,
	}
	if mod != nil {
		mod(&cfg)
	}
	g.tr = lanehttp.NewTransport(cfg)
	g.client = &http.Client{Transport: g.tr}
	t.Cleanup(func() {
		g.client.CloseIdleConnections()
		g.srv.Close()
		g.q.Close()
	})
	return g
}

// get sends a GET to the provider with ctx.
func (g *rig) get(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.srv.URL+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	return g.client.Do(req)
}

// post sends body to the provider with ctx and the headers in kv.
func (g *rig) post(ctx context.Context, body string, kv ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.srv.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	return g.client.Do(req)
}

// refuseOnce answers the first request with status and the headers in kv,
// and the later ones 200 "ok".
func refuseOnce(status int, kv ...string) func(int64, http.ResponseWriter, *http.Request) {
	return func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			for i := 0; i+1 < len(kv); i += 2 {
				w.Header().Set(kv[i], kv[i+1])
			}
			w.WriteHeader(status)
			io.WriteString(w, `{"error":"rate limited"}`)
			return
		}
		io.WriteString(w, "ok")
	}
}

// readAll reads and closes resp's body.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	must(t, resp.Body.Close())
	return string(b)
}

// TestTransportClientGivesUpDuringBackoff: a client whose context is
// cancelled while the transport waits to retry gets the context's error
// at once, and nothing is held.
func TestTransportClientGivesUpDuringBackoff(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "20"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := testkit.Go(func() error {
		resp, err := g.post(ctx, "x")
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	g.clk.next(t) // waiting to retry
	cancel()
	if err := testkit.Recv(t, done, "the cancelled request"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	if n := g.attempts.Load(); n != 1 {
		t.Errorf("the provider got %d attempts; want 1", n)
	}
	if n := g.clk.Pending(); n != 0 {
		t.Errorf("%d timers left; want the wait's stopped", n)
	}
	nothingHeld(t, g.q)
}

// TestTransportClientGivesUpDuringAnAttempt: a client whose context is
// cancelled while the provider works on its retry gets the context's
// error, the attempt's lanes are given back, and it is not retried.
func TestTransportClientGivesUpDuringAnAttempt(t *testing.T) {
	working, hungUp := make(chan struct{}), make(chan struct{})
	g := newRig(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.Copy(io.Discard, r.Body) // then the server notices a hang-up
		close(working)
		select {
		case <-r.Context().Done(): // the client hung up
		case <-hungUp:
		}
	}, nil)
	defer close(hungUp)
	ctx, cancel := context.WithCancel(context.Background())
	done := testkit.Go(func() error {
		resp, err := g.post(ctx, "x")
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	g.clk.Advance(g.clk.next(t))
	testkit.Recv(t, working, "the second attempt to reach the provider")
	if st := stats(t, g.q, "provider"); st.Held != 1 {
		t.Errorf("during the attempt the provider lane holds %d; want 1", st.Held)
	}
	cancel()
	if err := testkit.Recv(t, done, "the cancelled request"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
	if n := g.attempts.Load(); n != 2 {
		t.Errorf("the provider got %d attempts; want 2", n)
	}
	nothingHeld(t, g.q)
}

// countingObserver counts the outcomes a lane is told, and keeps the
// last.
type countingObserver struct {
	mu   sync.Mutex
	errs []error // guarded by mu
}

func (o *countingObserver) Observe(err error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *countingObserver) seen() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs...)
}

// TestTransportBodyCloseReleasesOnce: the answer's lanes are held until
// its body is closed; the first Close releases them and reports the
// outcome, a second changes nothing. A retried 429 was reported before
// as an overload.
func TestTransportBodyCloseReleasesOnce(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "1"), nil)
	obs := &countingObserver{}
	must(t, g.q.ObserveLane("provider", obs))
	done := testkit.Go(func() *http.Response {
		resp, err := g.get(context.Background())
		if err != nil {
			return nil
		}
		return resp
	})
	g.clk.Advance(g.clk.next(t))
	resp := testkit.Recv(t, done, "the request")
	if resp == nil {
		t.Fatal("the request failed")
	}
	if st := stats(t, g.q, "provider"); st.Held != 1 {
		t.Errorf("before Close the provider lane holds %d; want 1", st.Held)
	}
	if n := len(obs.seen()); n != 1 {
		t.Errorf("before Close %d outcomes reported; want the 429's alone", n)
	}
	if s := readAll(t, resp); s != "ok" {
		t.Errorf("body %q; want ok", s)
	}
	if err := resp.Body.Close(); err != nil {
		t.Errorf("second Close: %v; want nil", err)
	}
	errs := obs.seen()
	if len(errs) != 2 || !errors.Is(errs[0], adaptive.ErrOverload) || errs[1] != nil {
		t.Errorf("outcomes %v; want [overload, nil]", errs)
	}
	nothingHeld(t, g.q)
	if st := stats(t, g.q, "provider"); st.Acquired != 2 || st.Released != 2 {
		t.Errorf("provider lane: %d acquired, %d released; want 2 and 2", st.Acquired, st.Released)
	}
}

// TestTransportLaneErrors: the lanes' refusals come back as their errors
// (a token estimate past the deadline, a closed queue),
// with no attempt sent, nothing held, and the request's body closed.
func TestTransportLaneErrors(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusOK), func(c *lanehttp.TransportConfig[string]) {
		c.Tokens = func(*http.Request) int64 { return 60_000 }
	})
	// The first request takes 60,000 of the 100,000 tokens; the next
	// one's come 200 s later, after its deadline.
	must(t, g.q.SetRate("tpm", 100, 100_000))
	resp, err := g.get(context.Background())
	must(t, err)
	readAll(t, resp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err = g.get(ctx); err == nil {
		readAll(t, resp)
	}
	var le *lanequeue.LaneError
	if !errors.As(err, &le) || le.Lane != "tpm" || le.RetryAfter <= 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("tokens out: %v; want tpm's LaneError with a RetryAfter, matching DeadlineExceeded", err)
	}

	g.q.Close()
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequest(http.MethodPost, g.srv.URL, body)
	must(t, err)
	_, err = g.client.Do(req)
	if !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("closed queue: %v; want ErrClosed", err)
	}
	if !body.closed.Load() {
		t.Error("the request's body was not closed")
	}
	if n := g.attempts.Load(); n != 1 {
		t.Errorf("the provider got %d attempts; want 1", n)
	}
	nothingHeld(t, g.q)
}

// closeRecorder notes that it was closed.
type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// TestTransportLaneFull: a request that finds the provider lane's line
// full gets its ErrQueueFull at once, naming the lane; nothing is sent.
func TestTransportLaneFull(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusOK), nil)
	q, set := providerQueue(t, semaphore.New(1, semaphore.WithMaxWaiters(1)))
	client := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{Base: g.srv.Client().Transport, Queue: q, Lanes: set, Clock: g.clk})}
	defer client.CloseIdleConnections()
	held, ok := q.TryAcquireAll("", set)
	if !ok {
		t.Fatal("TryAcquireAll failed on an idle lane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	waiting := testkit.Go(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.srv.URL, nil)
		if err != nil {
			return err
		}
		_, err = client.Do(req)
		return err
	})
	testkit.Eventually(t, "a request in the provider lane's line", func() bool { return stats(t, q, "provider").Waiters == 1 })
	req, err := http.NewRequest(http.MethodGet, g.srv.URL, nil)
	must(t, err)
	_, err = client.Do(req)
	var le *lanequeue.LaneError
	if !errors.Is(err, semaphore.ErrQueueFull) || !errors.As(err, &le) || le.Lane != "provider" {
		t.Errorf("full line: %v; want ErrQueueFull from lane provider", err)
	}
	cancel()
	if err := testkit.Recv(t, waiting, "the waiting request"); !errors.Is(err, context.Canceled) {
		t.Errorf("the waiter gave up with %v; want context.Canceled", err)
	}
	held.Release()
	if n := g.attempts.Load(); n != 0 {
		t.Errorf("the provider got %d attempts; want 0", n)
	}
	nothingHeld(t, q)
}

// TestTransportReportsOverloadsToAnAdaptiveLane: an adaptive controller
// driving the provider lane lowers its limit on the provider's 429.
func TestTransportReportsOverloadsToAnAdaptiveLane(t *testing.T) {
	g := newRig(t, refuseOnce(529), nil)
	c, err := adaptive.New(g.provider, 1, 4, adaptive.WithClock(g.clk.Fake))
	must(t, err)
	must(t, g.q.ObserveLane("provider", c))
	done := testkit.Go(func() error {
		resp, err := g.get(context.Background())
		if err == nil {
			readAll(t, resp)
		}
		return err
	})
	g.clk.Advance(g.clk.next(t))
	must(t, testkit.Recv(t, done, "the request"))
	if st := c.Stats(); st.OverloadDecreases != 1 || st.Limit != 3 {
		t.Errorf("controller: %d overload decreases, limit %d; want 1 and 3", st.OverloadDecreases, st.Limit)
	}
	nothingHeld(t, g.q)
}

// TestTransportReleasesWhenTheBasePanics: a base that panics leaves no
// lane held; the panic goes on.
func TestTransportReleasesWhenTheBasePanics(t *testing.T) {
	q, set := providerQueue(t, semaphore.New(1))
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{Base: panickingBase{}, Queue: q, Lanes: set})
	if v := roundTripPanicking(tr); v != errBoom {
		t.Errorf("recovered %v; want errBoom", v)
	}
	nothingHeld(t, q)
}

type panickingBase struct{}

func (panickingBase) RoundTrip(*http.Request) (*http.Response, error) { panic(errBoom) }

// TestTransportKeyError: Key's error is the request's, before any lane
// is taken, and the request's body is closed.
func TestTransportKeyError(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusOK), nil)
	errNoTenant := errors.New("no tenant")
	set, err := g.q.Lanes("provider")
	must(t, err)
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: g.srv.Client().Transport, Queue: g.q, Lanes: set,
		Key: func(*http.Request) (string, error) { return "", errNoTenant },
	})
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequest(http.MethodPost, g.srv.URL, body)
	must(t, err)
	if _, err := tr.RoundTrip(req); !errors.Is(err, errNoTenant) {
		t.Errorf("got %v; want Key's error", err)
	}
	if !body.closed.Load() {
		t.Error("the request's body was not closed")
	}
	if st := stats(t, g.q, "provider"); st.Acquired != 0 || g.attempts.Load() != 0 {
		t.Errorf("%d acquired, %d attempts; want none", st.Acquired, g.attempts.Load())
	}
}

// TestNewTransportPanicsOnMisconfiguration: a configuration no request
// could use is found when the client is set up.
func TestNewTransportPanicsOnMisconfiguration(t *testing.T) {
	q := lanequeue.New[string]()
	defer q.Close()
	must(t, q.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(1))))
	must(t, q.Add("tpm", lanequeue.NewRateLane[string](rate.NewLimiter(1, 1))))
	set, err := q.Lanes("provider")
	must(t, err)
	other := lanequeue.New[string]()
	defer other.Close()
	must(t, other.Add("provider", lanequeue.NewGlobalLane[string](semaphore.New(1))))
	otherSet, err := other.Lanes("provider")
	must(t, err)
	ok := lanehttp.TransportConfig[string]{Queue: q, Lanes: set}
	cases := map[string]func(*lanehttp.TransportConfig[string]){
		"no queue":            func(c *lanehttp.TransportConfig[string]) { c.Queue = nil },
		"no lanes":            func(c *lanehttp.TransportConfig[string]) { c.Lanes = lanequeue.LaneSet[string]{} },
		"another queue's set": func(c *lanehttp.TransportConfig[string]) { c.Lanes = otherSet },
		"tokens lane not in set": func(c *lanehttp.TransportConfig[string]) {
			c.TokensLane, c.Tokens = "tpm", func(*http.Request) int64 { return 1 }
		},
		"tokens lane, no Tokens": func(c *lanehttp.TransportConfig[string]) { c.TokensLane = "provider" },
		"negative attempts":      func(c *lanehttp.TransportConfig[string]) { c.MaxAttempts = -1 },
		"negative backoff":       func(c *lanehttp.TransportConfig[string]) { c.Backoff = -1 },
		"max below backoff":      func(c *lanehttp.TransportConfig[string]) { c.Backoff, c.MaxBackoff = time.Second, time.Millisecond },
		"negative ratio":         func(c *lanehttp.TransportConfig[string]) { c.RetryRatio = -0.1 },
		"NaN ratio":              func(c *lanehttp.TransportConfig[string]) { c.RetryRatio = math.NaN() },
		"huge ratio":             func(c *lanehttp.TransportConfig[string]) { c.RetryRatio = 1e300 },
		"negative burst":         func(c *lanehttp.TransportConfig[string]) { c.RetryBurst = -1 },
	}
	for name, mod := range cases {
		cfg := ok
		mod(&cfg)
		func() {
			defer func() {
				if v := recover(); v == nil {
					t.Errorf("%s: NewTransport did not panic", name)
				} else if s, _ := v.(string); !strings.HasPrefix(s, "lanehttp: ") {
					t.Errorf("%s: panicked with %v; want a lanehttp: message", name, v)
				}
			}()
			lanehttp.NewTransport(cfg)
		}()
	}
	lanehttp.NewTransport(ok) // the defaults do
}

// TestTransportSharesTheQueueWithTheMiddleware: one queue serves a
// gateway's inbound requests (the middleware's lanes) and its calls to
// the provider (the transport's): a handler's call made with its
// request's context is part of that request, so a drain begun while the
// handler runs admits the call, and ends once the answer's lanes are
// back.
func TestTransportSharesTheQueueWithTheMiddleware(t *testing.T) {
	g := newRig(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answer") }, nil)
	must(t, g.q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	session, err := g.q.Lanes("session")
	must(t, err)
	inHandler, drainBegun := make(chan struct{}), make(chan struct{})
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: g.q, Lanes: session,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-drainBegun
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.srv.URL, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := g.client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	served := testkit.Go(func() *httptest.ResponseRecorder { return serve(h, request(context.Background(), "thread-1")) })
	testkit.Recv(t, inHandler, "the handler")
	drained := testkit.Go(func() error { return g.q.Drain(context.Background()) })
	testkit.Eventually(t, "the queue to drain", g.q.Draining)
	close(drainBegun)
	if w := testkit.Recv(t, served, "the answer"); w.Code != http.StatusOK || w.Body.String() != "answer" {
		t.Errorf("got %d %q; want 200 answer", w.Code, w.Body.String())
	}
	must(t, testkit.Recv(t, drained, "the drain"))
	if _, err := g.get(context.Background()); !errors.Is(err, semaphore.ErrClosed) {
		t.Errorf("a call after the drain: %v; want ErrClosed", err)
	}
}

// TestTransportEstimateAboveTheBurst: an estimate the tokens lane could
// never grant fails the request with the lane's ErrTooHeavy, at once.
func TestTransportEstimateAboveTheBurst(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusOK), func(c *lanehttp.TransportConfig[string]) {
		c.Tokens = func(*http.Request) int64 { return 100_001 }
	})
	_, err := g.get(context.Background())
	var le *lanequeue.LaneError
	if !errors.Is(err, semaphore.ErrTooHeavy) || !errors.As(err, &le) || le.Lane != "tpm" {
		t.Errorf("got %v; want tpm's ErrTooHeavy", err)
	}
	if n := g.attempts.Load(); n != 0 {
		t.Errorf("the provider got %d attempts; want 0", n)
	}
	nothingHeld(t, g.q)
}

// TestTransportAttemptNow: a Classifier of the caller's is given when the
// attempt came back, from the system clock when the transport has no
// Clock and from its Clock when it has one. (The transport leaves Now
// zero only for DefaultClassifier, which reads the system clock itself.)
func TestTransportAttemptNow(t *testing.T) {
	q, set := providerQueue(t, semaphore.New(1))
	for _, c := range []struct {
		name string
		clk  semaphore.Clock
		want func(time.Time) bool
	}{
		{"system clock", nil, func(now time.Time) bool { return !now.IsZero() }},
		{"fake clock", clock.NewFake(received), func(now time.Time) bool { return now.Equal(received) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got time.Time
			tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{
				Base: instantBase{}, Queue: q, Lanes: set, Clock: c.clk,
				Classify: func(a lanehttp.Attempt) lanehttp.Verdict {
					got = a.Now
					return lanehttp.DefaultClassifier(a)
				},
			})
			req, err := http.NewRequest(http.MethodGet, "http://provider.test/", nil)
			must(t, err)
			resp, err := tr.RoundTrip(req)
			must(t, err)
			resp.Body.Close()
			if !c.want(got) {
				t.Fatalf("the Classifier's Attempt.Now is %v", got)
			}
		})
	}
}

// An estimate of no tokens, or fewer, is a bad weight, not one to raise:
// the request fails with semaphore.ErrInvalidWeight, naming Tokens, before
// any lane is taken or the provider asked.
func TestTransportRefusesAnEstimateBelowOne(t *testing.T) {
	for _, est := range []int64{0, -5} {
		g := newRig(t, func(int64, http.ResponseWriter, *http.Request) {}, func(c *lanehttp.TransportConfig[string]) {
			c.Tokens = func(*http.Request) int64 { return est }
		})
		resp, err := g.get(context.Background())
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, semaphore.ErrInvalidWeight) || !strings.Contains(err.Error(), "Tokens") {
			t.Errorf("an estimate of %d: %v; want ErrInvalidWeight naming Tokens", est, err)
		}
		if n := g.attempts.Load(); n != 0 {
			t.Errorf("an estimate of %d: the provider got %d attempts, want 0", est, n)
		}
		for _, st := range g.q.Stats() {
			if st.Acquired != 0 {
				t.Errorf("an estimate of %d: lane %s granted %d calls, want 0", est, st.Name, st.Acquired)
			}
		}
	}
}

// TestTransportOnTheHandlersOwnLane: a Transport given a global lane that
// the middleware's request holds, at a capacity with no room for both,
// fails the handler's call at once with lanequeue.ErrReentrant, where it
// waited for its own request's permit until the deadline (a new user's
// trial).
func TestTransportOnTheHandlersOwnLane(t *testing.T) {
	g := newRig(t, func(_ int64, w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "answer") }, func(c *lanehttp.TransportConfig[string]) {
		c.TokensLane, c.Tokens = "", nil
	})
	must(t, g.q.Add("shared", lanequeue.NewGlobalLane[string](semaphore.New(1))))
	shared, err := g.q.Lanes("shared")
	must(t, err)
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{Base: g.srv.Client().Transport, Queue: g.q, Lanes: shared})
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: g.q, Lanes: shared,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.srv.URL, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			code := http.StatusBadGateway
			if errors.Is(err, lanequeue.ErrReentrant) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	// A request deadline well inside the test's wait, so that without the
	// check the call fails with the lane's own error (it waited for itself).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	served := testkit.Go(func() *httptest.ResponseRecorder { return serve(h, request(ctx, "thread-1")) })
	if w := testkit.Recv(t, served, "the handler's answer"); w.Code != http.StatusConflict {
		t.Fatalf("got %d %q; want the Transport's ErrReentrant (409 here)", w.Code, w.Body.String())
	}
}

// TestTransportDrainDuringTheWaitGivesTheLastAnswer: a call waiting to
// retry holds no lanes, so a Drain begun then does not wait for it and
// closes the queue; the retry is then not sent, and the caller gets the
// answer it would have had without one (the 429, its body intact), not
// the closed queue's error, which lost the provider's answer (a new
// user's trial).
func TestTransportDrainDuringTheWaitGivesTheLastAnswer(t *testing.T) {
	g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "1"), nil)
	done := testkit.Go(func() answer {
		resp, err := g.post(context.Background(), "x")
		return answerOf(t, resp, err)
	})
	d := g.clk.next(t) // waiting to retry
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	must(t, g.q.Drain(ctx)) // nothing held: it closes the queue at once
	g.clk.Advance(d)
	a := testkit.Recv(t, done, "the call's answer")
	if a.err != nil || a.code != http.StatusTooManyRequests || a.body != `{"error":"rate limited"}` {
		t.Fatalf("got %d %q, error %v; want the first attempt's 429 and its body", a.code, a.body, a.err)
	}
	if n := g.attempts.Load(); n != 1 {
		t.Errorf("the provider got %d attempts; want 1, the retry not sent", n)
	}
	nothingHeld(t, g.q)
}

// TestTransportRetryWaitEndsWhenTheQueueStops: a call waiting to retry
// stops waiting as soon as a Drain begins (while another ticket keeps
// the drain going) or the queue closes, and gets the answer retried
// then, not once its backoff is slept out (it slept it out first: a
// review found it). The fake clock never moves, so without that the call
// would wait for good.
func TestTransportRetryWaitEndsWhenTheQueueStops(t *testing.T) {
	for _, c := range []struct {
		name string
		stop func(t *testing.T, q *lanequeue.Queue[string]) (end func())
	}{
		{"Drain begins", func(t *testing.T, q *lanequeue.Queue[string]) func() {
			// A ticket of a lane of its own, that the drain waits for
			// (the provider's lanes are paused by the 429).
			must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
			set, err := q.Lanes("session")
			must(t, err)
			other, ok := q.TryAcquireAll("thread-1", set)
			if !ok {
				t.Fatal("TryAcquireAll of the session lane failed")
			}
			drained := testkit.Go(func() error { return q.Drain(context.Background()) })
			return func() {
				other.Release()
				must(t, testkit.Recv(t, drained, "the drain"))
			}
		}},
		{"Close", func(t *testing.T, q *lanequeue.Queue[string]) func() {
			q.Close()
			return func() {}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, refuseOnce(http.StatusTooManyRequests, "retry-after", "60"), nil)
			done := testkit.Go(func() answer {
				resp, err := g.post(context.Background(), "x")
				return answerOf(t, resp, err)
			})
			d := g.clk.next(t)                     // waiting to retry
			t.Cleanup(func() { g.clk.Advance(d) }) // a call still waiting ends, if the test failed
			end := c.stop(t, g.q)
			a := testkit.Recv(t, done, "the call's answer once the queue stops admitting (its backoff not slept out)")
			if a.err != nil || a.code != http.StatusTooManyRequests || a.body != `{"error":"rate limited"}` {
				t.Errorf("got %d %q, error %v; want the first attempt's 429 and its body", a.code, a.body, a.err)
			}
			if n := g.attempts.Load(); n != 1 {
				t.Errorf("the provider got %d attempts; want 1, the retry not sent", n)
			}
			end()
			nothingHeld(t, g.q)
		})
	}
}

// TestTransportClosesTheAnswerWhenClassifyPanics: a classifier that
// panics leaves no lane held and the base's answer closed (its body was
// left open, holding the connection); the panic goes on.
func TestTransportClosesTheAnswerWhenClassifyPanics(t *testing.T) {
	q, set := providerQueue(t, semaphore.New(1))
	body := &closeRecorder{Reader: strings.NewReader("answer")}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: body, Header: http.Header{}}, nil
	})
	tr := lanehttp.NewTransport(lanehttp.TransportConfig[string]{Base: base, Queue: q, Lanes: set,
		Classify: func(lanehttp.Attempt) lanehttp.Verdict { panic(errBoom) }})
	if v := roundTripPanicking(tr); v != errBoom {
		t.Errorf("recovered %v; want errBoom", v)
	}
	if !body.closed.Load() {
		t.Error("the base's answer was left open")
	}
	nothingHeld(t, q)
}

// roundTripFunc is a base made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportRetryRefusedGivesTheAnswerKept: a retry that a lane refuses
// (here the provider lane closed on its own while the call waited) is not
// sent, and the caller gets the answer retried if its body was short
// enough to keep (8 KiB), else the lane's error.
func TestTransportRetryRefusedGivesTheAnswerKept(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		want int // the status the caller gets; 0: an error
	}{
		{"short body", `{"error":"rate limited"}`, http.StatusTooManyRequests},
		{"body past 8 KiB", strings.Repeat("x", 8<<10+1), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					w.Header().Set("retry-after", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					io.WriteString(w, c.body)
					return
				}
				io.WriteString(w, "ok")
			}, nil)
			done := testkit.Go(func() answer {
				resp, err := g.get(context.Background())
				return answerOf(t, resp, err)
			})
			d := g.clk.next(t) // waiting to retry
			g.provider.Close()
			g.clk.Advance(d)
			a := testkit.Recv(t, done, "the call's answer")
			switch {
			case c.want != 0 && (a.err != nil || a.code != c.want || a.body != c.body):
				t.Fatalf("got %d %q, error %v; want the first attempt's %d and its body", a.code, a.body, a.err, c.want)
			case c.want == 0 && !errors.Is(a.err, semaphore.ErrClosed):
				t.Fatalf("got %d, error %v; want the closed lane's error", a.code, a.err)
			}
			if n := g.attempts.Load(); n != 1 {
				t.Errorf("the provider got %d attempts; want 1, the retry not sent", n)
			}
		})
	}
}

// TestTransportRetryRefusedByAFullLine: a retry that finds the lane's line
// full is refused at once (ErrQueueFull), and the caller gets the answer
// retried, not the refusal.
func TestTransportRetryRefusedByAFullLine(t *testing.T) {
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if attempts.Add(1) == 1 {
			w.Header().Set("retry-after", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	sem := semaphore.New(1, semaphore.WithMaxWaiters(1))
	q, set := providerQueue(t, sem)
	clk := &stepClock{Fake: clock.NewFake(received), waits: make(chan time.Duration, 16)}
	client := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base: srv.Client().Transport, Queue: q, Lanes: set, Clock: clk, Backoff: backoff})}
	defer client.CloseIdleConnections()
	done := testkit.Go(func() answer {
		resp, err := client.Get(srv.URL)
		return answerOf(t, resp, err)
	})
	d := clk.next(t) // waiting to retry
	held, ok := sem.TryAcquire(1)
	if !ok {
		t.Fatal("the lane was not free during the wait")
	}
	defer held.Release()
	wctx, cancel := context.WithCancel(context.Background())
	waiter := testkit.Go(func() error { _, err := sem.Acquire(wctx, 1); return err })
	testkit.Eventually(t, "a waiter in the lane's line", func() bool { return sem.Stats().Waiters == 1 })
	clk.Advance(d)
	a := testkit.Recv(t, done, "the call's answer")
	cancel()
	testkit.Recv(t, waiter, "the waiter")
	if a.err != nil || a.code != http.StatusServiceUnavailable || a.body != "busy" {
		t.Fatalf("got %d %q, error %v; want the first attempt's 503 busy", a.code, a.body, a.err)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("the provider got %d attempts; want 1, the retry not sent", n)
	}
}

// providerQueue is a queue with one global lane, "provider", of sem, and
// its set; the queue closes at the test's end.
func providerQueue(t *testing.T, sem *semaphore.Weighted) (*lanequeue.Queue[string], lanequeue.LaneSet[string]) {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("provider", lanequeue.NewGlobalLane[string](sem)))
	set, err := q.Lanes("provider")
	must(t, err)
	return q, set
}

// answer is what a caller got: a status and body, or an error.
type answer struct {
	code int
	body string
	err  error
}

// answerOf reads resp (closing it) into an answer, or keeps err.
func answerOf(t *testing.T, resp *http.Response, err error) answer {
	t.Helper()
	if err != nil {
		return answer{err: err}
	}
	return answer{code: resp.StatusCode, body: readAll(t, resp)}
}
