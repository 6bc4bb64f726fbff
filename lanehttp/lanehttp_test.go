package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/harness/lanetest"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// fixture is a queue of a session lane (a line of at most one waiter per
// key), a global lane of capacity 1 (a line of at most one waiter) and a
// rate lane of one token every 10s, with the middleware over a handler
// that counts its calls.
type fixture struct {
	q       *lanequeue.Queue[string]
	set     lanequeue.LaneSet[string]
	rateSet lanequeue.LaneSet[string]
	h       http.Handler
	rh      http.Handler // through the rate lane
	calls   atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{q: lanequeue.New[string]()}
	t.Cleanup(f.q.Close)
	must(t, f.q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithMaxWaitersPerKey(1)))))
	must(t, f.q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(1, semaphore.WithMaxWaiters(1)))))
	must(t, f.q.Add("rpm", lanequeue.NewRateLane[string](rate.NewLimiter(rate.Every(10*time.Second), 1))))
	var err error
	f.set, err = f.q.Lanes("session", "global")
	must(t, err)
	f.rateSet, err = f.q.Lanes("rpm")
	must(t, err)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if tk, ok := lanequeue.TicketFrom[string](r.Context()); !ok || tk == nil {
			t.Error("the handler's context carries no ticket")
		}
		if r.Header.Get("X-Panic") != "" {
			panic(http.ErrAbortHandler)
		}
		fmt.Fprintf(w, "ok %s", r.Header.Get("X-Key")) // the request's key
	})
	key := func(r *http.Request) (string, error) {
		k := r.Header.Get("X-Key")
		if k == "" {
			return "", errors.New("no X-Key")
		}
		return k, nil
	}
	f.h = lanehttp.Handler(lanehttp.Config[string]{Queue: f.q, Lanes: f.set, Key: key}, next)
	f.rh = lanehttp.Handler(lanehttp.Config[string]{Queue: f.q, Lanes: f.rateSet, Key: key}, next)
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func request(ctx context.Context, key string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/chat", nil)
	if key != "" {
		r.Header.Set("X-Key", key)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func stats(t *testing.T, q *lanequeue.Queue[string], lane string) lanequeue.LaneStats {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Name == lane {
			return st
		}
	}
	t.Fatalf("no lane %q", lane)
	return lanequeue.LaneStats{}
}

func nothingHeld(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Held != 0 || st.Waiters != 0 {
			t.Errorf("lane %q: held %d, waiters %d; want nothing", st.Name, st.Held, st.Waiters)
		}
	}
	if hs := q.Holders(); len(hs) != 0 {
		t.Errorf("Holders() = %v; want none", hs)
	}
}

// waitingRequest serves r in a goroutine, once the lane has n waiters.
func waitingRequest(t *testing.T, f *fixture, r *http.Request, lane string, n int) <-chan *httptest.ResponseRecorder {
	t.Helper()
	ch := testkit.Go(func() *httptest.ResponseRecorder { return serve(f.h, r) })
	testkit.Eventually(t, "the request waits on "+lane, func() bool { return stats(t, f.q, lane).Waiters == n })
	return ch
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, status int, retryAfter string) {
	t.Helper()
	if w.Code != status || w.Header().Get("Retry-After") != retryAfter {
		t.Fatalf("answer %d, Retry-After %q (%q); want %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"), w.Body.String(), status, retryAfter)
	}
}

// TestServesAndReleases: a request runs its handler holding its lanes (the
// ticket is in its context) and gives them back after.
func TestServesAndReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := serve(f.h, request(context.Background(), "t1"))
	if w.Code != http.StatusOK || w.Body.String() != "ok t1" {
		t.Fatalf("answer %d %q; want 200 \"ok t1\"", w.Code, w.Body.String())
	}
	nothingHeld(t, f.q)
}

// TestHandlerPanicReleases: a handler that panics gives its lanes back.
func TestHandlerPanicReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := request(context.Background(), "t1")
	r.Header.Set("X-Panic", "1")
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("recovered %v; want the handler's panic", v)
			}
		}()
		serve(f.h, r)
	}()
	nothingHeld(t, f.q)
}

// TestBadKeyIs400: a request whose key function fails gets 400 and never
// reaches the lanes.
func TestBadKeyIs400(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := serve(f.h, request(context.Background(), ""))
	if w.Code != http.StatusBadRequest || f.calls.Load() != 0 {
		t.Fatalf("answer %d, %d calls; want 400 and no call", w.Code, f.calls.Load())
	}
}

// TestFullKeyLineIs429: a key whose line is full answers 429 with the
// configured Retry-After; the handler is not called.
func TestFullKeyLineIs429(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := f.q.AcquireAll(context.Background(), "t1", f.set)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	waiter := waitingRequest(t, f, request(ctx, "t1"), "session", 1)
	wantStatus(t, serve(f.h, request(context.Background(), "t1")), http.StatusTooManyRequests, "1")
	cancel()
	testkit.Recv(t, waiter, "the cancelled request")
	held.Release()
	if f.calls.Load() != 0 {
		t.Fatalf("%d handler calls; want none", f.calls.Load())
	}
	nothingHeld(t, f.q)
}

