package redislane

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Keyed is a semaphore per key, shared by every instance that uses the same
// Redis and the same name: with a per-key capacity of 1 (the usual case), the
// work of one key runs one at a time across the fleet, and different keys
// run in parallel. It is the distributed counterpart of keyedsem.
//
// A key costs nothing in Redis while nobody holds or waits for it: its keys
// expire two leases after their last use. All keys of a lane live in one
// Cluster slot (the lane's hash tag), so one lane is served by one Redis
// node. Close it to stop its goroutines.
//
// All methods are safe for concurrent use. As with [Weighted], every
// instance of one name must use the same per-key capacity (another capacity or
// kind fails with [ErrCapacityMismatch]) and should use the same lease (else
// see [WithQuarantine]), and the client must stay
// open until the lane is closed and its permits are released.
type Keyed struct {
	c *core
}

// NewKeyed returns the instance of the keyed lane name, with perKeyCapacity
// permits per key, on client. Like [NewWeighted], it makes no call to Redis
// and fails only for bad arguments (wrapping [ErrInvalidConfig]).
func NewKeyed(client redis.UniversalClient, name string, perKeyCapacity int64, opts ...Option) (*Keyed, error) {
	c, err := newCore(client, name, true, perKeyCapacity, opts)
	if err != nil {
		return nil, err
	}
	return &Keyed{c: c}, nil
}

// Acquire takes one permit of key; see [Keyed.AcquireN].
func (k *Keyed) Acquire(ctx context.Context, key string) (*Permit, error) {
	return k.c.acquire(ctx, key, 1)
}

// AcquireN takes n permits of key, waiting until they are free. It behaves as
// [Weighted.Acquire] for one key: one local line and one Redis queue per
// key, the same errors, the same cancellation.
func (k *Keyed) AcquireN(ctx context.Context, key string, n int64) (*Permit, error) {
	return k.c.acquire(ctx, key, n)
}

// TryAcquire takes one permit of key if Redis grants it at once; see
// [Weighted.TryAcquire].
func (k *Keyed) TryAcquire(key string) (*Permit, bool) { return k.c.tryAcquire(key, 1) }

// TryAcquireN takes n permits of key if Redis grants them at once; see
// [Weighted.TryAcquire].
func (k *Keyed) TryAcquireN(key string, n int64) (*Permit, bool) { return k.c.tryAcquire(key, n) }

// Do acquires one permit of key, runs fn, and releases it when fn returns or
// panics; see [Weighted.Do].
func (k *Keyed) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	p, err := k.Acquire(ctx, key)
	if err != nil {
		return err
	}
	return p.run(ctx, fn)
}

// Capacity returns the per-key capacity.
func (k *Keyed) Capacity() int64 { return k.c.capacity }

// Name returns the lane's name.
func (k *Keyed) Name() string { return k.c.name }

// Stats returns a snapshot of this instance.
func (k *Keyed) Stats() Stats { return k.c.stats() }

// Close behaves as [Weighted.Close].
func (k *Keyed) Close() { k.c.close() }
