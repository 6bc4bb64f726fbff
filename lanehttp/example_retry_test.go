package lanehttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sessionlane/lanes/lanehttp"
)

// A gateway's calls to model providers came back refused; the classifier
// says, of each, whether to try again, whether the provider is over its
// limit, and how long it asked to wait. The first provider sends
// Retry-After; the second only its limits' reset times, and its token
// limit is the one out; the third is overloaded as a whole and names no
// time, so the gateway's own backoff decides; a malformed request is
// not tried again.
func ExampleDefaultClassifier() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/anthropic/v1/messages":
			h.Set("Date", "Wed, 02 Dec 2026 05:00:00 GMT")
			h.Set("Retry-After", "20")
			h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
			h.Set("Anthropic-Ratelimit-Requests-Reset", "2026-12-02T05:00:20Z")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/openai/v1/chat/completions":
			h.Set("X-Ratelimit-Remaining-Requests", "59")
			h.Set("X-Ratelimit-Reset-Requests", "1s")
			h.Set("X-Ratelimit-Remaining-Tokens", "0")
			h.Set("X-Ratelimit-Reset-Tokens", "12.5s")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/busy/v1/messages":
			w.WriteHeader(529)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer provider.Close()

	for _, path := range []string{"/anthropic/v1/messages", "/openai/v1/chat/completions", "/busy/v1/messages", "/bad"} {
		req, err := http.NewRequest(http.MethodPost, provider.URL+path, strings.NewReader(`{"model":"m"}`))
		if err != nil {
			panic(err)
		}
		resp, err := provider.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		v := lanehttp.DefaultClassifier(lanehttp.Attempt{Request: req, Response: resp, Now: time.Now()})
		after := "no hint"
		if v.HasAfter {
			after = "after " + v.After.String()
		}
		fmt.Printf("%s: %d retry=%v overload=%v %s\n", path, resp.StatusCode, v.Retry, v.Overload, after)
	}
	// Output:
	// /anthropic/v1/messages: 429 retry=true overload=true after 20s
	// /openai/v1/chat/completions: 429 retry=true overload=true after 12.5s
	// /busy/v1/messages: 529 retry=true overload=true no hint
	// /bad: 400 retry=false overload=false no hint
}
