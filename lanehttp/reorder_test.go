package lanehttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sessionlane/lanes/internal/clock"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// reorderFixture is a middleware over a keyed lane "thread" with the
// reorder hold on a fake clock; each request carries its number in
// X-Seq, and the handler records the numbers in the order it runs them.
type reorderFixture struct {
	q    *lanequeue.Queue[string]
	fake *clock.Fake
	h    http.Handler
	mu   sync.Mutex
	ran  []int64
}

const reorderHold = time.Second

func newReorderFixture(t *testing.T) *reorderFixture {
	t.Helper()
	f := &reorderFixture{q: lanequeue.New[string](), fake: clock.NewFake(time.Unix(1_700_000_000, 0))}
	t.Cleanup(f.q.Close)
	must(t, f.q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(reorderHold), keyedsem.WithClock(f.fake)))))
	set, err := f.q.Lanes("thread")
	must(t, err)
	f.h = lanehttp.Handler(lanehttp.Config[string]{
		Queue: f.q,
		Lanes: set,
		Key:   func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
		Options: func(r *http.Request) ([]semaphore.AcquireOption, error) {
			seq, err := strconv.ParseInt(r.Header.Get("X-Seq"), 10, 64)
			return []semaphore.AcquireOption{semaphore.Sequence(seq)}, err
		},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seq, _ := strconv.ParseInt(r.Header.Get("X-Seq"), 10, 64)
		f.mu.Lock()
		f.ran = append(f.ran, seq)
		f.mu.Unlock()
	}))
	return f
}

func numberedRequest(seq int64) *http.Request {
	r := request(context.Background(), "thread-1")
	r.Header.Set("X-Seq", strconv.FormatInt(seq, 10))
	return r
}

// send serves message seq and waits for its answer.
func (f *reorderFixture) send(t *testing.T, seq int64) {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- serve(f.h, numberedRequest(seq)) }()
	if w := testkit.Recv(t, done, "message "+strconv.FormatInt(seq, 10)); w.Code != http.StatusOK {
		t.Fatalf("message %d answered %d", seq, w.Code)
	}
}

// sendHeld serves message seq in a goroutine once it waits on the thread
// with its hold timer armed.
func (f *reorderFixture) sendHeld(t *testing.T, seq int64) <-chan *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- serve(f.h, numberedRequest(seq)) }()
	testkit.Eventually(t, "the message to be held", func() bool {
		return stats(t, f.q, "thread").Waiters == 1 && f.fake.Pending() == 1
	})
	return done
}

func (f *reorderFixture) order() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.ran...)
}

// TestReorderHoldThroughHandler: messages 1, 3, 2 arriving in that order
// run 1, 2, 3; 4, 6 with 5 never coming run 6 once the hold has passed.
func TestReorderHoldThroughHandler(t *testing.T) {
	f := newReorderFixture(t)
	f.send(t, 1)
	held := f.sendHeld(t, 3)
	f.send(t, 2)
	if w := testkit.Recv(t, held, "message 3"); w.Code != http.StatusOK {
		t.Fatalf("message 3 answered %d", w.Code)
	}
	if got := f.order(); !equalSeqs(got, []int64{1, 2, 3}) {
		t.Fatalf("ran %v; want [1 2 3]", got)
	}
	f.send(t, 4)
	held = f.sendHeld(t, 6)
	f.fake.Advance(reorderHold)
	if w := testkit.Recv(t, held, "message 6 after the hold"); w.Code != http.StatusOK {
		t.Fatalf("message 6 answered %d", w.Code)
	}
	if got := f.order(); !equalSeqs(got, []int64{1, 2, 3, 4, 6}) {
		t.Fatalf("ran %v; want [1 2 3 4 6]", got)
	}
	nothingHeld(t, f.q)
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
