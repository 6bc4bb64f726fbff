package lanehttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// TestDrainServesHandlersNestedAcquire (issue 26): a request admitted on
// its thread's lane before Drain, whose handler takes the model lane of the
// same queue with its request's context during the drain, is served and
// answered 200; a request that arrives during the drain is answered 503;
// Drain returns once the first request is done.
func TestDrainServesHandlersNestedAcquire(t *testing.T) {
	t.Parallel()
	q := lanequeue.New[string]()
	t.Cleanup(q.Close)
	must(t, q.Add("thread", lanequeue.NewKeyedLane(keyedsem.New[string]())))
	must(t, q.Add("model", lanequeue.NewGlobalLane[string](semaphore.New(1))))
	thread, err := q.Lanes("thread")
	must(t, err)
	model, err := q.Lanes("model")
	must(t, err)

	admitted, goOn := make(chan struct{}), make(chan struct{})
	h := lanehttp.Handler(lanehttp.Config[string]{
		Queue: q, Lanes: thread,
		Key: func(r *http.Request) (string, error) { return r.Header.Get("X-Thread"), nil },
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(admitted)
		<-goOn
		err := q.Do(r.Context(), "tenant-a", model, func(context.Context) error { return nil })
		if err != nil {
			http.Error(w, err.Error(), lanehttp.Status(err))
		}
	}))
	serve := func(thread string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/hook", nil)
		req.Header.Set("X-Thread", thread)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	first := testkit.Go(func() *httptest.ResponseRecorder { return serve("t-1") })
	testkit.Recv(t, admitted, "the first request's handler")
	drained := testkit.Go(func() error { return q.Drain(context.Background()) })
	testkit.Eventually(t, "the queue drains", q.Draining)

	if w := serve("t-2"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("a request during the drain = %d; want 503", w.Code)
	}
	close(goOn)
	if w := testkit.Recv(t, first, "the first request"); w.Code != http.StatusOK {
		t.Errorf("the request admitted before the drain, its model call during it = %d %q; want 200", w.Code, w.Body.String())
	}
	if err := testkit.Recv(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v; want nil", err)
	}
}