// TestFullGlobalLineIs503: a full line on the shared lane is the server's
// overload: 503 with Retry-After.
func TestFullGlobalLineIs503(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := f.q.AcquireAll(context.Background(), "other", f.set)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	waiter := waitingRequest(t, f, request(ctx, "t1"), "global", 1)
	wantStatus(t, serve(f.h, request(context.Background(), "t2")), http.StatusServiceUnavailable, "1")
	cancel()
	testkit.Recv(t, waiter, "the cancelled request")
	held.Release()
	nothingHeld(t, f.q)
}

// TestDeadlineOnTheKeyIs429: a request whose deadline (set before the
// middleware) ends its wait for its busy key gets 429.
func TestDeadlineOnTheKeyIs429(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := f.q.AcquireAll(context.Background(), "t1", f.set)
	must(t, err)
	defer held.Release()
	ctx := testkit.NewExpiring()
	waiter := waitingRequest(t, f, request(ctx, "t1"), "session", 1)
	ctx.Expire()
	wantStatus(t, testkit.Recv(t, waiter, "the request whose deadline passed"), http.StatusTooManyRequests, "1")
}

// TestRateLaneIs429WithItsNextToken: a rate lane's refusal carries the
// time of its next token as Retry-After, in whole seconds rounded up.
func TestRateLaneIs429WithItsNextToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	t0 := time.Now()
	if w := serve(f.rh, request(context.Background(), "t1")); w.Code != http.StatusOK {
		t.Fatalf("first request: %d; want 200", w.Code)
	}
	t1 := time.Now() // the token went between t0 and t1: the next comes 10s later
	// A deadline that has come already (the context itself is not ended,
	// so the call reaches the lane): the token comes after it, so the lane
	// refuses at once.
	ctx := testkit.NewExpiring()
	t2 := time.Now()
	ctx.At = t2
	w := serve(f.rh, request(ctx, "t1"))
	t3 := time.Now() // the lane looked between t2 and t3
	wantStatus(t, w, http.StatusTooManyRequests, w.Header().Get("Retry-After"))
	lo := math.Ceil(t0.Add(10 * time.Second).Sub(t3).Seconds())
	hi := math.Ceil(t1.Add(10 * time.Second).Sub(t2).Seconds())
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || float64(s) < lo || float64(s) > hi {
		t.Fatalf("Retry-After %q; want the seconds to the next token, rounded up: %v to %v", w.Header().Get("Retry-After"), lo, hi)
	}
}

// TestDrainingAndClosedAre503: a draining queue, then a closed one, answer
// 503 with Retry-After; a request admitted before the drain is served.
func TestDrainingAndClosedAre503(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := f.q.AcquireAll(context.Background(), "t1", f.set)
	must(t, err)
	drained := testkit.Go(func() error { return f.q.Drain(context.Background()) })
	testkit.Eventually(t, "the queue drains", f.q.Draining)
	wantStatus(t, serve(f.h, request(context.Background(), "t2")), http.StatusServiceUnavailable, "1")
	held.Release()
	must(t, testkit.Recv(t, drained, "Drain"))
	wantStatus(t, serve(f.h, request(context.Background(), "t2")), http.StatusServiceUnavailable, "1")
	if f.calls.Load() != 0 {
		t.Fatalf("%d handler calls; want none", f.calls.Load())
	}
}

// recordingWriter counts what is written to it.
type recordingWriter struct {
	header http.Header
	writes atomic.Int64
}

func (w *recordingWriter) Header() http.Header         { return w.header }
func (w *recordingWriter) Write(b []byte) (int, error) { w.writes.Add(1); return len(b), nil }
func (w *recordingWriter) WriteHeader(int)             { w.writes.Add(1) }

// TestClientGoneGivesItsPlaceUp (issue 15): a request whose client goes
// away while it waits leaves the line at once, is answered nothing, and
// its handler never runs; the next request of the key is served.
func TestClientGoneGivesItsPlaceUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := f.q.AcquireAll(context.Background(), "t1", f.set)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w := &recordingWriter{header: http.Header{}}
	done := testkit.Go(func() struct{} { f.h.ServeHTTP(w, request(ctx, "t1")); return struct{}{} })
	testkit.Eventually(t, "the request waits", func() bool { return stats(t, f.q, "session").Waiters == 1 })
	cancel()
	testkit.Recv(t, done, "the request of the client gone")
	if n := stats(t, f.q, "session").Waiters; n != 0 {
		t.Fatalf("%d waiters after the client went away; want 0", n)
	}
	if w.writes.Load() != 0 || len(w.header) != 0 {
		t.Fatalf("the request of a client gone was answered (%d writes, header %v)", w.writes.Load(), w.header)
	}
	held.Release()
	if w := serve(f.h, request(context.Background(), "t1")); w.Code != http.StatusOK {
		t.Fatalf("the key's next request: %d; want 200", w.Code)
	}
	if f.calls.Load() != 1 {
		t.Fatalf("%d handler calls; want 1 (the next request's)", f.calls.Load())
	}
	nothingHeld(t, f.q)
}

