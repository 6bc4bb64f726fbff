package lanequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// A keyed lane made keyedsem.WithBarging keeps no places: Join on a set
// with it is refused, naming the lane, with an error that matches
// ErrInvalidConfig, and takes nothing; AcquireAll on the lane still works.
func TestJoinRefusedOnABargingKeyedLane(t *testing.T) {
	q := lanequeue.New[string]()
	must(t, addKeyed(q, "rows", keyedsem.WithBarging(time.Millisecond)))
	ls, err := q.Lanes("rows")
	must(t, err)
	pl, err := q.Join("row-1", ls)
	if !errors.Is(err, semaphore.ErrInvalidConfig) || !strings.Contains(err.Error(), "rows") || pl != nil {
		t.Fatalf("Join on a barging keyed lane = %v, %v; want nil and an error naming the lane that matches ErrInvalidConfig", pl, err)
	}
	tk, err := q.AcquireAll(context.Background(), "row-1", ls)
	must(t, err)
	tk.Release()
}
