package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// upstream is the model API's stub: it works on at most limit calls at once
// (a limit it does not publish) and answers a call that finds limit calls
// under way 429 Too Many Requests with a Retry-After.
type upstream struct {
	limit      int64
	work       func() time.Duration // how long a call takes
	retryAfter time.Duration

	inFlight    atomic.Int64 // calls arrived and not yet answered, refused ones included
	peak        atomic.Int64 // the most calls worked on at once
	arrivedPeak atomic.Int64 // the most calls in flight at once, refused ones included
	calls       atomic.Int64 // calls arrived
	refused     atomic.Int64 // of which answered 429
	mu          sync.Mutex
	rnd         *rand.Rand
}

func newUpstream(limit int64, work time.Duration, retryAfter time.Duration, seed uint64) *upstream {
	u := &upstream{limit: limit, retryAfter: retryAfter, rnd: rand.New(rand.NewPCG(seed, 1))}
	u.work = func() time.Duration { // work/2 to 3work/2
		u.mu.Lock()
		defer u.mu.Unlock()
		return work/2 + time.Duration(u.rnd.Int64N(int64(work)+1))
	}
	return u
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	prompt, _ := io.ReadAll(r.Body)
	u.calls.Add(1)
	n := u.inFlight.Add(1)
	raise(&u.arrivedPeak, n)
	if n > u.limit {
		u.inFlight.Add(-1)
		u.refused.Add(1)
		w.Header().Set("retry-after-ms", fmt.Sprint(u.retryAfter.Milliseconds()))
		w.Header().Set("Retry-After", fmt.Sprint(int(u.retryAfter.Seconds()+0.999)))
		http.Error(w, `{"error":{"type":"rate_limit_error"}}`, http.StatusTooManyRequests)
		return
	}
	raise(&u.peak, n)
	time.Sleep(u.work())
	u.inFlight.Add(-1) // before the answer: a caller that has it may call again at once
	fmt.Fprintf(w, "an answer to %d bytes", len(prompt))
}

// raise sets a to n if n is larger.
func raise(a *atomic.Int64, n int64) {
	for p := a.Load(); n > p && !a.CompareAndSwap(p, n); p = a.Load() {
	}
}
