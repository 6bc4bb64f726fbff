package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A chat API behind the lanes: one request at a time per session (the
// X-Session header), at most one more waiting its turn, at most 16 at once
// over all sessions. A request without the header is answered 400 (rather
// than sharing one session "" with every other such request); one whose
// session's line is full 429; once the server drains, 503. Both carry
// Retry-After.
func ExampleHandler() {
	q := lanequeue.Default[string](16, keyedsem.WithMaxWaitersPerKey(1))
	chat, err := q.Lanes("session", "global")
	if err != nil {
		panic(err)
	}
	api := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q,
		Lanes: chat,
		Key: func(r *http.Request) (string, error) {
			if s := r.Header.Get("X-Session"); s != "" {
				return s, nil
			}
			return "", errors.New("no X-Session header")
		},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "reply to %s", r.Header.Get("X-Session"))
	}))

	post := func(session string) {
		r := httptest.NewRequest(http.MethodPost, "/chat", nil)
		if session != "" {
			r.Header.Set("X-Session", session)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("%q: %d %q Retry-After=%q\n", session, w.Code, w.Body.String(), w.Header().Get("Retry-After"))
	}

	post("alice")
	post("") // no X-Session header

	// Alice's previous message is still being answered (a worker holds her
	// session) and her next one waits its turn (a webhook took its place
	// in her line): her line is full, and a third is refused at once.
	busy, err := q.AcquireAll(context.Background(), "alice", chat)
	if err != nil {
		panic(err)
	}
	queued, err := q.Join("alice", chat)
	if err != nil {
		panic(err)
	}
	post("alice")
	queued.Leave()
	busy.Release()

	// Shutdown: nothing is out, so Drain closes the queue at once.
	if err := q.Drain(context.Background()); err != nil {
		panic(err)
	}
	post("bob")
	// Output:
	// "alice": 200 "reply to alice" Retry-After=""
	// "": 400 "Bad Request\n" Retry-After=""
	// "alice": 429 "Too Many Requests\n" Retry-After="1"
	// "bob": 503 "Service Unavailable\n" Retry-After="1"
}

// A proxy to a model API behind a global lane whose capacity an adaptive
// controller drives: the middleware reports each request's answer, so the
// provider's 429s, passed on by the handler, lower the limit with no code
// in the handler (DefaultOutcome counts 429 and 503 as overloads).
//
// One refusal is shown: the first overload lowers the limit at once, by
// the backoff (0.9 of 8, so 7). Whether a later refusal lowers it again
// depends on when its request was admitted (one admitted before the cut,
// to about a millisecond, saw the higher limit and is not counted), which
// a fixed output cannot show.
func ExampleHandler_adaptive() {
	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(8)
	if err := q.Add("model", lanequeue.NewGlobalLane[string](sem)); err != nil {
		panic(err)
	}
	ctl, err := adaptive.New(sem, 1, 8) // from 8 at once, never under 1
	if err != nil {
		panic(err)
	}
	if err := q.ObserveLane("model", ctl); err != nil {
		panic(err)
	}
	model, err := q.Lanes("model")
	if err != nil {
		panic(err)
	}
	proxy := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: model,
		Key: func(*http.Request) (string, error) { return "", nil }, // no keyed lane: the key orders nothing
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "rate limited", http.StatusTooManyRequests) // the provider refused
	}))

	fmt.Println("limit", ctl.Limit())
	w := httptest.NewRecorder()
	proxy.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat", nil))
	st := ctl.Stats()
	fmt.Println("answer", w.Code)
	fmt.Println("limit", st.Limit, "after an", st.LastReason)
	fmt.Println("lane capacity", sem.Capacity())
	// Output:
	// limit 8
	// answer 429
	// limit 7 after an overload
	// lane capacity 7
}