// TestReject: Config.Reject answers instead of the default, with the status
// and error, after Retry-After is set.
func TestReject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.q.Close()
	var got error
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: f.q, Lanes: f.set, RetryAfter: 1500 * time.Millisecond,
		Key: func(*http.Request) (string, error) { return "k", nil },
		Reject: func(w http.ResponseWriter, r *http.Request, status int, err error) {
			got = err
			w.WriteHeader(status)
			fmt.Fprint(w, "closed for the night")
		},
	}, http.NotFoundHandler())
	w := serve(h, request(context.Background(), "k"))
	wantStatus(t, w, http.StatusServiceUnavailable, "2")
	if !errors.Is(got, semaphore.ErrClosed) || w.Body.String() != "closed for the night" {
		t.Fatalf("Reject saw %v and wrote %q", got, w.Body.String())
	}
}

// TestStatus pins the mapping of each error.
func TestStatus(t *testing.T) {
	t.Parallel()
	keyed := func(err error) error {
		return &lanequeue.LaneError{Lane: "s", Kind: lanequeue.Keyed, Key: "k", Err: err}
	}
	global := func(err error) error { return &lanequeue.LaneError{Lane: "g", Kind: lanequeue.Global, Err: err} }
	rateLane := func(err error) error { return &lanequeue.LaneError{Lane: "r", Kind: lanequeue.Rate, Err: err} }
	for _, c := range []struct {
		err  error
		want int
	}{
		{keyed(semaphore.ErrQueueFull), 429},
		{keyed(context.DeadlineExceeded), 429},
		{keyed(semaphore.ErrWaitTooLong), 429},
		{rateLane(context.DeadlineExceeded), 429},
		{global(semaphore.ErrQueueFull), 503},
		{global(context.DeadlineExceeded), 503},
		{global(semaphore.ErrWaitTooLong), 503},
		{keyed(keyedsem.ErrTooManyKeys), 503},
		{keyed(semaphore.ErrClosed), 503},
		{semaphore.ErrClosed, 503},
		{lanequeue.ErrDraining, 503},
		{context.DeadlineExceeded, 503},
		{keyed(context.Canceled), 0},
		{context.Canceled, 0},
		{semaphore.ErrTooHeavy, 500},
		{lanequeue.ErrReentrant, 500},
	} {
		if got := lanehttp.Status(c.err); got != c.want {
			t.Errorf("Status(%v) = %d; want %d", c.err, got, c.want)
		}
	}
}

// TestMiddlewarePanicsOnBadConfig: a config that could never serve a
// request is refused when the server is set up.
func TestMiddlewarePanicsOnBadConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := lanequeue.New[string]()
	defer other.Close()
	key := func(*http.Request) (string, error) { return "", nil }
	for name, c := range map[string]struct {
		cfg  lanehttp.Config[string]
		says string // the panic names the field and what is wrong with it
	}{
		"no queue":           {lanehttp.Config[string]{Lanes: f.set, Key: key}, "Config.Queue is nil"},
		"no key":             {lanehttp.Config[string]{Queue: f.q, Lanes: f.set}, "Config.Key is nil"},
		"no lanes":           {lanehttp.Config[string]{Queue: f.q, Key: key}, "Config.Lanes: lanequeue: no lanes named"},
		"another's lanes":    {lanehttp.Config[string]{Queue: other, Lanes: f.set, Key: key}, "Config.Lanes: lanequeue: the lane set was prepared by another queue"},
		"negative key bound": {lanehttp.Config[string]{Queue: f.q, Lanes: f.set, Key: key, MaxKeyBytes: -1}, "Config.MaxKeyBytes is negative"},
	} {
		func() {
			defer func() {
				v := recover()
				if s, _ := v.(string); !strings.Contains(s, c.says) {
					t.Errorf("%s: Middleware panicked with %v; want it to say %q", name, v, c.says)
				}
			}()
			lanehttp.Middleware(c.cfg)
		}()
	}
}

// TestHandlerContextEndsWithALeasedPermit: a handler's request context ends,
// with the permit's cause, when a fleet lane's permit of the request ends
// before the handler returns (its lease lost in Redis), so that the
// handler stops before the lane lets another holder in (a new user's
// trial of the chat gateway on Redis: a handler ran on beside the thread's
// next message after a restart).
func TestHandlerContextEndsWithALeasedPermit(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	fleet := lanetest.NewLeased(1)
	must(t, q.Add("fleet", fleet))
	ls, err := q.Lanes("fleet")
	must(t, err)
	errGone := errors.New("lease gone")
	inHandler := make(chan struct{})
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: ls,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-r.Context().Done()
		http.Error(w, context.Cause(r.Context()).Error(), http.StatusServiceUnavailable)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Deadline)
	defer cancel()
	served := testkit.Go(func() *httptest.ResponseRecorder { return serve(h, request(ctx, "thread-1")) })
	testkit.Recv(t, inHandler, "the handler")
	fleet.End(errGone)
	w := testkit.Recv(t, served, "the handler, after its permit ended")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "lease gone") {
		t.Fatalf("got %d %q; want the handler to see its context end with the permit's cause", w.Code, w.Body.String())
	}
	nothingHeld(t, q)
}
