package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// message is a chat webhook's JSON body.
type message struct {
	Thread string `json:"thread"`
	N      int64  `json:"n"` // the message's number in its thread
	Tenant string `json:"tenant"`
}

// A chat webhook whose key and options are in its JSON body: a thread's
// messages run one at a time in their numbers' order (the thread is the
// key, the number the sequence), and tenants share the model's 8 slots
// fairly (the tenant is the group). The body is decoded once: Key, Options
// and the handler read the same message, and the handler can still read
// the body. A body that is not JSON is answered 400, one over 4 KiB 413,
// before any lane is taken.
func ExampleDecoder() {
	q := lanequeue.New[string]()
	defer q.Close()
	if err := q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithSequenceOrder()))); err != nil {
		panic(err)
	}
	if err := q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(8, semaphore.WithFairShare(func(tenant string) int { return 1 })))); err != nil {
		panic(err)
	}
	lanes, err := q.Lanes("thread", "model")
	if err != nil {
		panic(err)
	}

	var ran []int64 // the messages' numbers, in the order their handlers ran
	var mu sync.Mutex
	dec := new(lanehttp.Decoder[message]) // the zero Decoder reads JSON
	webhook := lanehttp.Handler(lanehttp.Config[string]{
		Queue:        q,
		Lanes:        lanes,
		Decode:       dec,
		MaxBodyBytes: 4 << 10,
		Key: func(r *http.Request) (string, error) {
			m, _ := dec.From(r.Context()) // Decode ran first: it is there
			if m.Thread == "" {
				return "", errors.New("no thread")
			}
			return m.Thread, nil
		},
		Options: func(r *http.Request) ([]semaphore.AcquireOption, error) {
			m, _ := dec.From(r.Context())
			return []semaphore.AcquireOption{semaphore.Sequence(m.N), semaphore.Group(m.Tenant)}, nil
		},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := dec.From(r.Context())
		mu.Lock()
		ran = append(ran, m.N)
		mu.Unlock()
		body, _ := io.ReadAll(r.Body) // to forward it as it came, say
		fmt.Fprintf(w, "%s #%d of %s (%d bytes)", m.Thread, m.N, m.Tenant, len(body))
	}))

	post := func(body string) string {
		w := httptest.NewRecorder()
		webhook.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body)))
		return fmt.Sprintf("%d %q", w.Code, w.Body.String())
	}

	fmt.Println(post(`{"thread": "t-1", "n": 1, "tenant": "acme"}`))
	fmt.Println(post(`{"thread": "t-1", "n": 2,`))
	fmt.Println(post(`{"thread": "t-1", "n": 3, "tenant": "` + strings.Repeat("a", 4<<10) + `"}`))

	// Thread t-1 is busy; its messages 5 and then 4 arrive and wait. When
	// it is free, 4 runs first: its number came from its body.
	busy, err := q.AcquireAll(context.Background(), "t-1", lanes)
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	answers := make([]string, 2)
	for i, n := range []int{5, 4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = post(fmt.Sprintf(`{"thread": "t-1", "n": %d, "tenant": "acme"}`, n))
		}()
		for threadWaiters(q) < i+1 {
			runtime.Gosched() // until it waits in the thread's line
		}
	}
	busy.Release()
	wg.Wait()
	fmt.Println(answers[0]) // 5
	fmt.Println(answers[1]) // 4
	fmt.Println("t-1 ran:", ran)
	// Output:
	// 200 "t-1 #1 of acme (43 bytes)"
	// 400 "Bad Request\n"
	// 413 "Request Entity Too Large\n"
	// 200 "t-1 #5 of acme (43 bytes)"
	// 200 "t-1 #4 of acme (43 bytes)"
	// t-1 ran: [1 4 5]
}

// threadWaiters returns the callers in the thread lane's line: the lane's
// own count, which has a call once it is in line (Queue.Waiters lists it a
// moment before).
func threadWaiters(q *lanequeue.Queue[string]) int {
	for _, st := range q.Stats() {
		if st.Name == "thread" {
			return st.Waiters
		}
	}
	return 0
}
