package lanehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/internal/testkit"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanehttp"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// errBoom is what the user's functions panic with in these tests.
var errBoom = errors.New("boom")

// roundTripPanicking sends a GET through tr and returns what the round
// trip panicked with (nil if it returned).
func roundTripPanicking(tr http.RoundTripper) (v any) {
	defer func() { v = recover() }()
	tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://provider.test/", nil))
	return nil
}

// panicking serves r through h and returns what the request panicked with.
func panicking(h http.Handler, r *http.Request) (v any) {
	defer func() { v = recover() }()
	serve(h, r)
	return nil
}

// panicsAndHoldsNothing serves a request through h, which must panic with
// errBoom, and checks that no lane of q is left held or waited on and that a
// request after it is served: a request that returns no ticket holds
// nothing.
func panicsAndHoldsNothing(t *testing.T, q *lanequeue.Queue[string], h, ok http.Handler) {
	t.Helper()
	if v := panicking(h, request(context.Background(), "k")); v != errBoom {
		t.Fatalf("the request panicked with %v; want the user function's panic to go on", v)
	}
	nothingHeld(t, q)
	// The lanes are of capacity 1: a request after it gets them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w := serve(ok, request(ctx, "k")); w.Code != http.StatusOK {
		t.Fatalf("the request after the panic: answer %d; want 200", w.Code)
	}
	nothingHeld(t, q)
}

// panicQueue is a queue of a keyed lane and a global lane of capacity 1,
// with obs observing the global lane if not nil.
func panicQueue(t *testing.T, obs lanequeue.Observer) (*lanequeue.Queue[string], lanequeue.LaneSet[string]) {
	t.Helper()
	q := lanequeue.Default[string](1)
	t.Cleanup(q.Close)
	if obs != nil {
		must(t, q.ObserveLane("global", obs))
	}
	set, err := q.Lanes("session", "global")
	must(t, err)
	return q, set
}

var (
	keyOK = func(*http.Request) (string, error) { return "k", nil }
	reply = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
)

// TestUserFunctionPanicsHoldNothing (issue 22): whichever function of the
// user's panics (Key, Options, Reject before any lane is taken; the
// handler, Outcome, or an observer's classifier while the ticket is held),
// the panic goes on (net/http recovers it) and every lane is given back.
func TestUserFunctionPanicsHoldNothing(t *testing.T) {
	t.Parallel()
	t.Run("Key", func(t *testing.T) {
		q, set := panicQueue(t, nil)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set,
			Key: func(*http.Request) (string, error) { panic(errBoom) }}, reply)
		panicsAndHoldsNothing(t, q, h, lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK}, reply))
	})
	t.Run("Options", func(t *testing.T) {
		q, set := panicQueue(t, nil)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK,
			Options: func(*http.Request) ([]semaphore.AcquireOption, error) { panic(errBoom) }}, reply)
		panicsAndHoldsNothing(t, q, h, lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK}, reply))
	})
	t.Run("Reject of a 400", func(t *testing.T) {
		q, set := panicQueue(t, nil)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set,
			Key:    func(*http.Request) (string, error) { return "", errors.New("no key") },
			Reject: func(http.ResponseWriter, *http.Request, int, error) { panic(errBoom) }}, reply)
		panicsAndHoldsNothing(t, q, h, lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK}, reply))
	})
	t.Run("Reject of a refusal", func(t *testing.T) {
		q, set := panicQueue(t, nil)
		// The global lane is held: the request takes its key's lane, waits
		// for the global one until its deadline, and is refused (503)
		// after giving the key's lane back.
		busy, err := q.AcquireAll(context.Background(), "other", set)
		must(t, err)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK,
			Reject: func(http.ResponseWriter, *http.Request, int, error) { panic(errBoom) }}, reply)
		// The deadline passes once the request waits for the global lane
		// (testkit.Expiring): a timer's could pass before it reaches the lanes,
		// and nothing would have been granted to give back.
		ctx := testkit.NewExpiring()
		got := testkit.Go(func() any { return panicking(h, request(ctx, "k")) })
		testkit.Eventually(t, "the request waits on the global lane", func() bool {
			return stats(t, q, "global").Waiters == 1
		})
		ctx.Expire()
		if v := testkit.Recv(t, got, "the refused request"); v != errBoom {
			t.Fatalf("the refused request panicked with %v; want Reject's panic to go on", v)
		}
		if st := stats(t, q, "session"); st.Acquired != 2 || st.Held != 1 {
			t.Fatalf("session lane: %d acquired, %d held; want the refused request's grant given back", st.Acquired, st.Held)
		}
		busy.Release()
		nothingHeld(t, q)
	})
	t.Run("Outcome", func(t *testing.T) {
		obs := &observed{}
		q, set := panicQueue(t, obs)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK,
			Outcome: func(int) error { panic(errBoom) }}, reply)
		panicsAndHoldsNothing(t, q, h, lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK}, reply))
		if errs := obs.take(); len(errs) != 1 {
			t.Fatalf("observed %v; want only the second request's outcome (Outcome panicked for the first)", errs)
		}
	})
	t.Run("adaptive classifier", func(t *testing.T) {
		q := lanequeue.New[string]()
		t.Cleanup(q.Close)
		sem := semaphore.New(1)
		must(t, q.Add("session", lanequeue.NewKeyedLane(keyedsem.New[string]())))
		must(t, q.Add("global", lanequeue.NewGlobalLane[string](sem)))
		panics := true
		ctl, err := adaptive.New(sem, 1, 1, adaptive.WithClassifier(func(error) adaptive.Outcome {
			if panics {
				panics = false
				panic(errBoom)
			}
			return adaptive.Success
		}))
		must(t, err)
		must(t, q.ObserveLane("global", ctl))
		set, err := q.Lanes("session", "global")
		must(t, err)
		h := lanehttp.Handler(lanehttp.Config[string]{Queue: q, Lanes: set, Key: keyOK}, reply)
		panicsAndHoldsNothing(t, q, h, h)
	})
}
