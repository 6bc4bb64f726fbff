package redislane

import (
	"context"

	"github.com/sessionlane/lanes/lanequeue"
	"github.com/sessionlane/lanes/semaphore"
)

// AsLane returns s as a global lane of a [lanequeue.Queue]: it ignores the
// key. Its permits are semaphore.Permit values whose Release runs the Redis
// release; [PermitOf] gives their fencing token and context. Closing the
// lane closes s.
func AsLane[K comparable](s *Weighted) lanequeue.Lane[K] {
	return &lane[K]{c: s.c, key: func(K) string { return "" }}
}

// AsKeyedLane returns k as a keyed lane of a [lanequeue.Queue], with key
// turning a queue key into the Redis key (for string keys, the identity).
// Equal queue keys must give equal strings, and different ones different
// strings. Closing the lane closes k.
func AsKeyedLane[K comparable](k *Keyed, key func(K) string) lanequeue.Lane[K] {
	return &lane[K]{c: k.c, key: key}
}

type lane[K comparable] struct {
	c   *core
	key func(K) string
}

func (l *lane[K]) Kind() lanequeue.Kind {
	if l.c.keyed {
		return lanequeue.Keyed
	}
	return lanequeue.Global
}

func (l *lane[K]) MaxWeight() int64 { return l.c.limit() }

func (l *lane[K]) Acquire(ctx context.Context, key K, n int64) (semaphore.Permit, error) {
	p, err := l.c.acquire(ctx, l.key(key), n)
	if err != nil {
		return semaphore.Permit{}, err
	}
	return p.handle(), nil
}

func (l *lane[K]) TryAcquire(key K, n int64) (semaphore.Permit, bool) {
	p, ok := l.c.tryAcquire(l.key(key), n)
	if !ok {
		return semaphore.Permit{}, false
	}
	return p.handle(), true
}

func (l *lane[K]) Stats() lanequeue.LaneStats {
	s := l.c.stats()
	return lanequeue.LaneStats{
		Name: s.Name, Kind: l.Kind(), Capacity: s.Capacity, Held: s.Held, Waiters: s.Waiters, Keys: s.Keys,
		Closed: s.Closed, Counters: s.Counters,
	}
}

func (l *lane[K]) Close() { l.c.close() }
