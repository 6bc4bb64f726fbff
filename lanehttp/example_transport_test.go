package lanehttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A gateway calls a model provider that allows 8 calls at once, 50
// requests and 40,000 tokens a minute. Its client goes through a
// Transport over three lanes: the provider's concurrency (driven by an
// adaptive controller), its requests and its tokens (each call takes its
// estimate, a quarter of its bytes for the prompt plus the most it may
// answer, and is settled to the usage of its answer when it is read). The provider is briefly over its limit: it answers the first
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
		fmt.Fprintf(w, `{"echo":%s,"usage":{"input_tokens":2,"output_tokens":3}}`, body)
	}))
	defer provider.Close()

	q := lanequeue.New[string]()
	defer q.Close()
	sem := semaphore.New(8)
	if err := q.Add("concurrency", lanequeue.NewGlobalLane[string](sem)); err != nil {
		panic(err)
	}
	if err := q.Add("requests", lanequeue.NewRateLane[string](rate.NewLimiter(50.0/60, 50))); err != nil {
		panic(err)
	}
	if err := q.Add("tokens", lanequeue.NewTokenLane[string](40_000)); err != nil {
		panic(err)
	}
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
		Usage:      lanehttp.UsageJSON, // 5 tokens, not the estimate's 1025
		Backoff:    100 * time.Millisecond,
	})}
	defer client.CloseIdleConnections()

	resp, err := client.Post(provider.URL+"/v1/messages", "application/json", strings.NewReader(`"hello"`))
	if err != nil {
		panic(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close() // gives the lanes back (settled at EOF)
	fmt.Println(resp.StatusCode, string(answer))
	fmt.Println("calls the provider saw:", calls.Load())
	fmt.Println("limit lowered on overload:", limit.Stats().OverloadDecreases)
	// Output:
	// 200 {"echo":"hello","usage":{"input_tokens":2,"output_tokens":3}}
	// calls the provider saw: 2
	// limit lowered on overload: 1
}

// UsageJSON reads the tokens a call used from the end of its answer:
// here the last events of a stream from Anthropic's API, whose last usage
// has the output count and whose first event the input count.
func ExampleUsageJSON() {
	tail := `event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

`
	fmt.Println(lanehttp.UsageJSON(nil, []byte(tail)))
	fmt.Println(lanehttp.UsageJSON(nil, []byte(`{"error":{"type":"overloaded_error"}}`)))
	// Output:
	// 37 true
	// 0 false
}
