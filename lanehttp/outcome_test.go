package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestAdaptiveLaneLearnsFromTheHandlersAnswers: behind the middleware, a
// handler (a proxy to a model API) answers 429 to every request; the
// adaptive controller observing the global lane hears of each one through
// the ticket, with no code in the handler, and cuts the limit. Over a real server: the handler
// also sets a write deadline and flushes through http.ResponseController,
// which must reach the server's writer through the middleware's.
func TestAdaptiveLaneLearnsFromTheHandlersAnswers(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	sem := semaphore.New(8)
	must(t, q.Add("model", lanequeue.NewGlobalLane[string](sem)))
	ctl, err := adaptive.New(sem, 1, 8)
	must(t, err)
	must(t, q.ObserveLane("model", ctl))
	set, err := q.Lanes("session", "model")
	must(t, err)

	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: set,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the middleware: %v", err)
		}
		w.WriteHeader(http.StatusTooManyRequests) // the provider refused
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush through the middleware: %v", err)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	for i := range 8 {
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		must(t, err)
		req.Header.Set("X-Key", fmt.Sprint("k", i))
		resp, err := srv.Client().Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d: %d; want the handler's 429", i, resp.StatusCode)
		}
	}
	// The controller cuts at the first fresh overload; how many of the
	// eight are fresh depends on whether a request was admitted before the
	// previous one's report (the client has its answer before the
	// middleware reports), so the test asks only that the 429s reached it.
	// The client may have its answer (the handler flushed it) before the
	// middleware reports: once every permit is back, every request has
	// reported (a ticket reports before it releases), and no decision can
	// move the limit between the two reads below.
	eventuallyNothingHeld(t, q)
	st := ctl.Stats()
	if st.Limit >= 8 || st.Overloads == 0 || st.OverloadDecreases == 0 || st.Increases != 0 {
		t.Fatalf("controller %+v; want the handler's 429s counted as overloads and the limit cut from 8", st)
	}
	if c, l := sem.Stats().Capacity, ctl.Limit(); c != l {
		t.Fatalf("the lane's capacity is %d; want the controller's %d", c, l)
	}
}

// eventuallyNothingHeld waits for the lanes of a server's requests to be
// given back: the client may read the answer before the handler returns.
func eventuallyNothingHeld(t *testing.T, q *lanequeue.Queue[string]) {
	t.Helper()
	testkit.Eventually(t, "the lanes are given back", func() bool {
		for _, st := range q.Stats() {
			if st.Held != 0 || st.Waiters != 0 {
				return false
			}
		}
		return len(q.Holders()) == 0
	})
}

// observed records what a lane's observer is told.
type observed struct {
	mu   sync.Mutex
	errs []error // guarded by mu
}

func (o *observed) Observe(err error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *observed) take() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	errs := o.errs
	o.errs = nil
	return errs
}

// observedFixture is a queue of one global lane with an observer, behind
// the middleware (with cfg's Outcome) over handler.
func observedFixture(t *testing.T, outcome func(int) error, handler http.HandlerFunc) (*lanequeue.Queue[string], *observed, http.Handler) {
	t.Helper()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(4))))
	obs := &observed{}
	must(t, q.ObserveLane("global", obs))
	set, err := q.Lanes("global")
	must(t, err)
	return q, obs, lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: set, Outcome: outcome,
		Key: func(*http.Request) (string, error) { return "k", nil },
	}, handler)
}

// TestOutcomeOfEachAnswer: the observers of the lanes learn, for each
// request, the outcome of the status its handler sent: overloads for 429
// and 503, a plain error for other 5xx, success for the rest (also a
// handler that writes nothing, or a body only, or sends a 1xx first).
func TestOutcomeOfEachAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		handler  http.HandlerFunc
		status   int // what the handler sent, and what the error says
		overload bool
	}{
		{"nothing", func(http.ResponseWriter, *http.Request) {}, 200, false},
		{"body", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi") }, 200, false},
		{"204", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }, 204, false},
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 404, false},
		{"429", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(429) }, 429, true},
		{"503", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) }, 503, true},
		{"500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, 500, false},
		{"502", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(502) }, 502, false},
		{"103 then 429", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(103); w.WriteHeader(429) }, 429, true},
		{"flushed then 503", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush() // sends 200: the 503 after it is not sent
			w.WriteHeader(503)
		}, 200, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q, obs, h := observedFixture(t, nil, c.handler)
			serve(h, request(context.Background(), "k"))
			errs := obs.take()
			if len(errs) != 1 {
				t.Fatalf("observed %v; want one report", errs)
			}
			err := errs[0]
			var se *lanehttp.StatusError
			switch {
			case c.status < 500 && c.status != 429:
				if err != nil {
					t.Fatalf("observed %v; want nil, a success", err)
				}
			case !errors.As(err, &se) || se.Status != c.status:
				t.Fatalf("observed %v; want a StatusError of %d", err, c.status)
			case errors.Is(err, adaptive.ErrOverload) != c.overload || (adaptive.Classify(err) == adaptive.Overload) != c.overload:
				t.Fatalf("observed %v (%v); want an overload: %v", err, adaptive.Classify(err), c.overload)
			}
			nothingHeld(t, q)
		})
	}
}

