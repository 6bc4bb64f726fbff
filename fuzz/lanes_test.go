package fuzz_test

import (
	"context"

	"github.com/sessionlane/lanes/lanequeue"
)

// The queue driver draws lists of names, valid or not; lanequeue's calls
// take a set prepared by Queue.Lanes. acquireAll and tryAcquireAll prepare
// the set for each call, so that an error of Lanes (an unknown or repeated
// name, an empty list, a closed queue) is the call's error, as the model
// expects.

func acquireAll(q *lanequeue.Queue[string], ctx context.Context, key string, names []string, opts ...lanequeue.AcquireOption) (*lanequeue.Ticket[string], error) {
	ls, err := q.Lanes(names...)
	if err != nil {
		return nil, err
	}
	return q.AcquireAll(ctx, key, ls, opts...)
}

func tryAcquireAll(q *lanequeue.Queue[string], key string, names []string, opts ...lanequeue.AcquireOption) (*lanequeue.Ticket[string], bool) {
	ls, err := q.Lanes(names...)
	if err != nil {
		return nil, false
	}
	return q.TryAcquireAll(key, ls, opts...)
}
