package lanequeue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A weight above a lane's MaxWeight is found before anything is taken,
// and the error names the lane all the same (LaneError's doc said it was
// not a LaneError), with the call's key on a keyed lane (Key was nil).
func TestTooHeavyIsALaneErrorWithItsKey(t *testing.T) {
	q := testQueue(t, 2)
	set, err := q.Lanes("session", "global")
	must(t, err)
	for _, c := range []struct {
		name string
		opt  semaphore.AcquireOption
		lane string
		kind lanequeue.Kind
		key  any
	}{
		{"keyed", lanequeue.LaneWeight("session", 2), "session", lanequeue.Keyed, "k"},
		{"global", lanequeue.LaneWeight("global", 3), "global", lanequeue.Global, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(what string, err error, key any) {
				t.Helper()
				var le *lanequeue.LaneError
				if !errors.Is(err, semaphore.ErrTooHeavy) || !errors.As(err, &le) || le.Lane != c.lane || le.Kind != c.kind || le.Key != key {
					t.Errorf("%s = %#v; want a LaneError of lane %q (%s), key %v, wrapping ErrTooHeavy", what, err, c.lane, c.kind, key)
				}
			}
			_, err := q.AcquireAll(context.Background(), "k", set, c.opt)
			check("AcquireAll", err, c.key)
			_, err = q.Join("k", set, c.opt)
			check("Join", err, c.key)
			check("Check", q.Check(set, c.opt), nil) // no key to name
		})
	}
	assertNothingHeld(t, q)
}