// TestConfigOutcome: Config.Outcome decides what a status means.
func TestConfigOutcome(t *testing.T) {
	t.Parallel()
	teapot := errors.New("a teapot")
	var got []int
	_, obs, h := observedFixture(t, func(status int) error {
		got = append(got, status)
		if status == http.StatusTeapot {
			return teapot
		}
		return nil
	}, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") == "tea" {
			w.WriteHeader(http.StatusTeapot)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	serve(h, request(context.Background(), "tea"))
	serve(h, request(context.Background(), "coffee"))
	if errs := obs.take(); len(errs) != 2 || errs[0] != teapot || errs[1] != nil {
		t.Fatalf("observed %v; want [a teapot <nil>]", errs)
	}
	if len(got) != 2 || got[0] != http.StatusTeapot || got[1] != http.StatusServiceUnavailable {
		t.Fatalf("Outcome saw %v; want [418 503]", got)
	}
}

// TestHandlerPanicReportsNothing: a handler that panics gives its lanes
// back and reports nothing (its answer is not one); the panic goes on.
func TestHandlerPanicReportsNothing(t *testing.T) {
	t.Parallel()
	q, obs, h := observedFixture(t, nil, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Fatalf("recovered %v; want the handler's panic", v)
			}
		}()
		serve(h, request(context.Background(), "k"))
	}()
	if errs := obs.take(); len(errs) != 0 {
		t.Fatalf("observed %v after a panic; want nothing", errs)
	}
	nothingHeld(t, q)
}

// TestHijackPassesThrough: a handler that takes the connection over
// through the middleware's writer (asserting http.Hijacker) gets the
// server's connection; its request counts as a success.
func TestHijackPassesThrough(t *testing.T) {
	t.Parallel()
	q, obs, h := observedFixture(t, nil, func(w http.ResponseWriter, _ *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		io.WriteString(rw, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		rw.Flush()
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	if resp.StatusCode != 200 || string(body) != "hi" {
		t.Fatalf("answer %d %q; want the hijacker's 200 \"hi\"", resp.StatusCode, body)
	}
	testkit.Eventually(t, "the request is reported", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.errs) == 1
	})
	if errs := obs.take(); errs[0] != nil {
		t.Fatalf("observed %v; want a success", errs)
	}
	eventuallyNothingHeld(t, q)
}

// TestDefaultOutcome pins the mapping.
func TestDefaultOutcome(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]adaptive.Outcome{
		200: adaptive.Success, 201: adaptive.Success, 304: adaptive.Success, 400: adaptive.Success,
		404: adaptive.Success, 499: adaptive.Success, 429: adaptive.Overload, 503: adaptive.Overload, 529: adaptive.Overload,
		500: adaptive.Ignore, 502: adaptive.Ignore, 504: adaptive.Ignore, 599: adaptive.Ignore,
	} {
		err := lanehttp.DefaultOutcome(status)
		if got := adaptive.Classify(err); got != want {
			t.Errorf("DefaultOutcome(%d) = %v, classified %v; want %v", status, err, got, want)
		}
	}
	err := lanehttp.DefaultOutcome(503)
	if want := "lanehttp: the handler answered 503 Service Unavailable: lanes: provider overloaded"; err.Error() != want {
		t.Errorf("DefaultOutcome(503) says %q; want %q", err, want)
	}
}

// TestBadRequestHidesTheError: a request whose Options (or Key) fails gets
// 400 with the status text, not the error's text, which may be internal;
// Reject, if set, answers it instead, given 400 and the error.
func TestBadRequestHidesTheError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := lanehttp.Config[string]{
		Queue: f.q, Lanes: f.set,
		Key: func(*http.Request) (string, error) { return "k", nil },
		Options: func(r *http.Request) ([]semaphore.AcquireOption, error) {
			seq, err := strconv.ParseInt(r.Header.Get("X-Seq"), 10, 64) // no X-Seq: invalid syntax
			if err != nil {
				return nil, err
			}
			return []semaphore.AcquireOption{semaphore.Sequence(seq)}, nil
		},
	}
	w := serve(lanehttp.Handler(cfg, http.NotFoundHandler()), request(context.Background(), "k"))
	if w.Code != http.StatusBadRequest || w.Body.String() != "Bad Request\n" {
		t.Fatalf("answer %d %q; want 400 \"Bad Request\\n\"", w.Code, w.Body.String())
	}
	var gotStatus int
	var gotErr error
	cfg.Reject = func(w http.ResponseWriter, _ *http.Request, status int, err error) {
		gotStatus, gotErr = status, err
		http.Error(w, "X-Seq must be a number", status)
	}
	w = serve(lanehttp.Handler(cfg, http.NotFoundHandler()), request(context.Background(), "k"))
	if w.Code != http.StatusBadRequest || w.Body.String() != "X-Seq must be a number\n" || w.Header().Get("Retry-After") != "" {
		t.Fatalf("answer %d %q, Retry-After %q; want Reject's 400 and no Retry-After", w.Code, w.Body.String(), w.Header().Get("Retry-After"))
	}
	if gotStatus != http.StatusBadRequest || gotErr == nil || !strings.Contains(gotErr.Error(), "invalid syntax") {
		t.Fatalf("Reject given %d, %v; want 400 and the Options error", gotStatus, gotErr)
	}
	nothingHeld(t, f.q)
}
