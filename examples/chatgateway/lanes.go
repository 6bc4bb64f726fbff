package main

import (
	"context"
	"errors"
	"time"

	"github.com/sessionlane/lanes/adaptive"
	"github.com/sessionlane/lanes/keyedsem"
	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// This file holds every call the recipe makes on package lanequeue: the
// lanes, their orders, and the drain.

// lanes is the gateway's queue: a webhook takes a thread lane and a share
// of the agent runs (inbound); its model calls take the model lane
// (outbound, through lanehttp.Transport).
type lanes struct {
	q       *lanequeue.Queue[string]
	inbound lanequeue.LaneSet[string]
	model   lanequeue.LaneSet[string]
	limit   *adaptive.Controller
	thread  *keyedsem.Keyed[string] // the "thread" lane's, for its Stats
}

// newLanes makes the three lanes:
//   - "thread", keyed by thread id: one message of a thread at a time, in
//     the order of their numbers, holding a message whose predecessor has
//     not arrived for up to hold;
//   - "agents", global: at most agents runs at once, users before cron
//     jobs (priorities, aged by priorityStep) and, within each, tenants
//     sharing equally (fair share);
//   - "model", global: the calls in flight to the model API, a limit that
//     an AIMD controller moves between 1 and modelCeiling as the API
//     answers (lanehttp.Transport reports its 429s and pauses the lane for
//     their Retry-After).
//
// probeEvery spaces the controller's probes above the limit it found: one
// per this many calls, each costing a 429 or two when the limit is there.
const probeEvery = 200

func newLanes(agents, modelCeiling int64, hold, priorityStep time.Duration) (*lanes, error) {
	q := lanequeue.New[string]()
	thread := keyedsem.New[string](keyedsem.WithSequenceOrder(), keyedsem.WithReorderHold(hold))
	model := semaphore.New(modelCeiling)
	l := &lanes{q: q, thread: thread}
	err := q.Add("thread", lanequeue.NewKeyedLane(thread))
	if err == nil {
		err = q.Add("agents", lanequeue.NewGlobalLane[string](semaphore.New(agents,
			semaphore.WithPriorities(priorityStep), semaphore.WithFairShare(nil))))
	}
	if err == nil {
		err = q.Add("model", lanequeue.NewGlobalLane[string](model))
	}
	if err == nil {
		l.limit, err = adaptive.New(model, 1, modelCeiling, adaptive.WithMinWindow(probeEvery))
	}
	if err == nil {
		err = q.ObserveLane("model", l.limit)
	}
	if err == nil {
		l.inbound, err = q.Lanes("thread", "agents")
	}
	if err == nil {
		l.model, err = q.Lanes("model")
	}
	if err != nil {
		q.Close()
		return nil, err
	}
	return l, nil
}

// drain refuses new webhooks and lets the admitted ones finish, their model
// calls included (they carry the webhook's ticket in their context).
func (l *lanes) drain(ctx context.Context) error { return l.q.Drain(ctx) }

// holdsRunOut is how many messages went when their reorder hold ran out,
// a predecessor still missing.
func (l *lanes) holdsRunOut() uint64 { return l.thread.Stats().HoldsRunOut }

// refusedByLanes says whether err is a lane's refusal of a closed or
// draining queue.
func refusedByLanes(err error) bool { return errors.Is(err, semaphore.ErrClosed) }
