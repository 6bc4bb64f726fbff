package lanehttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
)

// A gateway calls a model provider that allows 8 calls at once, 50
// requests and 40,000 tokens a minute. Its client goes through a
// Transport over three lanes: the provider's concurrency (driven by an
// adaptive controller), its requests and its tokens (each call's
// estimate: a quarter of its bytes for the prompt, plus the most it may
// answer). The provider is briefly over its limit: it answers the first
// call 429 with Retry-After, and the transport waits that second before
// the second attempt, which succeeds. The caller sees the answer alone;
// the 429 went to the controller, which lowered the limit.
func ExampleTransport() {
	var calls atomic.Int64
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(w, `{"echo":%s}`, body)
	}))
	defer provider.Close()

	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.AddGlobalLane("concurrency", 8); err != nil {
		panic(err)
	}
	if err := q.AddRateLane("requests", 50.0/60, 50); err != nil {
		panic(err)
	}
	if err := q.AddRateLane("tokens", 40_000.0/60, 40_000); err != nil {
		panic(err)
	}
	sem, _ := q.GlobalSemaphore("concurrency")
	limit, err := adaptive.New(sem, 1, 8)
	if err != nil {
		panic(err)
	}
	if err := q.ObserveLane("concurrency", limit); err != nil {
		panic(err)
	}
	lanes, err := q.Lanes("concurrency", "requests", "tokens")
	if err != nil {
		panic(err)
	}
	const maxTokens = 1024
	client := &http.Client{Transport: lanehttp.NewTransport(lanehttp.TransportConfig[string]{
		Base:  provider.Client().Transport,
		Queue: q, Lanes: lanes,
		TokensLane: "tokens",
		Tokens:     func(r *http.Request) int64 { return r.ContentLength/4 + maxTokens },
		Backoff:    100 * time.Millisecond,
	})}
	defer client.CloseIdleConnections()

	resp, err := client.Post(provider.URL+"/v1/messages", "application/json", strings.NewReader(`"hello"`))
	if err != nil {
		panic(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close() // gives the lanes back
	fmt.Println(resp.StatusCode, string(answer))
	fmt.Println("calls the provider saw:", calls.Load())
	fmt.Println("limit lowered on overload:", limit.Stats().OverloadDecreases)
	// Output:
	// 200 {"echo":"hello"}
	// calls the provider saw: 2
	// limit lowered on overload: 1
}
