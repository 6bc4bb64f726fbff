package lanequeue_test

import (
	"context"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// The tests of the acquiring calls name their lanes inline, as lists of
// names; these helpers prepare the set on q for each call and call q's
// method with it, so that an error of Lanes (an unknown, repeated or empty
// list, a closed queue) is the call's error. Programs prepare their sets
// once instead (see Queue.Lanes); laneset_test.go tests that path.

func acquireAll[K comparable](q *lanequeue.Queue[K], ctx context.Context, key K, names []string, opts ...semaphore.AcquireOption) (*lanequeue.Ticket[K], error) {
	ls, err := q.Lanes(names...)
	if err != nil {
		return nil, err
	}
	return q.AcquireAll(ctx, key, ls, opts...)
}

func tryAcquireAll[K comparable](q *lanequeue.Queue[K], key K, names []string, opts ...semaphore.AcquireOption) (*lanequeue.Ticket[K], bool) {
	ls, err := q.Lanes(names...)
	if err != nil {
		return nil, false
	}
	return q.TryAcquireAll(key, ls, opts...)
}

func doAll[K comparable](q *lanequeue.Queue[K], ctx context.Context, key K, names []string, fn func(context.Context) error, opts ...semaphore.AcquireOption) error {
	ls, err := q.Lanes(names...)
	if err != nil {
		return err
	}
	return q.Do(ctx, key, ls, fn, opts...)
}

func check[K comparable](q *lanequeue.Queue[K], names []string, opts ...semaphore.AcquireOption) error {
	ls, err := q.Lanes(names...)
	if err != nil {
		return err
	}
	return q.Check(ls, opts...)
}
