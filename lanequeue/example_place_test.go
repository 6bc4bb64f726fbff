package lanequeue_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/sessionlane/lanes/lanequeue"
)

// A chat webhook (Slack-style events, one request per message) must answer
// at once, or the sender retries; the work comes later. The handler takes
// the message's place in its thread's line with Join, hands the place to a
// worker and answers 202 Accepted without waiting. Each worker waits for
// its place (the thread's earlier messages done, then a global slot) and
// handles the message. Workers start in whatever order the scheduler
// picks, but a thread's messages are handled in the order the webhook
// joined them.
func Example_webhook() {
	q := lanequeue.Default[string](16) // "session" (per thread) + "global" (16)
	defer q.Close()
	chat, err := q.Lanes("session", "global")
	if err != nil {
		panic(err)
	}

	var mu sync.Mutex
	handled := map[string][]string{} // thread -> messages in the order handled
	var workers sync.WaitGroup
	webhook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		thread, text := r.FormValue("thread"), r.FormValue("text")
		place, err := q.Join(thread, chat)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		workers.Add(1)
		go func() { // the worker owns the place now
			defer workers.Done()
			t, err := place.Wait(context.Background())
			if err != nil {
				fmt.Println(err)
				return
			}
			defer t.Release()
			mu.Lock()
			handled[thread] = append(handled[thread], text) // "call the model"
			mu.Unlock()
		}()
		w.WriteHeader(http.StatusAccepted)
	})

	events := []struct{ thread, text string }{
		{"slack:T1", "hi"},
		{"slack:T2", "deploy?"},
		{"slack:T1", "what's the weather?"},
		{"slack:T2", "status?"},
		{"slack:T1", "thanks"},
	}
	for _, ev := range events {
		body := url.Values{"thread": {ev.thread}, "text": {ev.text}}.Encode()
		req := httptest.NewRequest(http.MethodPost, "/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		webhook.ServeHTTP(rec, req)
		fmt.Printf("%s %q: %d\n", ev.thread, ev.text, rec.Code)
	}
	workers.Wait()

	for _, th := range slices.Sorted(maps.Keys(handled)) {
		fmt.Printf("%s handled: %s\n", th, strings.Join(handled[th], " | "))
	}
	// Output:
	// slack:T1 "hi": 202
	// slack:T2 "deploy?": 202
	// slack:T1 "what's the weather?": 202
	// slack:T2 "status?": 202
	// slack:T1 "thanks": 202
	// slack:T1 handled: hi | what's the weather? | thanks
	// slack:T2 handled: deploy? | status?
}
