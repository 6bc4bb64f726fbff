package lanehttp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestShrunkGlobalLaneIs503: a global lane whose capacity a limit controller shrank below a
// request's weight (adaptive over the lane's semaphore) refuses it with
// ErrTooHeavy; that is transient (the controller grows it back), so the
// middleware answers 503 with a Retry-After, not 500, "what no retry
// mends".
func TestShrunkGlobalLaneIs503(t *testing.T) {
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	s := semaphore.New(4)
	must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	must(t, q.Add("global", lanequeue.NewGlobalLane[string](s)))
	set, err := q.Lanes("session", "global")
	must(t, err)
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: set,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Key"), nil },
		Options: func(*http.Request) ([]semaphore.AcquireOption, error) {
			return []semaphore.AcquireOption{lanequeue.LaneWeight("global", 3)}, nil
		},
	}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.SetCapacity(2) // what adaptive.Controller does on overload
	w := serve(h, request(context.Background(), "a"))
	if w.Code == http.StatusInternalServerError || w.Header().Get("Retry-After") == "" {
		t.Errorf("answer %d, Retry-After %q for a lane shrunk under the weight; want 503 with a Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
}
