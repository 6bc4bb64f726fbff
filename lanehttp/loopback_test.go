package lanehttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestLoopbackUnderLoadRace (issue 15): a real server on loopback, 200
// clients at once over 20 keys. Each key's first request holds its key
// (8 of them in the handler, the global bound, 12 waiting for a global
// permit), then 9 more requests per key queue behind it, numbered by a
// header. Then one more request per key finds its key's line full (429),
// and 5 clients give up (their place is given up). Once the first requests
// finish, every key's requests run in their numbers' order, never more than
// 8 at once, and nothing is held after; Shutdown and Drain end it.
func TestLoopbackUnderLoadRace(t *testing.T) {
	t.Parallel()
	const (
		keys     = 20
		perKey   = 10 // requests per key, numbered 0..9
		global   = 8
		gaveUp   = 5 // request 5 of keys 0..4 gives up while queued
		clients  = keys * perKey
		queuedBy = keys * (perKey - 1)
	)
	q := lanequeue.New[string]()
	must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithMaxWaitersPerKey(perKey-1)))))
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](semaphore.New(global))))
	set, err := q.Lanes("session", "global")
	must(t, err)

	gate := make(chan struct{}) // holds the first request of each key
	var (
		inflight, maxInflight atomic.Int64
		mu                    sync.Mutex
		order                 = map[string][]int{} // guarded by mu
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := maxInflight.Load(); n > m && !maxInflight.CompareAndSwap(m, n); m = maxInflight.Load() {
		}
		seq, _ := strconv.Atoi(r.Header.Get("X-Seq"))
		if seq == 0 {
			<-gate
		}
		mu.Lock()
		order[r.Header.Get("X-Key")] = append(order[r.Header.Get("X-Key")], seq)
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: set,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
		Options: func(r *http.Request) ([]semaphore.AcquireOption, error) {
			seq, err := strconv.ParseInt(r.Header.Get("X-Seq"), 10, 64)
			if err != nil {
				return nil, err
			}
			return []semaphore.AcquireOption{semaphore.Sequence(seq)}, nil
		},
	}, handler)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: h}
	served := testkit.Go(func() error { return srv.Serve(ln) })
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/chat"

	type result struct {
		status     int
		retryAfter string
		err        error
	}
	do := func(ctx context.Context, key, seq int) result {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return result{err: err}
		}
		req.Header.Set("X-Key", "k"+strconv.Itoa(key))
		req.Header.Set("X-Seq", strconv.Itoa(seq))
		resp, err := client.Do(req)
		if err != nil {
			return result{err: err}
		}
		resp.Body.Close()
		return result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	}
	results := make([][]result, keys)
	cancels := make([]context.CancelFunc, keys)
	var wg sync.WaitGroup
	start := func(k, seq int) {
		ctx, cancel := context.WithCancel(context.Background())
		if seq == gaveUp {
			cancels[k] = cancel
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			results[k][seq] = do(ctx, k, seq)
		}()
	}
	waiting := func(lane string) int { return stats(t, q, lane).Waiters }

	for k := range keys {
		results[k] = make([]result, perKey)
		start(k, 0)
	}
	testkit.Eventually(t, "every key's first request holds its key", func() bool {
		return stats(t, q, "session").Held == keys && inflight.Load() == global && waiting("global") == keys-global
	})
	for k := range keys {
		for seq := 1; seq < perKey; seq++ {
			start(k, seq)
		}
	}
	testkit.Eventually(t, "all 200 clients in", func() bool { return waiting("session") == queuedBy })

	// One more per key: its line is full.
	var tooMany atomic.Int64
	var probes sync.WaitGroup
	for k := range keys {
		probes.Add(1)
		go func() {
			defer probes.Done()
			r := do(context.Background(), k, perKey)
			if r.status == http.StatusTooManyRequests && r.retryAfter == "1" {
				tooMany.Add(1)
			} else {
				t.Errorf("a request over key k%d's full line: %+v; want 429, Retry-After 1", k, r)
			}
		}()
	}
	testkit.WaitAll(t, &probes, "the requests over full lines")

	// Some clients give up: their places go.
	for k := range gaveUp {
		cancels[k]()
	}
	testkit.Eventually(t, "the clients that gave up leave the line", func() bool { return waiting("session") == queuedBy-gaveUp })

	close(gate)
	testkit.WaitAll(t, &wg, "the clients")

	if n := tooMany.Load(); n != keys {
		t.Errorf("%d answers 429; want %d", n, keys)
	}
	ok := 0
	for k := range keys {
		for seq, r := range results[k] {
			switch {
			case k < gaveUp && seq == gaveUp:
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("k%d/%d gave up: %+v; want its own context.Canceled", k, seq, r)
				}
			case r.err != nil || r.status != http.StatusOK:
				t.Errorf("k%d/%d: %+v; want 200", k, seq, r)
			default:
				ok++
			}
		}
	}
	if ok != clients-gaveUp {
		t.Errorf("%d answers 200; want %d", ok, clients-gaveUp)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		if k < gaveUp {
			want = slices.Delete(want, gaveUp, gaveUp+1)
		}
		if got := order["k"+strconv.Itoa(k)]; !slices.Equal(got, want) {
			t.Errorf("key k%d ran %v; want %v", k, got, want)
		}
	}
	if m := maxInflight.Load(); m != global {
		t.Errorf("at most %d handlers at once; want the global bound, %d", m, global)
	}
	nothingHeld(t, q)

	ctx := context.Background()
	must(t, srv.Shutdown(ctx))
	must(t, q.Drain(ctx))
	if err := testkit.Recv(t, served, "Serve"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve = %v; want ErrServerClosed", err)
	}
	nothingHeld(t, q)
}
